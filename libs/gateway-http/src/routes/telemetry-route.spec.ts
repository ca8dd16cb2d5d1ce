import { AppError } from '@sts/errors/app-error';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { startTestGateway, type TestGateway } from '../test/test-gateway';
import { hostOf } from './telemetry-route';

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

  const start = async (config: Parameters<typeof startTestGateway>[0] = {}) => {
    gw = await startTestGateway(config);
    gw.upstream.enrollment.authenticateDevice = async ({ deviceToken }) => {
      if (deviceToken === 'sts_dt_disabled') {
        return { deviceId: 'dev-2', orgId: 'org-1', status: DeviceStatus.DEVICE_STATUS_DISABLED };
      }
      if (deviceToken === 'sts_dt_other') {
        return { deviceId: 'dev-3', orgId: 'org-1', status: DeviceStatus.DEVICE_STATUS_ACTIVE };
      }
      if (deviceToken !== 'sts_dt_good') throw new AppError('DEVICE_TOKEN_INVALID');
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
  const post = (payload: unknown, token = 'sts_dt_good') =>
    gw.app.inject({
      method: 'POST',
      url: '/api/device/telemetry',
      headers: { 'x-device-token': token, 'content-type': 'application/json' },
      payload: JSON.stringify(payload),
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
    const missing = await gw.app.inject({
      method: 'POST',
      url: '/api/device/telemetry',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ batch_id: 'x', events: [event()] }),
    });
    expect([missing.statusCode, missing.json<{ code: string }>().code]).toEqual([
      401,
      'DEVICE_TOKEN_INVALID',
    ]);
    expect((await post({ batch_id: 'x', events: [event()] }, 'sts_dt_wrong')).statusCode).toBe(401);
    const disabled = await post({ batch_id: 'x', events: [event()] }, 'sts_dt_disabled');
    expect([disabled.statusCode, disabled.json<{ code: string }>().code]).toEqual([403, 'DEVICE_DISABLED']);
    expect(gw.published).toEqual([]);
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
    expect((await post({ batch_id: 'b-3', events: [event()] }, 'sts_dt_other')).statusCode).toBe(202);
    gw.clock.nowMs += 30_000;
    expect((await post({ batch_id: 'b-3', events: [event()] })).statusCode).toBe(202);
    expect(gw.published.map((b) => `${b.device_id}/${b.batch_id}`)).toEqual([
      'dev-1/b-1',
      'dev-3/b-3',
      'dev-1/b-3',
    ]);
  });
});
