import { LocalWindowCounter, WindowTable } from './window-counter';

describe('WindowTable', () => {
  it('names a key by scope, window and hash: a valid NATS KV key that holds neither secret nor address', () => {
    const table = new WindowTable(() => 90_000);
    const { id, resetInMs } = table.cell('enroll-failures', 'address:203.0.113.7', 60_000);
    expect(id).toMatch(/^enroll-failures\.60000\.1\.[A-Za-z0-9_-]{32}$/);
    expect(id).not.toContain('203.0.113.7');
    expect(resetInMs).toBe(30_000);
    // The same key in another scope is another counter.
    expect(table.cell('telemetry', 'address:203.0.113.7', 60_000).id.split('.')[3]).not.toBe(
      id.split('.')[3],
    );
  });

  it('refuses scopes that would break the key', () => {
    const table = new WindowTable(() => 0);
    expect(() => table.cell('a.b', 'k', 60_000)).toThrow(/scope/);
    expect(() => table.cell('>', 'k', 60_000)).toThrow(/scope/);
    expect(() => table.cell('ok', 'k', 0)).toThrow(/window/);
  });
});

describe('LocalWindowCounter', () => {
  it('counts per scope and key in fixed windows, and starts again at the next one', async () => {
    let now = 60_000 * 10 + 59_000;
    const counter = new LocalWindowCounter(() => now);
    expect(await counter.increment('s', 'a', 60_000)).toEqual({ count: 1, resetInMs: 1_000 });
    expect((await counter.increment('s', 'a', 60_000)).count).toBe(2);
    expect((await counter.increment('other', 'a', 60_000)).count).toBe(1);
    expect((await counter.read('s', 'a', 60_000)).count).toBe(2);
    now += 1_000;
    expect(await counter.read('s', 'a', 60_000)).toEqual({ count: 0, resetInMs: 60_000 });
  });

  it('adds amounts (bytes), and refuses amounts that are not positive whole numbers', async () => {
    const counter = new LocalWindowCounter(() => 30_000);
    expect((await counter.increment('bytes', 'org', 60_000, undefined, 1_500)).count).toBe(1_500);
    expect((await counter.increment('bytes', 'org', 60_000, 4_096, 700)).count).toBe(2_200);
    expect((await counter.increment('bytes', 'org', 60_000)).count).toBe(2_201);
    for (const amount of [0, -1, 1.5, Number.NaN])
      expect(() => counter.increment('bytes', 'org', 60_000, undefined, amount)).toThrow(/amount/);
  });
});
