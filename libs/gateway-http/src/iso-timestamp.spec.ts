import { isoTimestamp } from './iso-timestamp';

describe('isoTimestamp', () => {
  const same = (ms: number) => expect(isoTimestamp(new Date(ms))).toBe(new Date(ms).toISOString());

  it('matches toISOString at the edges of days, months, leap years, centuries and its range', () => {
    for (const text of [
      '1970-01-01T00:00:00.000Z',
      '1969-12-31T23:59:59.999Z',
      '2000-02-29T12:34:56.789Z',
      '1900-03-01T00:00:00.000Z',
      '2100-02-28T23:59:59.999Z',
      '2024-12-31T23:59:59.999Z',
      '2026-11-21T12:01:05.006Z',
      '0000-01-01T00:00:00.000Z',
      '0999-12-31T23:59:59.999Z',
      '9999-12-31T23:59:59.999Z',
      '1600-02-29T00:00:00.050Z',
    ]) {
      expect(isoTimestamp(new Date(text))).toBe(text);
    }
  });

  it('matches toISOString for every day of eight centuries and random instants', () => {
    const span = 253_402_300_799_999 + 62_167_219_200_000;
    const instants = [
      ...Array.from(
        { length: 146_097 * 2 },
        (_, i) => (i - 146_097) * 86_400_000 + ((i * 7_919) % 86_400_000),
      ),
      ...Array.from({ length: 100_000 }, () => Math.floor(Math.random() * span) - 62_167_219_200_000),
    ];
    const mismatches = instants.filter((ms) => isoTimestamp(new Date(ms)) !== new Date(ms).toISOString());
    expect(mismatches.map((ms) => new Date(ms).toISOString())).toEqual([]);
  });

  it('defers to toISOString outside years 0000–9999 and throws for invalid dates as it does', () => {
    same(-62_167_219_200_001);
    same(253_402_300_800_000);
    same(8.64e15);
    expect(() => isoTimestamp(new Date(Number.NaN))).toThrow(RangeError);
  });
});
