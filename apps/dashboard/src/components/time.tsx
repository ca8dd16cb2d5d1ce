import { useEffect, useState } from 'react';
import { relativeTime, utcTitle } from '../lib/relative-time';

const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** The current time, ticking every 30 seconds, for relative times. */
function useNow(intervalMs = 30_000): Date {
  const [now, setNow] = useState(() => new Date());
  useEffect(() => {
    const timer = setInterval(() => setNow(new Date()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
  return now;
}

/** A time in the viewer's time zone, with the exact UTC time in the title. */
export function Time({ value }: { value: string | null | undefined }) {
  if (!value) return <span>—</span>;
  const date = new Date(value);
  return (
    <time dateTime={value} title={utcTitle(value)}>
      {Number.isFinite(date.getTime()) ? absolute.format(date) : value}
    </time>
  );
}

/** "5 min ago", with the exact UTC time (ISO 8601) in the title and the local time for screen readers. */
export function RelativeTime({ value }: { value: string | null | undefined }) {
  const now = useNow();
  if (!value) return <span>never</span>;
  const date = new Date(value);
  const local = Number.isFinite(date.getTime()) ? absolute.format(date) : value;
  return (
    <time dateTime={value} title={utcTitle(value)}>
      {relativeTime(date, now)}
      <span className="visually-hidden"> ({local})</span>
    </time>
  );
}
