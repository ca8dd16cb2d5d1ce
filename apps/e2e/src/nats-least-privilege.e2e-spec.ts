import { enrollDevice, eventually, startSystem, type SystemUnderTest } from './system-under-test';

interface FeedItem {
  type: string;
  message: string;
}

/**
 * The whole system on a NATS server where each service has its own user, allowed only what it needs
 * (docs/decisions.md, "Trust model"), and the streams, consumers and buckets were made beforehand by
 * the admin user, as nats-setup does in production: every path that crosses NATS still works.
 */
describe('every flow under per-service NATS users (least privilege)', () => {
  let system: SystemUnderTest;
  let admin: string;

  beforeAll(async () => {
    system = await startSystem({ natsUsers: true });
    admin = await system.tokenFor('root@least-privilege.test', { name: 'Root' });
  });

  afterAll(async () => {
    await system?.stop();
  });

  const feed = async () => (await system.api<FeedItem[]>('GET', '/api/notifications', { token: admin })).body;

  it('creates the organization and its license (identity → billing), and e-mails an invitation (identity → notification)', async () => {
    const session = await system.api<{ license: { status: string } }>('GET', '/api/session', {
      token: admin,
    });
    expect(session.status).toBe(200);
    expect(session.body.license.status).toBe('pending');

    const invited = await system.api('POST', '/api/invites', {
      token: admin,
      body: { email: 'invitee@least-privilege.test', role: 'ANALYST' },
    });
    expect(invited.status).toBe(201);
    const mail = await system.mail.waitFor((m) => m.to.includes('invitee@least-privilege.test'), 15_000);
    expect(mail.subject).toBeTruthy();
  });

  it('enrolls a device, stores its telemetry, raises a threat alert, and refuses it once disabled', async () => {
    const { device_id: deviceId, device_token: deviceToken } = await enrollDevice(system, admin, 'lp-laptop');
    // enrollment → notification: the feed names the hostname.
    await eventually(async () =>
      (await feed()).some((item) => item.type === 'device.enrolled' && item.message.includes('lp-laptop')),
    );

    const observedAt = new Date(Date.now() - 60_000).toISOString();
    const sent = await system.api('POST', '/api/device/telemetry', {
      headers: { 'x-device-token': deviceToken },
      body: {
        batch_id: 'lp-1',
        events: Array.from({ length: 6 }, (_, i) => ({
          observed_at: observedAt,
          url: `https://bad-${i}.example/`,
          verdict: 'blocked',
          classification_ms: 10,
        })),
      },
    });
    expect(sent.status).toBe(202);
    // gateway → analytics (its consumer and claims bucket) → ClickHouse.
    const figures = await eventually(async () => {
      const summary = await system.api<{ dangerous_blocks: number }>(
        'GET',
        `/api/analytics/summary?window=24h&device_id=${deviceId}`,
        { token: admin },
      );
      return summary.body.dangerous_blocks === 6 ? summary.body : undefined;
    }, 20_000);
    expect(figures.dangerous_blocks).toBe(6);
    // analytics → notification: threat.detected becomes a feed item.
    await eventually(async () => (await feed()).some((item) => item.type === 'threat.alert'), 15_000);
    // gateway → enrollment (headers-only consumer): last_seen_at moves.
    await eventually(async () => {
      const devices = await system.api<{ id: string; enrolled_at: string; last_seen_at: string }[]>(
        'GET',
        '/api/devices',
        { token: admin },
      );
      const device = devices.body.find((d) => d.id === deviceId);
      return device !== undefined && device.last_seen_at > device.enrolled_at;
    }, 15_000);

    // enrollment → gateway (a plain subscription to device events) and → analytics.
    expect((await system.api('POST', `/api/devices/${deviceId}/disable`, { token: admin })).status).toBe(204);
    await eventually(async () => {
      const refused = await system.api<{ code: string }>('POST', '/api/device/telemetry', {
        headers: { 'x-device-token': deviceToken },
        body: {
          batch_id: 'lp-2',
          events: [
            { observed_at: observedAt, url: 'https://ok.example/', verdict: 'allowed', classification_ms: 1 },
          ],
        },
      });
      return refused.status === 403 && refused.body.code === 'DEVICE_DISABLED';
    });
  });
});
