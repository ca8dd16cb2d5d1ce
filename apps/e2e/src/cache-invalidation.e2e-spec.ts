import { createPromiseClient } from '@sts/grpc/grpc-client';
import { BillingServiceService } from '@sts/proto/gen/billing/v1/billing';
import { eventually, startSystem, type SystemUnderTest } from './system-under-test';

interface Member {
  id: string;
  email: string;
  role: string;
}

/**
 * The gateway reuses resolved callers and member pages (here for a minute); membership events must
 * make every change visible long before that.
 */
describe('gateway caches are invalidated by membership events', () => {
  let system: SystemUnderTest;

  beforeAll(async () => {
    system = await startSystem({
      gatewayEnv: {
        CALLER_CACHE_TTL_MS: '60000',
        LICENSE_CACHE_TTL_MS: '60000',
        MEMBER_LIST_CACHE_TTL_MS: '60000',
        ANALYTICS_CACHE_TTL_MS: '60000',
      },
    });
  });

  afterAll(async () => {
    await system?.stop();
  });

  it('shows a new member, a role change and a removal within a second, with 60 s caches', async () => {
    const admin = await system.tokenFor('owner@cache.test', { name: 'Owner' });
    expect((await system.api<Member[]>('GET', '/api/members', { token: admin })).body).toHaveLength(1);

    await system.api('POST', '/api/invites', {
      token: admin,
      body: { email: 'new@cache.test', role: 'ANALYST' },
    });
    const mail = await system.mail.waitFor((m) => m.to.includes('new@cache.test'), 10_000);
    const token = /sts_inv_[A-Za-z0-9_-]{43}/.exec(mail.text ?? '')![0];
    await system.api('POST', '/api/invites/accept', { body: { token } });
    const newcomer = await system.tokenFor('new@cache.test', { name: 'New' });
    expect((await system.api('GET', '/api/members', { token: newcomer })).status).toBe(200);

    const started = Date.now();
    const members = await eventually(async () => {
      const list = (await system.api<Member[]>('GET', '/api/members', { token: admin })).body;
      return list.length === 2 ? list : undefined;
    }, 1_000);
    expect(Date.now() - started).toBeLessThan(1_000);

    // A change made through the gateway is visible to its own caller at once...
    const newcomerId = members.find((m) => m.email === 'new@cache.test')!.id;
    const demoted = await system.api<Member>('PATCH', `/api/members/${newcomerId}`, {
      token: admin,
      body: { role: 'APP_USER' },
    });
    expect(demoted.body.role).toBe('APP_USER');
    expect(
      (await system.api<Member[]>('GET', '/api/members', { token: admin })).body.find(
        (m) => m.id === newcomerId,
      )?.role,
    ).toBe('APP_USER');
    // ...and to the member whose cached role it changed.
    expect((await system.api('GET', '/api/members', { token: newcomer })).status).toBe(403);

    expect((await system.api('DELETE', `/api/members/${newcomerId}`, { token: admin })).status).toBe(204);
    expect((await system.api<Member[]>('GET', '/api/members', { token: admin })).body).toHaveLength(1);
    // The removed member no longer acts in the organization (they fall back to a personal one).
    const after = await system.api<{ org: { name: string } }>('GET', '/api/session', { token: newcomer });
    expect(after.body.org.name).toBe("New's organization");
  });

  it('shows a license changed elsewhere (a payment event another gateway took) within a second, with a 60 s cache', async () => {
    const admin = await system.tokenFor('payer@cache.test', { name: 'Payer' });
    const license = async () =>
      (await system.api<{ license: { status: string } }>('GET', '/api/session', { token: admin })).body
        .license.status;
    const started = await system.api<{ url: string }>('POST', '/api/billing/checkout-session', {
      token: admin,
      body: { plan: 'pro', cycle: 'monthly' },
    });
    expect(await license()).toBe('onboarding');
    const { session } = system.stripe.completeCheckout(started.body.url.split('/').pop()!);
    const { payload, signature } = system.stripe.signed(
      system.stripe.event('checkout.session.completed', session),
      system.stripeWebhookSecret,
    );
    // Straight to billing, as through another gateway: only billing.updated can tell this one.
    const billing = createPromiseClient(
      BillingServiceService,
      system.grpcAddresses.billing,
      5_000,
      system.serviceAuth.as('billing'),
    );
    try {
      expect(await billing.handlePaymentEvent({ payload: Buffer.from(payload), signature })).toMatchObject({
        outcome: 'applied',
      });
    } finally {
      billing.close();
    }
    const changed = Date.now();
    await eventually(async () => (await license()) === 'active', 1_000);
    expect(Date.now() - changed).toBeLessThan(1_000);
  });

  it('drops cached analytics when a device is disabled or enabled, with a 60 s cache', async () => {
    const admin = await system.tokenFor('figures@cache.test', { name: 'Figures' });
    const key = (await system.api<{ key: string }>('POST', '/api/enrollment-key', { token: admin })).body.key;
    const enroll = async (name: string) => {
      const codes = await system.api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
        token: admin,
        body: { count: 1 },
      });
      return (
        await system.api<{ device_id: string; org_id: string; device_token: string }>(
          'POST',
          '/api/device/enroll',
          {
            headers: { 'x-enrollment-key': key },
            body: { code: codes.body.codes[0]!.code, machine_id: name, hostname: name, metadata: {} },
          },
        )
      ).body;
    };
    const report = (deviceToken: string, events: number) =>
      system.api('POST', '/api/device/telemetry', {
        headers: { 'x-device-token': deviceToken },
        body: {
          batch_id: `b-${deviceToken.slice(-8)}`,
          events: Array.from({ length: events }, () => ({
            observed_at: new Date(Date.now() - 60_000).toISOString(),
            url: 'https://example.com/',
            verdict: 'allowed',
            classification_ms: 10,
          })),
        },
      });
    const kept = await enroll('kept');
    const toggled = await enroll('toggled');
    expect((await report(kept.device_token, 2)).status).toBe(202);
    expect((await report(toggled.device_token, 3)).status).toBe(202);
    // Stored (read in ClickHouse, not through the API, so that nothing is cached before).
    await eventually(async () => {
      const result = await system.clickhouse.client.query({
        // The rollup the API reads (a view fills it from the same insert, a moment after the raw rows).
        query: `SELECT sum(total_analyzed) AS n FROM telemetry_hourly WHERE org_id = '${kept.org_id}'`,
        format: 'JSONEachRow',
      });
      return Number((await result.json<{ n: string }>())[0]?.n) === 5 || undefined;
    });
    const total = async () =>
      (
        await system.api<{ total_analyzed: number }>('GET', '/api/analytics/summary?window=24h', {
          token: admin,
        })
      ).body.total_analyzed;
    expect(await total()).toBe(5);

    const disabledAt = Date.now();
    expect(
      (await system.api('POST', `/api/devices/${toggled.device_id}/disable`, { token: admin })).status,
    ).toBe(204);
    await eventually(async () => (await total()) === 2 || undefined, 5_000);
    expect(Date.now() - disabledAt).toBeLessThan(3_000);

    const enabledAt = Date.now();
    expect(
      (await system.api('POST', `/api/devices/${toggled.device_id}/enable`, { token: admin })).status,
    ).toBe(204);
    await eventually(async () => (await total()) === 5 || undefined, 5_000);
    expect(Date.now() - enabledAt).toBeLessThan(3_000);
  });
});
