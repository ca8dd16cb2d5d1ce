/**
 * "5 min ago", "in 3 h", "2 days ago": short relative times for tables. The exact time goes in a
 * title beside it (see components/time.tsx).
 */
export function relativeTime(when: Date | string, now: Date): string {
  const at = typeof when === 'string' ? new Date(when) : when;
  const deltaMs = at.getTime() - now.getTime();
  if (!Number.isFinite(deltaMs)) return 'unknown';
  const seconds = Math.round(Math.abs(deltaMs) / 1000);
  if (seconds < 45) return 'just now';
  const phrase = (amount: number, unit: string): string =>
    deltaMs < 0 ? `${amount} ${unit} ago` : `in ${amount} ${unit}`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return phrase(Math.max(1, minutes), 'min');
  const hours = Math.round(seconds / 3600);
  if (hours < 24) return phrase(hours, 'h');
  const days = Math.round(seconds / 86_400);
  if (days < 45) return phrase(days, days === 1 ? 'day' : 'days');
  const months = Math.round(days / 30);
  if (months < 12) return phrase(months, months === 1 ? 'month' : 'months');
  const years = Math.round(days / 365);
  return phrase(years, years === 1 ? 'year' : 'years');
}

/** The exact time as an ISO 8601 string in UTC, for titles: 2026-11-27T16:42:10.000Z. */
export function utcTitle(when: Date | string): string {
  const at = typeof when === 'string' ? new Date(when) : when;
  return Number.isFinite(at.getTime()) ? at.toISOString() : String(when);
}
