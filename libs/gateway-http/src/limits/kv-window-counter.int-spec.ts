import type { KV } from '@nats-io/kv';
import pino from 'pino';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { limitsBucketName, openLimitsBucket } from '@sts/nats/kv-buckets';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { startTcpProxy, type TcpProxy } from '@sts/testing/tcp-proxy';
import { KvWindowCounter } from './kv-window-counter';

/** Counts shared by replicas in the namespace's limits bucket, on the real NATS server. */
describe('KvWindowCounter over a real NATS KV bucket', () => {
  const logger = createLogger('kv-window-counter-int', 'silent');
  const namespace = uniqueNatsNamespace();
  const natsUrl = new URL(process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
  const open: JetStreamConnection[] = [];
  const proxies: TcpProxy[] = [];
  // Mid-minute, so no test crosses a window boundary.
  const now = () => Date.parse('2026-03-01T12:00:30.000Z');

  const bucket = async (url = natsUrl.toString()): Promise<KV> => {
    const connection = await connectJetStream({
      url,
      name: 'kv-counter-int',
      logger,
      reconnectTimeWaitMs: 100,
    });
    open.push(connection);
    return openLimitsBucket(connection.nc, namespace, { timeoutMs: 500 });
  };

  afterAll(async () => {
    const admin = open[0];
    if (admin)
      expect(await deleteNamespaceStreams(admin.jsm, namespace)).toContain(
        `KV_${limitsBucketName(namespace)}`,
      );
    for (const connection of open) await connection.close();
    for (const proxy of proxies) await proxy.close();
  });

  it('gives every increment of two replicas its own place in one count', async () => {
    const a = new KvWindowCounter(await bucket(), { logger, now });
    const b = new KvWindowCounter(await bucket(), { logger, now });
    // Concurrent bursts on one key from both: each replica's writes conflict with the other's.
    const counts = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        (i % 2 ? a : b).increment('burst', 'address:203.0.113.7', 60_000),
      ),
    );
    expect(counts.map(({ count }) => count).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 200 }, (_, i) => i + 1),
    );
    expect(counts.every(({ resetInMs }) => resetInMs === 30_000)).toBe(true);
    expect((await a.read('burst', 'address:203.0.113.7', 60_000)).count).toBe(200);
    // A third replica, started later, reads the same count; other keys and scopes are apart.
    const c = new KvWindowCounter(await bucket(), { logger, now });
    expect((await c.read('burst', 'address:203.0.113.7', 60_000)).count).toBe(200);
    expect((await c.read('burst', 'address:203.0.113.8', 60_000)).count).toBe(0);
    expect((await c.read('other', 'address:203.0.113.7', 60_000)).count).toBe(0);
  });

  it('adds amounts of two replicas into one count, each increment in its own place', async () => {
    const a = new KvWindowCounter(await bucket(), { logger, now });
    const b = new KvWindowCounter(await bucket(), { logger, now });
    const amounts = Array.from({ length: 60 }, (_, i) => 1_000 + i);
    const counts = await Promise.all(
      amounts.map((amount, i) => (i % 2 ? a : b).increment('bytes', 'org-1', 60_000, undefined, amount)),
    );
    const total = amounts.reduce((sum, amount) => sum + amount, 0);
    expect(Math.max(...counts.map(({ count }) => count))).toBe(total);
    expect(new Set(counts.map(({ count }) => count)).size).toBe(amounts.length);
    // Each answer is at least what that increment added on top of the ones before it in the count.
    expect(Math.min(...counts.map(({ count }) => count))).toBeGreaterThanOrEqual(1_000);
    const c = new KvWindowCounter(await bucket(), { logger, now });
    expect((await c.read('bytes', 'org-1', 60_000)).count).toBe(total);
  });

  it('keeps neither the key nor the address in the bucket', async () => {
    const kv = await bucket();
    await new KvWindowCounter(kv, { logger, now }).increment('secret', 'key:sts_ek_supersecret', 60_000);
    const keys: string[] = [];
    for await (const key of await kv.keys('secret.>')) keys.push(key);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^secret\.60000\.\d+\.[A-Za-z0-9_-]{32}$/);
    expect(keys[0]).not.toContain('sts_ek');
  });

  it('stops writing a key once the caller has its answer', async () => {
    const kv = await bucket();
    const counter = new KvWindowCounter(kv, { logger, now });
    for (let i = 0; i < 5; i++) await counter.increment('enough', 'k', 60_000, 3);
    // Local counts go on (the caller sees 5), the shared one stops at the limit.
    expect((await counter.read('enough', 'k', 60_000)).count).toBe(5);
    const stored = await kv.get((await firstKey(kv, 'enough.>'))!);
    expect(stored?.string()).toBe('3');
  });

  it('counts in the process while NATS is unreachable, warns once, and shares again when it is back', async () => {
    const proxy = await startTcpProxy({ host: natsUrl.hostname, port: Number(natsUrl.port || 4222) });
    proxies.push(proxy);
    const through = new URL(natsUrl);
    through.host = `127.0.0.1:${proxy.port}`;
    const lines: { level: number; msg: string }[] = [];
    const captured = pino(
      { level: 'debug' },
      { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) },
    );
    const cutOff = new KvWindowCounter(await bucket(through.toString()), {
      logger: captured,
      now,
      retryAfterMs: 200,
    });
    const other = new KvWindowCounter(await bucket(), { logger, now });

    await other.increment('outage', 'k', 60_000);
    expect((await cutOff.increment('outage', 'k', 60_000)).count).toBe(2);
    proxy.cut();
    // Never rejects: the shared count it last saw plus its own increments.
    const began = performance.now();
    expect((await cutOff.increment('outage', 'k', 60_000)).count).toBe(3);
    expect((await cutOff.increment('outage', 'k', 60_000)).count).toBe(4);
    expect((await cutOff.read('outage', 'k', 60_000)).count).toBe(4);
    expect((await cutOff.increment('outage', 'fresh', 60_000)).count).toBe(1);
    // One timeout at most; then the bucket is left alone for retryAfterMs.
    expect(performance.now() - began).toBeLessThan(1_500);
    expect(lines.filter((line) => line.level === 40).map((line) => line.msg)).toEqual([
      'rate-limit counters: NATS KV did not answer; each replica counts alone until it does',
    ]);
    // Meanwhile the other replica's count does not reach the cut-off one.
    await other.increment('outage', 'k', 60_000);

    proxy.restore();
    // Back: it reads the shared count again (2 + the other's 1), and keeps its own higher one.
    await eventually(async () => {
      await cutOff.increment('outage', 'later', 60_000);
      return lines.some((line) => line.msg.startsWith('rate-limit counters: NATS KV answers again'));
    });
    await other.increment('outage', 'later', 60_000);
    expect((await cutOff.read('outage', 'later', 60_000)).count).toBeGreaterThanOrEqual(2);
    expect((await cutOff.read('outage', 'k', 60_000)).count).toBe(4);
    for (let i = 0; i < 3; i++) await other.increment('outage', 'k', 60_000);
    expect((await cutOff.read('outage', 'k', 60_000)).count).toBe(6);
  });
});

async function firstKey(kv: KV, filter: string): Promise<string | undefined> {
  for await (const key of await kv.keys(filter)) return key;
  return undefined;
}
