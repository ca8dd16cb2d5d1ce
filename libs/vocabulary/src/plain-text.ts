/** Longest person or organization name stored or shown, in code points. */
export const NAME_MAX_LENGTH = 200;
/** Longest e-mail address (RFC 5321's path limit). */
export const EMAIL_MAX_LENGTH = 254;

/** Line breaks and other whitespace controls: they become one space. */
const LINE_BREAKS = /[\t\n\u000b\f\r\u0085\u2028\u2029]/g;
/**
 * Invisible characters that can disguise text: C0/C1 controls (NUL, ESC, …), format characters
 * (bidirectional overrides such as U+202E, zero-width spaces and joiners, soft hyphen) and lone
 * surrogates. They are removed.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}]/gu;

/**
 * Untrusted text (a hostname reported by an agent, a name from an identity provider) as one line of
 * plain text: NFC-normalised, line breaks become spaces, invisible and control characters are removed,
 * runs of whitespace become one space, trimmed, and at most `maxLength` code points (a longer value
 * ends with `…` within the limit). Not HTML-escaped: whoever renders it as HTML escapes it.
 */
export function plainTextLine(value: string, maxLength: number): string {
  const cleaned = value
    .normalize('NFC')
    .replace(LINE_BREAKS, ' ')
    .replace(INVISIBLE, '')
    .replace(/\s+/gu, ' ')
    .trim();
  const codePoints = Array.from(cleaned);
  if (codePoints.length <= maxLength) return cleaned;
  return `${codePoints
    .slice(0, Math.max(0, maxLength - 1))
    .join('')
    .trimEnd()}…`;
}
