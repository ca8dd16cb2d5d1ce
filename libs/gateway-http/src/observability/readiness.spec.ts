import { Readiness } from './readiness';

describe('Readiness', () => {
  it('is ready when every dependency answers, and names the ones that do not', async () => {
    const readiness = new Readiness(
      {
        nats: async () => true,
        billing: async () => false,
        analytics: () => Promise.reject(new Error('connection refused')),
        identity: () => new Promise<boolean>(() => undefined), // never answers
      },
      undefined,
      50,
      0,
    );
    expect(await readiness.report()).toEqual({
      ready: false,
      draining: false,
      checks: { nats: 'ok', billing: 'missing', analytics: 'missing', identity: 'missing' },
      missing: ['billing', 'analytics', 'identity'],
    });
    expect(await new Readiness({ nats: async () => true }).report()).toEqual({
      ready: true,
      draining: false,
      checks: { nats: 'ok' },
      missing: [],
    });
  });

  it('reuses a report for a while, so that probes do not multiply health calls', async () => {
    let now = 0;
    let calls = 0;
    const readiness = new Readiness(
      { nats: async () => (calls += 1) > 0 },
      undefined,
      1_000,
      1_000,
      () => now,
    );
    await Promise.all([readiness.report(), readiness.report()]);
    now = 999;
    await readiness.report();
    expect(calls).toBe(1);
    now = 1_000;
    await readiness.report();
    expect(calls).toBe(2);
  });

  it('is ready while the required dependencies answer, and still names the others that do not', async () => {
    const readiness = new Readiness({ nats: async () => true, analytics: async () => false }, ['nats']);
    expect(await readiness.report()).toEqual({
      ready: true,
      draining: false,
      checks: { nats: 'ok', analytics: 'missing' },
      missing: ['analytics'],
    });
  });

  it('is not ready once draining, at once and whatever the dependencies say', async () => {
    const readiness = new Readiness({ nats: async () => true }, undefined, 1_000, 60_000);
    expect((await readiness.report()).ready).toBe(true);
    readiness.startDraining();
    expect(await readiness.report()).toEqual({
      ready: false,
      draining: true,
      checks: { nats: 'ok' },
      missing: [],
    });
  });
});
