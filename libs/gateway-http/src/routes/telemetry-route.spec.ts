import { Readable } from 'node:stream';
import { AppError } from '@sts/errors/app-error';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { startTestGateway, type TestGateway } from '../test/test-gateway';
import { TELEMETRY_MESSAGE_HEADROOM_BYTES, telemetryBodyLimit } from '../telemetry/telemetry-sink';
import { hostOf } from './telemetry-route';

/** A value shaped like a device token (`sts_dt_` and 43 base64url characters), named for the test. */
const token = (name: string) => `sts_dt_${name.padEnd(43, '_')}`;

describe('telemetryBodyLimit', () => {
  it("is the configured limit, but never more than NATS's max_payload less the headroom", () => {
    expect(telemetryBodyLimit(2 * 1024 * 1024, undefined)).toBe(2 * 1024 * 1024);
    expect(telemetryBodyLimit(2 * 1024 * 1024, 1024 * 1024)).toBe(
      1024 * 1024 - TELEMETRY_MESSAGE_HEADROOM_BYTES,
    );
    expect(telemetryBodyLimit(256 * 1024, 1024 * 1024)).toBe(256 * 1024);
    expect(telemetryBodyLimit(2 * 1024 * 1024, 8 * 1024 * 1024)).toBe(2 * 1024 * 1024);
  });
});

describe('hostOf', () => {
  it.each([
    ['https://Mail.Example.com/inbox?q=secret', 'mail.example.com'],
    ['example.org/path', 'example.org'],
    ['http://[2001:db8::1]:8080/x', '[2001:db8::1]'],
    ['ftp://files.example.net', 'files.example.net'],
    ['http://[oops', null],
    ['mailto:someone@example.com', null],
  ])('%s → %s', (url, host) => {
    expect(hostOf(url)).toBe(host);
  });
});

describe('POST /api/device/telemetry (fake upstream)', () => {
  let gw: TestGateway;
  /** Tokens the fake enrollment service was asked about, in order. */
  let asked: string[];

  const start = async (
    config: Parameters<typeof startTestGateway>[0] = {},
    options: Parameters<typeof startTestGateway>[2] = {},
  ) => {
    gw = await startTestGateway(config, {}, options);
    asked = [];
    gw.upstream.enrollment.authenticateDevice = async ({ deviceToken }) => {
      asked.push(deviceToken);
      if (deviceToken === token('disabled')) {
        return { deviceId: 'dev-2', orgId: 'org-1', status: DeviceStatus.DEVICE_STATUS_DISABLED };
      }
      if (deviceToken === token('other')) {
        return { deviceId: 'dev-3', orgId: 'org-1', status: DeviceStatus.DEVICE_STATUS_ACTIVE };
      }
      if (deviceToken === token('elsewhere')) {
        return { deviceId: 'dev-4', orgId: 'org-2', status: DeviceStatus.DEVICE_STATUS_ACTIVE };
      }
      if (deviceToken !== token('good')) throw new AppError('DEVICE_TOKEN_INVALID');
      return { deviceId: 'dev-1', orgId: 'org-1', status: DeviceStatus.DEVICE_STATUS_ACTIVE };
    };
  };

  beforeEach(() => start());

  afterEach(async () => {
    await gw.app.close();
  });

  const event = (overrides: Record<string, unknown> = {}) => ({
    observed_at: new Date(gw.clock.nowMs - 60_000).toISOString(),
    url: 'https://www.example.com/private/path?token=abc',
    verdict: 'blocked',
    classification_ms: 12.5,
    ...overrides,
  });
  const post = (
    payload: unknown /** null: no X-Device-Token header. */,
    deviceToken: string | null = token('good'),
    remoteAddress?: string,
  ) =>
    gw.app.inject({
      method: 'POST',
      url: '/api/device/telemetry',
      headers: {
        ...(deviceToken === null ? {} : { 'x-device-token': deviceToken }),
        'content-type': 'application/json',
      },
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
      ...(remoteAddress ? { remoteAddress } : {}),
    });
  const problem = (response: Awaited<ReturnType<typeof post>>) => ({
    status: response.statusCode,
    type: String(response.headers['content-type']).split(';')[0],
    code: response.json<{ code: string }>().code,
  });

  it('hands the batch on with the host only, stamped with the device, organization and time', async () => {
    const response = await post({ batch_id: 'b-1', events: [event(), event({ verdict: 'allowed' })] });
    expect(response.statusCode).toBe(202);
    expect(response.json()).toEqual({ batch_id: 'b-1', accepted: 2, duplicate: false });
    expect(gw.published).toEqual([
      {
        org_id: 'org-1',
        device_id: 'dev-1',
        batch_id: 'b-1',
        received_at: gw.clock.nowMs,
        events: [
          {
            observed_at: gw.clock.nowMs - 60_000,
            host: 'www.example.com',
            verdict: 'blocked',
            classification_ms: 12.5,
          },
          {
            observed_at: gw.clock.nowMs - 60_000,
            host: 'www.example.com',
            verdict: 'allowed',
            classification_ms: 12.5,
          },
        ],
      },
    ]);
    expect(JSON.stringify(gw.published)).not.toContain('token=abc');
    expect((await post({ batch_id: 'b-1', events: [event()] })).json()).toMatchObject({ duplicate: true });
  });

  it('refuses missing and unknown tokens (401) and disabled devices (403)', async () => {
    const missing = await post({ batch_id: 'x', events: [event()] }, null);
    expect([missing.statusCode, missing.json<{ code: string }>().code]).toEqual([
      401,
      'DEVICE_TOKEN_INVALID',
    ]);
    expect((await post({ batch_id: 'x', events: [event()] }, token('wrong'))).statusCode).toBe(401);
    const disabled = await post({ batch_id: 'x', events: [event()] }, token('disabled'));
    expect([disabled.statusCode, disabled.json<{ code: string }>().code]).toEqual([403, 'DEVICE_DISABLED']);
    expect(gw.published).toEqual([]);
  });

  it('checks the token before the body: 401 (never 400 or 413) without a valid one, whatever the body', async () => {
    const bodies: [string, string][] = [
      ['an empty object', '{}'],
      ['malformed JSON', '{"batch_id": '],
      [
        'a body over the limit',
        JSON.stringify({ batch_id: 'big', events: [event({ url: 'x'.repeat(3e6) })] }),
      ],
    ];
    for (const [name, body] of bodies) {
      for (const presented of [null, token('wrong'), 'not-a-token']) {
        expect([name, presented, problem(await post(body, presented))]).toEqual([
          name,
          presented,
          { status: 401, type: 'application/problem+json', code: 'DEVICE_TOKEN_INVALID' },
        ]);
      }
    }
    // With a valid token the same bodies get their own answers.
    expect(problem(await post('{}'))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    expect(problem(await post('{"batch_id": '))).toMatchObject({ status: 400, code: 'MALFORMED_REQUEST' });
    expect(problem(await post(bodies[2]![1]))).toMatchObject({ status: 413, code: 'PAYLOAD_TOO_LARGE' });
  });

  it('answers a request without a valid token before its body has arrived', async () => {
    // Announces 2 MB and sends 16 bytes, then nothing: only an answer given before reading can come.
    const body = new Readable({ read() {} });
    body.push('{"batch_id":"b",');
    const response = await gw.app.inject({
      method: 'POST',
      url: '/api/device/telemetry',
      headers: {
        'x-device-token': token('wrong'),
        'content-type': 'application/json',
        'content-length': String(2 * 1024 * 1024),
      },
      payload: body,
    });
    expect(problem(response)).toEqual({
      status: 401,
      type: 'application/problem+json',
      code: 'DEVICE_TOKEN_INVALID',
    });
    body.destroy();
  });

  it('refuses a value not shaped like a device token without asking the enrollment service', async () => {
    for (const presented of ['sts_dt_short', `sts_ek_${'a'.repeat(43)}`, `${token('good')}x`, 'Bearer x']) {
      expect((await post({ batch_id: 'x', events: [event()] }, presented)).statusCode).toBe(401);
    }
    expect(asked).toEqual([]);
    expect((await post({ batch_id: 'x', events: [event()] }, token('wrong'))).statusCode).toBe(401);
    expect(asked).toEqual([token('wrong')]);
  });

  it('limits failed authentications per client address: then 429 for unknown tokens, without a call, but not for known devices', async () => {
    await gw.app.close();
    await start({ DEVICE_AUTH_FAILURES_PER_MINUTE: 3 });
    const batch = (id: string) => ({ batch_id: id, events: [event()] });
    const attacker = '198.51.100.7';
    // The device was seen valid before the address went bad.
    expect((await post(batch('before'), token('good'), attacker)).statusCode).toBe(202);
    asked = [];
    const statuses: number[] = [];
    for (const presented of [null, 'garbage', token('guess-1'), token('guess-2'), token('guess-3')])
      statuses.push((await post(batch('g'), presented, attacker)).statusCode);
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    // Only the one well-shaped guess before the lock reached the enrollment service.
    expect(asked).toEqual([token('guess-1')]);
    const locked = await post(batch('g'), token('guess-4'), attacker);
    expect(problem(locked)).toEqual({ status: 429, type: 'application/problem+json', code: 'RATE_LIMITED' });
    // The pinned clock is 30 s into its minute.
    expect(locked.headers['retry-after']).toBe('30');
    // A token this gateway knows goes on working from that address; one it has not seen waits.
    expect((await post(batch('during'), token('good'), attacker)).statusCode).toBe(202);
    expect((await post(batch('during'), token('other'), attacker)).statusCode).toBe(429);
    // Another address has its own allowance; IPv6 addresses count by their /64.
    expect((await post(batch('g'), token('guess-5'), '198.51.100.8')).statusCode).toBe(401);
    for (let i = 0; i < 3; i++)
      expect((await post(batch('g'), token(`v6-${i}`), `2001:db8:1:2::${i + 1}`)).statusCode).toBe(401);
    expect((await post(batch('g'), token('v6-x'), '2001:db8:1:2:ffff::9')).statusCode).toBe(429);
    expect(asked).not.toContain(token('guess-4'));
    // The next minute starts afresh.
    gw.clock.nowMs += 30_000;
    expect((await post(batch('after'), token('other'), attacker)).statusCode).toBe(202);
  });

  it('keeps a known token that stopped being valid to one failure, then treats it as unknown', async () => {
    await gw.app.close();
    await start({ DEVICE_AUTH_FAILURES_PER_MINUTE: 1 });
    const address = '198.51.100.9';
    expect((await post({ batch_id: 'a', events: [event()] }, token('other'), address)).statusCode).toBe(202);
    // Revoked (enrolled again elsewhere, deleted): the service says so, and the failure counts.
    const valid = gw.upstream.enrollment.authenticateDevice;
    gw.upstream.enrollment.authenticateDevice = async (request, options) => {
      if (request.deviceToken === token('other')) {
        asked.push(request.deviceToken);
        throw new AppError('DEVICE_TOKEN_INVALID');
      }
      return valid(request, options);
    };
    asked = [];
    expect((await post({ batch_id: 'b', events: [event()] }, token('other'), address)).statusCode).toBe(401);
    expect((await post({ batch_id: 'c', events: [event()] }, token('other'), address)).statusCode).toBe(429);
    expect(asked).toEqual([token('other')]);
  });

  it('refuses times outside [now - 30 days, now + 5 minutes] and names the events', async () => {
    const day = 86_400_000;
    const ok = await post({
      batch_id: 'edge',
      events: [
        event({ observed_at: new Date(gw.clock.nowMs - 30 * day).toISOString() }),
        event({ observed_at: new Date(gw.clock.nowMs + 5 * 60_000).toISOString() }),
      ],
    });
    expect(ok.statusCode).toBe(202);
    const bad = await post({
      batch_id: 'out',
      events: [
        event(),
        event({ observed_at: new Date(gw.clock.nowMs - 30 * day - 1000).toISOString() }),
        event({ observed_at: new Date(gw.clock.nowMs + 6 * 60_000).toISOString() }),
      ],
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ errors: { path: string }[] }>().errors.map((e) => e.path)).toEqual([
      'events.1.observed_at',
      'events.2.observed_at',
    ]);
    expect(gw.published.map((b) => b.batch_id)).toEqual(['edge']);
  });

  it('counts events before validating them: 5,001 is 413, 5,000 is fine', async () => {
    const tooMany = await post({ batch_id: 'many', events: Array.from({ length: 5_001 }, () => ({})) });
    expect([tooMany.statusCode, tooMany.json<{ code: string }>().code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    const enough = await post({ batch_id: 'enough', events: Array.from({ length: 5_000 }, () => event()) });
    expect(enough.statusCode).toBe(202);
  });

  it("keeps the body limit below NATS's max_payload less the headroom: a batch it could not publish is 413", async () => {
    await gw.app.close();
    await start({}, { natsMaxPayloadBytes: 128 * 1024 });
    const limit = 128 * 1024 - TELEMETRY_MESSAGE_HEADROOM_BYTES;
    const events = (bytes: number) => {
      const one = JSON.stringify(event()).length + 1;
      return Array.from({ length: Math.floor(bytes / one) }, () => event());
    };
    const over = await post({ batch_id: 'over', events: events(limit + 2_000) });
    expect(problem(over)).toEqual({
      status: 413,
      type: 'application/problem+json',
      code: 'PAYLOAD_TOO_LARGE',
    });
    expect((await post({ batch_id: 'under', events: events(limit - 2_000) })).statusCode).toBe(202);
    expect(gw.published.map((b) => b.batch_id)).toEqual(['under']);
  });

  it('takes TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE batches per device, then 429 RATE_LIMITED until the minute ends', async () => {
    await gw.app.close();
    await start({ TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE: 2 });
    expect((await post({ batch_id: 'b-1', events: [event()] })).statusCode).toBe(202);
    // A batch refused for its events counts too.
    const stale = new Date(gw.clock.nowMs - 31 * 86_400_000).toISOString();
    expect((await post({ batch_id: 'b-2', events: [event({ observed_at: stale })] })).statusCode).toBe(400);
    const limited = await post({ batch_id: 'b-3', events: [event()] });
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(limited.json<{ code: string; detail: string }>()).toMatchObject({
      code: 'RATE_LIMITED',
      detail: 'At most 2 batches per device per minute; retry in 30 s',
    });
    // The pinned clock is 30 s into its minute.
    expect(limited.headers['retry-after']).toBe('30');
    // Another device has its own allowance; the next minute starts afresh.
    expect((await post({ batch_id: 'b-3', events: [event()] }, token('other'))).statusCode).toBe(202);
    gw.clock.nowMs += 30_000;
    expect((await post({ batch_id: 'b-3', events: [event()] })).statusCode).toBe(202);
    expect(gw.published.map((b) => `${b.device_id}/${b.batch_id}`)).toEqual([
      'dev-1/b-1',
      'dev-3/b-3',
      'dev-1/b-3',
    ]);
  });

  it('takes TELEMETRY_ORG_BYTES_PER_MINUTE bytes of batches per organization, then 429 for all its devices until the minute ends', async () => {
    await gw.app.close();
    await start({ TELEMETRY_ORG_BYTES_PER_MINUTE: 4096 });
    const body = (id: string) => JSON.stringify({ batch_id: id, events: [event(), event(), event()] });
    const size = Buffer.byteLength(body('b-00'));
    const fits = Math.floor(4096 / size);
    const statuses: number[] = [];
    for (let i = 0; i < fits + 2; i++)
      statuses.push(
        (await post(body(`b-${String(i).padStart(2, '0')}`), i % 2 ? token('good') : token('other')))
          .statusCode,
      );
    expect(statuses).toEqual([...Array<number>(fits).fill(202), 429, 429]);
    const limited = await post(body('b-xx'));
    expect(problem(limited)).toEqual({ status: 429, type: 'application/problem+json', code: 'RATE_LIMITED' });
    expect(limited.headers['retry-after']).toBe('30');
    expect(limited.json<{ detail: string }>().detail).toBe(
      'This organization has sent its 4096 bytes of telemetry for this minute; retry in 30 s',
    );
    // Another organization has its own budget; the next minute starts afresh.
    expect((await post(body('e-1'), token('elsewhere'))).statusCode).toBe(202);
    gw.clock.nowMs += 30_000;
    expect((await post(body('b-xx'))).statusCode).toBe(202);
    expect(gw.published).toHaveLength(fits + 2);
  });

  it('charges the budget before the body is read, so batches sent at once cannot all pass it', async () => {
    await gw.app.close();
    await start({ TELEMETRY_ORG_BYTES_PER_MINUTE: 4096, TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE: 100 });
    const body = (id: string) => JSON.stringify({ batch_id: id, events: [event(), event(), event()] });
    const fits = Math.floor(4096 / Buffer.byteLength(body('c-00')));
    const statuses = await Promise.all(
      Array.from({ length: fits + 10 }, (_, i) => post(body(`c-${String(i).padStart(2, '0')}`))),
    );
    expect(statuses.filter((reply) => reply.statusCode === 202)).toHaveLength(fits);
    expect(statuses.filter((reply) => reply.statusCode === 429)).toHaveLength(10);
    expect(gw.published).toHaveLength(fits);
  });

  it('bounds the lookups of unknown tokens per address, so failures sent at once cannot all reach enrollment', async () => {
    await gw.app.close();
    await start({ DEVICE_AUTH_FAILURES_PER_MINUTE: 2 });
    const attacker = '198.51.100.70';
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        post({ batch_id: 'g', events: [event()] }, token(`burst-${i}`), attacker),
      ),
    );
    // Two failures allowed, ten lookups per allowed failure: at most 20 questions, the rest 429 at once.
    expect(asked.length).toBeLessThanOrEqual(20);
    expect(replies.filter((reply) => reply.statusCode === 429).length).toBeGreaterThanOrEqual(40);
    expect(replies.every((reply) => [401, 429].includes(reply.statusCode))).toBe(true);
  });
});
