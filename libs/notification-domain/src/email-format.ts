/** Formatting helpers shared by the e-mail templates and feed messages. Pure functions, no I/O. */

export const PRODUCT_NAME = 'Security Telemetry';

/** A header value on one line: control characters (CR, LF, …) become spaces. */
export function headerSafe(value: string): string {
  return value.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}

/** `2026-03-01 14:05 UTC` */
export function formatUtc(date: Date): string {
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/**
 * One argument for a POSIX shell: as it is when it holds only characters no shell treats specially
 * (so ordinary keys, codes and URLs read naturally), otherwise single-quoted.
 */
export function shellArg(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
