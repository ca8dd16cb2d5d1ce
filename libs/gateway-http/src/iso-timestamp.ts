/**
 * `Date.prototype.toISOString`, about five times faster: V8's takes ~0.4 µs, which was most of the
 * cost of writing a page of devices (two timestamps per device). Same output for every time value
 * in years 0000–9999; outside them (and for invalid dates) it defers to toISOString.
 */
export function isoTimestamp(date: Date): string {
  const ms = date.getTime();
  if (!(ms >= MIN_MS && ms <= MAX_MS)) return date.toISOString();
  const days = Math.floor(ms / DAY_MS);
  const msOfDay = ms - days * DAY_MS;
  // Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's civil_from_days).
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1_460) +
      Math.floor(dayOfEra / 36_524) -
      Math.floor(dayOfEra / 146_096)) /
      365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const monthIndex = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * monthIndex + 2) / 5) + 1;
  const month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);

  const hours = Math.floor(msOfDay / 3_600_000);
  const minutes = Math.floor(msOfDay / 60_000) % 60;
  const seconds = Math.floor(msOfDay / 1_000) % 60;
  const millis = msOfDay % 1_000;
  return (
    (year < 1000 ? String(year).padStart(4, '0') : String(year)) +
    '-' +
    TWO_DIGITS[month] +
    '-' +
    TWO_DIGITS[day] +
    'T' +
    TWO_DIGITS[hours] +
    ':' +
    TWO_DIGITS[minutes] +
    ':' +
    TWO_DIGITS[seconds] +
    '.' +
    (millis < 10 ? '00' : millis < 100 ? '0' : '') +
    String(millis) +
    'Z'
  );
}

const DAY_MS = 86_400_000;
/** 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z. */
const MIN_MS = -62_167_219_200_000;
const MAX_MS = 253_402_300_799_999;
const TWO_DIGITS = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'));
