import { request as httpRequest } from 'node:http';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  enrollDevice,
  enrollmentCredentials,
  eventually,
  startSystem,
  type SystemUnderTest,
  enrollAgent,
  runAgent,
} from './system-under-test';

interface Problem {
  code: string;
  status: number;
  detail: string;
}

/**
 * POST /api/device/telemetry under abuse (issue 26): the token is checked before the body is read,
 * failed authentications are limited per client address, an organization has a byte budget per minute,
 * and a batch NATS could not take is 413, never 503 — with the agent keeping its spool moving. Against
 * the whole system on the shared NATS server (max_payload 1 MiB by default).
 */
describe('telemetry limits, end to end', () => {
  const FAILURES_PER_MINUTE = 5;
  const ORG_BYTES_PER_MINUTE = 4 * 1024 * 1024;
  let system: SystemUnderTest;

  beforeAll(async () => {
    system = await startSystem({
      gatewayEnv: {
        // The tests pose as clients at addresses of their own (X-Forwarded-For from one trusted hop).
        TRUST_PROXY: '1',
        DEVICE_AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE),
        TELEMETRY_ORG_BYTES_PER_MINUTE: String(ORG_BYTES_PER_MINUTE),
      },
    });
  });

  afterAll(async () => {
    await system?.stop();
  });

  /** A new organization (its own admin and enrollment key) with one enrolled device. */
  async function deviceOfNewOrg(name: string) {
    const admin = await system.tokenFor(`${name}@limits.test`, { name });
    return { admin, ...(await enrollDevice(system, admin, name)) };
  }

  const send = (
    token: string | undefined,
    body: unknown,
    address: string,
    options: { rawBody?: string } = {},
  ) =>
    system.api<Problem>('POST', '/api/device/telemetry', {
      headers: {
        'x-forwarded-for': address,
        'content-type': 'application/json',
        ...(token === undefined ? {} : { 'x-device-token': token }),
      },
      ...(options.rawBody === undefined ? { body } : { rawBody: options.rawBody }),
    });

  const event = (url: string) => ({
    observed_at: new Date(Date.now() - 60_000).toISOString(),
    url,
    verdict: 'allowed',
    classification_ms: 4,
  });

  const total = async (admin: string, deviceId: string) =>
    (
      await system.api<{ total_analyzed: number }>(
        'GET',
        `/api/analytics/summary?window=24h&device_id=${deviceId}`,
        { token: admin },
      )
    ).body.total_analyzed;

  /**
   * Runs a sequence whose counts live in one clock minute (the limits' window); when the minute turned
   * during it, once more (a sequence takes seconds, so the second run cannot straddle a minute too).
   */
  async function inOneMinute<T>(attempt: (round: number) => Promise<T>): Promise<T> {
    for (let round = 0; ; round++) {
      const minute = Math.floor(Date.now() / 60_000);
      const result = await attempt(round);
      if (Math.floor(Date.now() / 60_000) === minute || round > 0) return result;
    }
  }

  /** Hosts of 190 characters: 5,000 such events are a message over NATS's 1 MiB, in a body under 2 MiB. */
  const longHost = (i: number) => `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(50)}-${i}.example`;

  it('answers 401 to a missing or invalid token before reading or validating the body', async () => {
    const invalid = [undefined, 'sts_dt_not-a-real-token', `sts_dt_${'x'.repeat(43)}`];
    let n = 0;
    for (const token of invalid) {
      for (const body of [{}, 'not json', `{"batch_id":"big","events":[${'0,'.repeat(1_500_000)}0]}`]) {
        const response = await send(token, undefined, `203.0.113.${++n}`, {
          rawBody: typeof body === 'string' ? body : JSON.stringify(body),
        });
        expect([response.status, response.body.code]).toEqual([401, 'DEVICE_TOKEN_INVALID']);
        expect(response.headers.get('content-type')).toContain('application/problem+json');
      }
    }

    // Announces 2 MB, sends 20 bytes and waits: the answer can only come from a check before the body.
    const url = new URL('/api/device/telemetry', system.gateway.url);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no answer while the body was still coming')), 10_000);
      const request = httpRequest(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(2 * 1024 * 1024),
          'x-device-token': `sts_dt_${'y'.repeat(43)}`,
          'x-forwarded-for': '203.0.113.99',
        },
      });
      request.on('response', (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          clearTimeout(timer);
          resolve({ status: response.statusCode ?? 0, body: text });
          request.destroy();
        });
      });
      request.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      request.write('{"batch_id":"slow",');
    });
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'DEVICE_TOKEN_INVALID' });
  });

  it('limits failed device authentications per client address, without holding up known devices there', async () => {
    const device = await deviceOfNewOrg('nat-device');
    await inOneMinute(async (round) => {
      const address = `198.51.100.${10 + round}`;
      const batch = (id: string) => ({ batch_id: `${id}-${round}`, events: [event('https://a.example/')] });
      // The device has reported from this address before anyone failed there.
      expect((await send(device.device_token, batch('before'), address)).status).toBe(202);
      const statuses: number[] = [];
      for (let i = 0; i <= FAILURES_PER_MINUTE; i++)
        statuses.push((await send(`sts_dt_${String(i).padEnd(43, 'g')}`, batch('guess'), address)).status);
      expect(statuses).toEqual([...Array<number>(FAILURES_PER_MINUTE).fill(401), 429]);
      const limited = await send('sts_dt_not-even-a-token', batch('guess'), address);
      expect([limited.status, limited.body.code]).toEqual([429, 'RATE_LIMITED']);
      expect(limited.headers.get('content-type')).toContain('application/problem+json');
      const retryAfter = Number(limited.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      // The known device goes on; another address is not held up.
      expect((await send(device.device_token, batch('during'), address)).status).toBe(202);
      expect((await send(`sts_dt_${'z'.repeat(43)}`, batch('x'), `198.51.100.${50 + round}`)).status).toBe(
        401,
      );
    });
  });

  it("answers 413, not 503, to a batch larger than NATS's max_payload allows", async () => {
    const device = await deviceOfNewOrg('large-batches');
    const events = Array.from({ length: 5_000 }, (_, i) => event(`https://${longHost(i)}/`));
    const body = JSON.stringify({ batch_id: 'too-large', events });
    // Within the configured 2 MiB, but its message (hosts and all) would not fit in 1 MiB.
    expect(Buffer.byteLength(body)).toBeLessThan(2 * 1024 * 1024);
    expect(Buffer.byteLength(body)).toBeGreaterThan(1024 * 1024);
    const response = await send(device.device_token, undefined, '198.51.100.200', { rawBody: body });
    expect([response.status, response.body.code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    // Its halves are taken.
    for (const [i, half] of [events.slice(0, 2_500), events.slice(2_500)].entries()) {
      const accepted = await send(
        device.device_token,
        { batch_id: `half-${i}`, events: half },
        '198.51.100.200',
      );
      expect(accepted.status).toBe(202);
    }
    await eventually(async () => (await total(device.admin, device.device_id)) === 5_000);
  });

  it('takes TELEMETRY_ORG_BYTES_PER_MINUTE bytes per organization, then 429 with Retry-After for all its devices', async () => {
    const busy = await deviceOfNewOrg('busy-org');
    const quiet = await deviceOfNewOrg('quiet-org');
    await inOneMinute(async (round) => {
      // About 400 KB a batch (long paths; only hosts are kept).
      const body = (id: string) =>
        JSON.stringify({
          batch_id: `${id}-${round}`,
          events: Array.from({ length: 100 }, (_, i) =>
            event(`https://busy.example/${i}/${'p'.repeat(4_000)}`),
          ),
        });
      const size = Buffer.byteLength(body('b-00'));
      // Charged before the body is read: the batch that would pass the budget is refused.
      const fits = Math.floor(ORG_BYTES_PER_MINUTE / size);
      const statuses: number[] = [];
      for (let i = 0; i < fits + 1; i++)
        statuses.push(
          (
            await send(busy.device_token, undefined, '198.51.100.210', {
              rawBody: body(`b-${String(i).padStart(2, '0')}`),
            })
          ).status,
        );
      // In the second round (a minute turned during the first), that minute's earlier batches count too.
      if (round === 0) expect(statuses).toEqual([...Array<number>(fits).fill(202), 429]);
      else expect(statuses.at(-1)).toBe(429);
      const limited = await send(busy.device_token, undefined, '198.51.100.210', { rawBody: body('b-xx') });
      expect([limited.status, limited.body.code]).toEqual([429, 'RATE_LIMITED']);
      const retryAfter = Number(limited.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      // Another organization is not affected.
      expect(
        (await send(quiet.device_token, undefined, '198.51.100.211', { rawBody: body('q') })).status,
      ).toBe(202);
    });
  });

  it("has the agent split a batch over NATS's max_payload and deliver every event once", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sts-agent-large-'));
    const config = join(dir, 'agent.json');
    try {
      const admin = await system.tokenFor('agent-large@limits.test', { name: 'Agent' });
      const { key, code } = await enrollmentCredentials(system, admin);
      const agent = runAgent;
      const enrolled = await enrollAgent(system, { key, code, config, machineId: 'agent-large-batches' });
      expect(enrolled.code).toBe(0);
      const deviceId = (JSON.parse(await readFile(config, 'utf8')) as { device_id: string }).device_id;
      const lines = Array.from({ length: 5_000 }, (_, i) =>
        JSON.stringify({ url: `https://${longHost(i)}/`, verdict: i % 50 ? 'allowed' : 'blocked' }),
      );
      await writeFile(join(dir, 'events.jsonl'), lines.join('\n'));
      const reported = await agent(
        'report',
        '--input',
        join(dir, 'events.jsonl'),
        '--config',
        config,
        '--batch-size',
        '5000',
        '--max-retry',
        '5',
      );
      expect(reported.code).toBe(0);
      // Split before sending, by the size it knows: nothing was refused or retried.
      expect(reported.stderr).not.toMatch(/retrying|refused|too large/);
      expect(reported.stdout).toContain('done: 5000 events in');
      expect((await readdir(join(dir, 'spool'))).filter((name) => name.endsWith('.json'))).toEqual([]);
      await eventually(async () => (await total(admin, deviceId)) === 5_000);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
