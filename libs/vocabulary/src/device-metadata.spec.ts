import { METADATA_MAX_DEPTH, nestsDeeperThan } from './device-metadata';

function nested(levels: number): unknown {
  let value: unknown = 'leaf';
  for (let level = 0; level < levels; level++) value = level % 2 ? [value] : { child: value };
  return value;
}

describe('nestsDeeperThan', () => {
  it.each([
    [{}, 1, false],
    [{ a: 1 }, 1, false],
    [{ a: {} }, 1, true],
    [{ a: [1, 2] }, 2, false],
    [{ a: [1, [2]] }, 2, true],
    ['text', 0, false],
  ])('%j within %i levels: deeper is %s', (value, maxDepth, deeper) => {
    expect(nestsDeeperThan(value, maxDepth)).toBe(deeper);
  });

  it('counts the top-level object as depth 1, as the enrollment service does', () => {
    expect(nestsDeeperThan(nested(METADATA_MAX_DEPTH), METADATA_MAX_DEPTH)).toBe(false);
    expect(nestsDeeperThan(nested(METADATA_MAX_DEPTH + 1), METADATA_MAX_DEPTH)).toBe(true);
  });

  it('answers for hostile nesting without exhausting the stack', () => {
    const hostile: unknown = JSON.parse('['.repeat(32_000) + ']'.repeat(32_000));
    expect(() => JSON.stringify(hostile)).toThrow(RangeError);
    expect(nestsDeeperThan(hostile, METADATA_MAX_DEPTH)).toBe(true);
  });
});
