import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { InsecureServerError } from './enroll-client';
import { readJsonLines, runReport, type ReportRun } from './report-command';
import { sendBatch } from './telemetry-client';
import { TelemetrySpool, type ReportedEvent } from './telemetry-spool';

const NOW = new Date('2026-11-25T10:00:00Z');
const event = (i: number): ReportedEvent => ({
  observed_at: NOW.toISOString(),
  url: `https://e${i}.example/`,
  verdict: 'allowed',
  classification_ms: 1,
});

async function* items(events: ReportedEvent[]) {
  yield* events;
}

describe('agent report', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-report-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function answers(...statuses: (number | [number, Record<string, string>])[]) {
    const sent: { batch_id: string; events: unknown[] }[] = [];
    const fetchFn = (async (_url: string, init: RequestInit) => {
      const next = statuses.shift() ?? 202;
      const [status, headers] = Array.isArray(next) ? next : [next, {}];
      sent.push(JSON.parse(init.body as string) as { batch_id: string; events: unknown[] });
      const body =
        status === 202 ? '{"duplicate":false}' : JSON.stringify({ code: 'X', detail: `status ${status}` });
      return new Response(body, { status, headers });
    }) as unknown as typeof fetch;
    return { sent, fetchFn };
  }

  function run(
    spool: TelemetrySpool,
    fetchFn: typeof fetch,
    input?: ReportedEvent[],
    maxRetrySeconds = 60,
    target = { server: 'http://127.0.0.1:1', allowInsecureHttp: false },
    overrides: Partial<ReportRun> = {},
  ) {
    const out: string[] = [];
    const slept: number[] = [];
    let clock = NOW.getTime();
    return {
      out,
      slept,
      result: runReport({
        server: new URL(target.server),
        allowInsecureHttp: target.allowInsecureHttp,
        deviceToken: 'sts_dt_x',
        spool,
        ...(input ? { input: items(input) } : {}),
        batchSize: 2,
        maxBatchBytes: 1 << 20,
        maxRetrySeconds,
        timeoutMs: 1_000,
        io: { out: (line) => out.push(line), err: (line) => out.push(line) },
        fetch: fetchFn,
        now: () => new Date(clock),
        sleep: async (ms) => {
          slept.push(ms);
          clock += ms;
        },
        ...overrides,
      }),
    };
  }

  /** A server that answers each batch by what it holds; records every batch it was sent. */
  function server(answer: (batch: { batch_id: string; events: ReportedEvent[] }) => number) {
    const sent: { batch_id: string; events: ReportedEvent[]; status: number; bytes: number }[] = [];
    const fetchFn = (async (_url: string, init: RequestInit) => {
      const body = init.body as string;
      const batch = JSON.parse(body) as { batch_id: string; events: ReportedEvent[] };
      const status = answer(batch);
      sent.push({ ...batch, status, bytes: Buffer.byteLength(body) });
      const text =
        status === 202 ? '{"duplicate":false}' : JSON.stringify({ code: 'X', detail: `status ${status}` });
      return new Response(text, {
        status,
        headers: { 'content-type': status === 202 ? 'application/json' : 'application/problem+json' },
      });
    }) as unknown as typeof fetch;
    return { sent, fetchFn };
  }

  const urls = (batches: { events: ReportedEvent[] }[]) => batches.flatMap((b) => b.events.map((e) => e.url));

  it('sends spooled batches oldest first and empties the spool', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    const { sent, fetchFn } = answers();
    const { result } = run(spool, fetchFn, [event(1), event(2), event(3)]);
    expect(await result).toEqual({ kind: 'done', sent: 2, events: 3, rejected: 0 });
    expect(sent.map((batch) => batch.events.length)).toEqual([2, 1]);
    expect(await spool.count()).toBe(0);
  });

  it('waits as Retry-After says, and keeps the spool when the server stays away', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    const { fetchFn } = answers([503, { 'retry-after': '7' }], 202, 202);
    const first = run(spool, fetchFn, [event(1), event(2), event(3)]);
    expect((await first.result).kind).toBe('done');
    expect(first.slept).toEqual([7_000]);

    const down = answers(...Array.from({ length: 20 }, () => 503));
    const second = run(spool, down.fetchFn, [event(4)], 10);
    expect(await second.result).toMatchObject({ kind: 'unreachable', kept: 1 });
    expect(second.slept).toEqual([1_000, 2_000, 4_000]);
    expect(await spool.count()).toBe(1);
  });

  it('sets refused batches aside and stops on 401/403', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    const { fetchFn } = answers(400, 202);
    expect(await run(spool, fetchFn, [event(1), event(2), event(3)]).result).toEqual({
      kind: 'done',
      sent: 1,
      events: 1,
      rejected: 1,
    });
    expect(await readdir(join(dir, 'spool', 'rejected'))).toHaveLength(1);
    const refused = answers(403);
    expect(await run(spool, refused.fetchFn, [event(9)]).result).toMatchObject({
      kind: 'refused',
      status: 403,
    });
    expect(await spool.count()).toBe(1);
  });

  it('splits a batch the server answers 413 in halves with new batch ids until each fits, sending every event once', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    // This server takes at most 2 events a batch.
    const { sent, fetchFn } = server((batch) => (batch.events.length > 2 ? 413 : 202));
    const input = Array.from({ length: 7 }, (_, i) => event(i));
    const { out, result } = run(spool, fetchFn, input, 60, undefined, { batchSize: 7 });
    expect(await result).toEqual({ kind: 'done', sent: 4, events: 7, rejected: 0 });
    const accepted = sent.filter((batch) => batch.status === 202);
    const first = sent[0]!.batch_id;
    expect(accepted.map((batch) => batch.batch_id)).toEqual([
      `${first}.0.0`,
      `${first}.0.1`,
      `${first}.1.0`,
      `${first}.1.1`,
    ]);
    // In order, each once.
    expect(urls(accepted)).toEqual(input.map((e) => e.url));
    expect(await spool.count()).toBe(0);
    expect(out.join('\n')).toContain(`batch ${first} is too large for the server`);
  });

  it('splits a batch over maxBatchBytes before sending it', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    const { sent, fetchFn } = server(() => 202);
    const input = Array.from({ length: 40 }, (_, i) => event(i));
    const { result } = run(spool, fetchFn, input, 60, undefined, { batchSize: 40, maxBatchBytes: 1_200 });
    expect(await result).toMatchObject({ kind: 'done', events: 40, rejected: 0 });
    expect(sent.every((batch) => batch.status === 202 && batch.bytes <= 1_200)).toBe(true);
    expect(urls(sent)).toEqual(input.map((e) => e.url));
  });

  it('sets aside a single event the server answers 413 and goes on with the rest', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    const huge = { ...event(0), url: `https://huge.example/${'x'.repeat(3_000)}` };
    const { sent, fetchFn } = server((batch) =>
      batch.events.some((e) => e.url.startsWith('https://huge.')) ? 413 : 202,
    );
    const { result } = run(spool, fetchFn, [event(1), huge, event(2), event(3), event(4)], 60, undefined, {
      batchSize: 4,
    });
    expect(await result).toEqual({ kind: 'done', sent: 3, events: 4, rejected: 1 });
    expect(urls(sent.filter((batch) => batch.status === 202)).sort()).toEqual(
      [event(1), event(2), event(3), event(4)].map((e) => e.url).sort(),
    );
    const aside = await readdir(join(dir, 'spool', 'rejected'));
    expect(aside).toHaveLength(1);
    expect(await spool.count()).toBe(0);
  });

  it('does not let a batch the server keeps failing (5xx) hold up the later ones', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    const poison = { ...event(0), url: 'https://poison.example/' };
    await spool.add([poison], NOW);
    await spool.add([event(1)], new Date(NOW.getTime() + 1));
    await spool.add([event(2)], new Date(NOW.getTime() + 2));
    const { sent, fetchFn } = server((batch) => (batch.events.some((e) => e.url === poison.url) ? 503 : 202));
    const { result } = run(spool, fetchFn, undefined, 10);
    expect(await result).toMatchObject({ kind: 'unreachable', kept: 1 });
    expect(urls(sent.filter((batch) => batch.status === 202))).toEqual([event(1).url, event(2).url]);
    // The failing batch stays in the spool for the next run, which sends the rest first again.
    const left: string[] = [];
    for await (const batch of spool.batches()) left.push(...batch.events.map((e) => e.url));
    expect(left).toEqual([poison.url]);
  });

  it('sends the token over plain http to another machine only when enrolled with the opt-in', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 1 << 20);
    const remote = { server: 'http://api.example.com', allowInsecureHttp: false };
    const refused = answers();
    expect(await run(spool, refused.fetchFn, [event(1)], 60, remote).result).toEqual({
      kind: 'insecure',
      message: expect.stringContaining('http://api.example.com is plain http to another machine'),
    });
    expect(refused.sent).toEqual([]);
    expect(await spool.count()).toBe(0); // nothing queued either

    // What an earlier run left in the spool is not sent there either.
    await spool.add([event(2)], NOW);
    expect((await run(spool, refused.fetchFn, undefined, 60, remote).result).kind).toBe('insecure');
    expect(refused.sent).toEqual([]);
    expect(await spool.count()).toBe(1);

    const allowed = answers();
    expect(
      await run(spool, allowed.fetchFn, [event(3)], 60, { ...remote, allowInsecureHttp: true }).result,
    ).toMatchObject({ kind: 'done', sent: 2 });
    expect(allowed.sent).toHaveLength(2);

    const https = answers();
    expect(
      (
        await run(spool, https.fetchFn, [event(4)], 60, {
          server: 'https://api.example.com',
          allowInsecureHttp: false,
        }).result
      ).kind,
    ).toBe('done');
    expect(https.sent).toHaveLength(1);
  });

  it('sendBatch itself refuses plain http to another machine without the opt-in, before fetching', async () => {
    const { sent, fetchFn } = answers();
    const batch = { server: new URL('http://10.1.2.3:8080'), deviceToken: 'sts_dt_x', fetch: fetchFn };
    const options = { ...batch, batch: { batch_id: 'b1', events: [event(1)] }, timeoutMs: 1_000, now: NOW };
    await expect(sendBatch({ ...options, allowInsecureHttp: false })).rejects.toBeInstanceOf(
      InsecureServerError,
    );
    expect(sent).toEqual([]);
    expect(await sendBatch({ ...options, allowInsecureHttp: true })).toEqual({
      kind: 'accepted',
      duplicate: false,
    });
    expect(sent).toHaveLength(1);
  });

  it('bounds the spool by dropping the oldest batches', async () => {
    const spool = new TelemetrySpool(join(dir, 'spool'), 600);
    let dropped = 0;
    for (let i = 0; i < 5; i++) {
      dropped += (await spool.add([event(i), event(i + 100)], new Date(NOW.getTime() + i))).droppedEvents;
    }
    const left: string[] = [];
    for await (const batch of spool.batches()) left.push(batch.events[0]!.url);
    expect(left.length).toBeLessThan(5);
    expect(dropped).toBe((5 - left.length) * 2);
    expect(left.at(-1)).toBe('https://e4.example/');
  });

  it('reads JSON lines, defaulting time and latency and naming bad lines', async () => {
    const lines = [
      '{"url":"https://a.example/","verdict":"blocked","classification_ms":3,"observed_at":"2026-11-25T09:00:00Z"}',
      '',
      '{"url":"https://b.example/","verdict":"warned"}',
      '{"url":"https://c.example/","verdict":"maybe"}',
      'nope',
    ];
    const read = [];
    for await (const item of readJsonLines(Readable.from(lines.join('\n')), () => NOW)) read.push(item);
    expect(read).toEqual([
      {
        url: 'https://a.example/',
        verdict: 'blocked',
        classification_ms: 3,
        observed_at: '2026-11-25T09:00:00.000Z',
      },
      { url: 'https://b.example/', verdict: 'warned', classification_ms: 0, observed_at: NOW.toISOString() },
      { invalid: expect.stringContaining('line 4') },
      { invalid: 'line 5: not JSON' },
    ]);
  });
});
