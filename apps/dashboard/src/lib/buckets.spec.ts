import { fillBuckets, niceMax, windowShape } from './buckets';

describe('fillBuckets', () => {
  const now = new Date('2026-11-27T16:42:10Z');

  it('gives 24 hourly buckets ending with the current hour, zero where the API sent nothing', () => {
    const filled = fillBuckets(
      [
        { timestamp: '2026-11-27T16:00:00.000Z', value: 7 },
        { timestamp: '2026-11-27T10:00:00.000Z', value: 3 },
      ],
      '24h',
      now,
    );
    expect(filled).toHaveLength(24);
    expect(filled[0]).toEqual({ timestamp: '2026-11-26T17:00:00.000Z', value: 0 });
    expect(filled[23]).toEqual({ timestamp: '2026-11-27T16:00:00.000Z', value: 7 });
    expect(filled.find((p) => p.timestamp === '2026-11-27T10:00:00.000Z')?.value).toBe(3);
    expect(filled.filter((p) => p.value === 0)).toHaveLength(22);
  });

  it('gives 30 daily buckets ending today (UTC)', () => {
    const filled = fillBuckets([{ timestamp: '2026-11-01T00:00:00Z', value: 2 }], '30d', now);
    expect(filled).toHaveLength(30);
    expect(filled[0]?.timestamp).toBe('2026-10-29T00:00:00.000Z');
    expect(filled[29]?.timestamp).toBe('2026-11-27T00:00:00.000Z');
    expect(filled[3]).toEqual({ timestamp: '2026-11-01T00:00:00.000Z', value: 2 });
  });

  it('leaves out points outside the window and ignores unreadable timestamps', () => {
    const filled = fillBuckets(
      [
        { timestamp: '2026-10-01T00:00:00Z', value: 9 },
        { timestamp: 'not a date', value: 9 },
      ],
      '24h',
      now,
    );
    expect(filled.every((p) => p.value === 0)).toBe(true);
  });

  it('knows the bucket sizes', () => {
    expect(windowShape('24h')).toEqual({ sizeMs: 3_600_000, count: 24 });
    expect(windowShape('30d')).toEqual({ sizeMs: 86_400_000, count: 30 });
  });
});

describe('niceMax', () => {
  it.each([
    [[], 1],
    [[0, 0], 1],
    [[0.4], 1],
    [[3], 5],
    [[7, 2], 10],
    [[12], 20],
    [[199], 200],
    [[201], 500],
    [[1000], 1000],
  ])('%p -> %p', (values, expected) => {
    expect(niceMax(values)).toBe(expected);
  });
});
