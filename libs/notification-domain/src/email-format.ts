/** Formatting helpers shared by the e-mail templates and feed messages. Pure functions, no I/O. */

export const PRODUCT_NAME = 'Security Telemetry';

/** Escapes text for HTML element content and double- or single-quoted attribute values. */
export function escapeHtml(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** A header value on one line: control characters (CR, LF, …) become spaces. */
export function headerSafe(value: string): string {
  return value.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}

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
  return `${codePoints.slice(0, Math.max(0, maxLength - 1)).join('').trimEnd()}…`;
}

/** `2026-03-01 14:05 UTC` */
export function formatUtc(date: Date): string {
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

export function trimSlashes(url: string): string {
  return url.replace(/\/+$/, '');
}

/**
 * One argument for a POSIX shell: as it is when it holds only characters no shell treats specially
 * (so ordinary keys, codes and URLs read naturally), otherwise single-quoted.
 */
export function shellArg(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
