import { relativeTime, utcTitle } from './relative-time';

describe('relativeTime', () => {
  const now = new Date('2026-11-27T12:00:00Z');
  const ago = (ms: number): Date => new Date(now.getTime() - ms);

  it.each([
    [ago(10_000), 'just now'],
    [ago(60_000), '1 min ago'],
    [ago(5 * 60_000), '5 min ago'],
    [ago(59 * 60_000), '59 min ago'],
    [ago(3 * 3_600_000), '3 h ago'],
    [ago(86_400_000), '1 day ago'],
    [ago(3 * 86_400_000), '3 days ago'],
    [ago(90 * 86_400_000), '3 months ago'],
    [ago(800 * 86_400_000), '2 years ago'],
    [new Date(now.getTime() + 2 * 3_600_000), 'in 2 h'],
  ])('%p -> %p', (when, expected) => {
    expect(relativeTime(when, now)).toBe(expected);
  });

  it('reads ISO strings and says unknown for nonsense', () => {
    expect(relativeTime('2026-11-27T11:55:00Z', now)).toBe('5 min ago');
    expect(relativeTime('nope', now)).toBe('unknown');
  });
});

describe('utcTitle', () => {
  it('is the ISO time in UTC', () => {
    expect(utcTitle('2026-11-27T11:55:00.000Z')).toBe('2026-11-27T11:55:00.000Z');
    expect(utcTitle('2026-11-27T12:55:00.250+01:00')).toBe('2026-11-27T11:55:00.250Z');
    expect(utcTitle('nope')).toBe('nope');
  });
});
