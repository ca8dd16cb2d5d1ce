import { randomBytes } from 'node:crypto';
import { AppError } from '@sts/errors/app-error';
import { Webhook } from 'standardwebhooks';
import { ALERT_LIMITS, SECRET_ROTATION_GRACE_MS, validAlertDescription, validAlertUrl } from './alert-model';
import { newEnvelope } from '@sts/events/event-envelope';
import type { AlertDelivery, AlertEndpointWithSecret } from './alert-model';
import { AlertService, attemptDelivery, threatDeliveries } from './alert-service';
import type { AlertDeliveryQueue, AlertSender, NotificationStore } from './notification-ports';
import { InMemoryNotificationStore, ManualClock } from './test/in-memory-notification-store';

const code = async (promise: Promise<unknown>) => {
  try {
    await promise;
  } catch (error) {
    return error instanceof AppError ? error.code : String(error);
  }
  return 'no error';
};

/** A service over a fresh in-memory store, with the clock and sealing key the tests move and read. */
function alertServiceUnderTest() {
  const store = new InMemoryNotificationStore();
  const clock = new ManualClock();
  const key = randomBytes(32);
  const service = new AlertService(store, clock, { sealingKey: key, publicAppUrl: 'https://app.example' });
  return { store, clock, key, service };
}

describe('alert endpoints', () => {
  let store: InMemoryNotificationStore;
  let service: AlertService;
  let woken = 0;

  beforeEach(() => {
    store = new InMemoryNotificationStore();
    woken = 0;
    service = new AlertService(
      store,
      new ManualClock(),
      { sealingKey: randomBytes(32), publicAppUrl: 'https://app.example' },
      () => woken++,
    );
  });

  it('accepts https URLs only, without credentials or fragments, normalized', () => {
    expect(validAlertUrl('https://Hooks.Example.com:443/alerts?x=1')).toBe(
      'https://hooks.example.com/alerts?x=1',
    );
    expect(validAlertUrl('https://hooks.example.com:8443/a')).toBe('https://hooks.example.com:8443/a');
    for (const bad of [
      'http://hooks.example.com/',
      'ftp://hooks.example.com/',
      'javascript:alert(1)',
      'https://user:pass@hooks.example.com/',
      'https://hooks.example.com/#frag',
      'https://hooks.example.com/ a',
      'https://hooks.example.com/\u0000',
      'hooks.example.com',
      `https://hooks.example.com/${'a'.repeat(ALERT_LIMITS.urlLength)}`,
    ]) {
      expect(() => validAlertUrl(bad)).toThrow(AppError);
    }
  });

  it('takes an optional description of plain text', () => {
    expect(validAlertDescription(undefined)).toBeNull();
    expect(validAlertDescription('  ')).toBeNull();
    expect(validAlertDescription(' SIEM ')).toBe('SIEM');
    expect(() => validAlertDescription('a'.repeat(201))).toThrow(AppError);
    expect(() => validAlertDescription('line\nbreak')).toThrow(AppError);
  });

  it('creates an endpoint with a secret shown once and stored sealed; refuses duplicates and more than the cap', async () => {
    const { endpoint, secret } = await service.create('org-1', 'https://a.example/', 'first');
    expect(secret).toMatch(/^whsec_/);
    const stored = store.state.alertEndpoints[0]!;
    expect(stored.secretSealed).not.toContain(secret.slice(6));
    expect(await service.list('org-1')).toEqual([endpoint]);
    expect(Object.keys((await service.list('org-1'))[0]!)).not.toContain('secretSealed');

    expect(await code(service.create('org-1', 'https://a.example/', null))).toBe('ALERT_ENDPOINT_DUPLICATE');
    // Another organization may use the same URL.
    await service.create('org-2', 'https://a.example/', null);
    for (let i = 1; i < ALERT_LIMITS.endpointsPerOrganization; i++) {
      await service.create('org-1', `https://a.example/${i}`, null);
    }
    expect(await code(service.create('org-1', 'https://a.example/one-more', null))).toBe(
      'ALERT_ENDPOINT_LIMIT',
    );
  });

  it("keeps organizations apart: another organization's endpoint is not found", async () => {
    const { endpoint } = await service.create('org-1', 'https://a.example/', null);
    expect(await code(service.delete('org-2', endpoint.id))).toBe('ALERT_ENDPOINT_NOT_FOUND');
    expect(await code(service.sendTest('org-2', endpoint.id))).toBe('ALERT_ENDPOINT_NOT_FOUND');
    expect(await code(service.deliveries('org-2', endpoint.id, 10))).toBe('ALERT_ENDPOINT_NOT_FOUND');
    expect(await service.list('org-2')).toEqual([]);

    const test = await service.sendTest('org-1', endpoint.id);
    expect(test).toMatchObject({ status: 'pending', attempts: 0, eventType: 'alert.test' });
    expect(woken).toBe(1);
    expect(await service.deliveries('org-1', endpoint.id, 10)).toEqual([test]);
    await service.delete('org-1', endpoint.id);
    expect(await service.list('org-1')).toEqual([]);
    expect(await code(service.delete('org-1', endpoint.id))).toBe('ALERT_ENDPOINT_NOT_FOUND');
  });

  it('allows a few test messages per endpoint a minute and an hour, then RATE_LIMITED until they age out', async () => {
    const clock = new ManualClock();
    const limited = new AlertService(store, clock, {
      sealingKey: randomBytes(32),
      publicAppUrl: 'https://app.example',
    });
    const { endpoint } = await limited.create('org-1', 'https://a.example/', null);
    const { endpoint: other } = await limited.create('org-1', 'https://b.example/', null);
    const started = clock.now().getTime();
    let sent = 0;
    const refusal = async (endpointId = endpoint.id) => {
      try {
        await limited.sendTest('org-1', endpointId);
        sent++;
        return null;
      } catch (error) {
        return error instanceof AppError ? `${error.code}: ${error.detail}` : String(error);
      }
    };

    for (let i = 0; i < ALERT_LIMITS.testsPerEndpointPerMinute; i++) expect(await refusal()).toBeNull();
    clock.advance(15_000);
    expect(await refusal()).toBe(
      'RATE_LIMITED: At most 3 test messages per endpoint per minute; try again in 45 s',
    );
    // Another endpoint has its own allowance; a refused test leaves nothing behind.
    expect(await refusal(other.id)).toBeNull();
    expect(store.state.alertDeliveries.filter((d) => d.endpointId === endpoint.id)).toHaveLength(3);

    // A minute later three more, and so on until the hour's twenty are used up.
    while (sent < ALERT_LIMITS.testsPerEndpointPerHour + 1) {
      clock.advance(60_000);
      for (let i = 0; i < ALERT_LIMITS.testsPerEndpointPerMinute; i++) await refusal();
    }
    clock.advance(60_000);
    expect(await refusal()).toMatch(
      /^RATE_LIMITED: At most 20 test messages per endpoint per hour; try again in \d+ s$/,
    );
    expect(store.state.alertDeliveries.filter((d) => d.endpointId === endpoint.id)).toHaveLength(20);
    clock.advance(started + 3_600_000 - clock.now().getTime());
    expect(await refusal()).toBeNull();
  });

  it('tells the feed which endpoint was disabled by its id and host, never its path or query', async () => {
    const clock = new ManualClock();
    const key = randomBytes(32);
    const alerts = new AlertService(store, clock, { sealingKey: key, publicAppUrl: 'https://app.example' });
    const { endpoint } = await alerts.create(
      'org-1',
      'https://hooks.example.com:8443/services/T0KEN/in?api_key=s3cr3t',
      null,
    );
    const delivery = await alerts.sendTest('org-1', endpoint.id);
    const notices: string[] = [];
    const queue: AlertDeliveryQueue = {
      claimDue: async () => [],
      recordAttempt: async () => ({
        recorded: true,
        failingSince: new Date(clock.now().getTime() - 3_600_000),
      }),
      disableEndpoint: async (_endpoint, _at, notice) => {
        notices.push(notice.message);
        return true;
      },
    };
    const failing: AlertSender = {
      send: async () => ({ kind: 'answered', status: 503, durationMs: 1, retryAfter: null }),
    };
    const [stored] = store.state.alertEndpoints;
    const record = await attemptDelivery(
      { leaseToken: 'lease', delivery, endpoint: stored! },
      failing,
      queue,
      key,
      clock,
      60_000,
    );
    expect(record.endpointDisabled).toBe(true);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain(endpoint.id);
    expect(notices[0]).toContain('hooks.example.com:8443');
    expect(notices[0]).toContain('HTTP 503');
    for (const secret of ['T0KEN', 's3cr3t', '/services', 'api_key'])
      expect(notices[0]).not.toContain(secret);
  });

  it('rotates the secret: both sign for the grace period, then only the new one', async () => {
    const clock = new ManualClock(new Date());
    const key = randomBytes(32);
    const rotating = new AlertService(store, clock, { sealingKey: key, publicAppUrl: 'https://app.example' });
    const { endpoint, secret: first } = await rotating.create('org-1', 'https://a.example/', null);
    expect(await code(rotating.rotateSecret('org-2', endpoint.id))).toBe('ALERT_ENDPOINT_NOT_FOUND');
    const rotated = await rotating.rotateSecret('org-1', endpoint.id);
    expect(rotated.secret).not.toBe(first);
    expect(rotated.previousSecretExpiresAt).toEqual(
      new Date(clock.now().getTime() + SECRET_ROTATION_GRACE_MS),
    );

    const sent: Record<string, string>[] = [];
    const sender: AlertSender = {
      send: async ({ headers }) => {
        sent.push(headers);
        return { kind: 'answered', status: 200, durationMs: 1, retryAfter: null };
      },
    };
    const queue: AlertDeliveryQueue = {
      claimDue: async () => [],
      recordAttempt: async () => ({ recorded: true, failingSince: null }),
      disableEndpoint: async () => false,
    };
    const attempt = async () => {
      const delivery = await rotating.sendTest('org-1', endpoint.id);
      const [stored] = store.state.alertEndpoints;
      await attemptDelivery({ leaseToken: 'lease', delivery, endpoint: stored! }, sender, queue, key, clock);
      return { body: delivery.body, headers: sent.at(-1)! };
    };
    const verifies = (
      secret: string,
      { body, headers }: { body: string; headers: Record<string, string> },
    ) => {
      try {
        new Webhook(secret).verify(body, headers);
        return true;
      } catch {
        return false;
      }
    };

    const during = await attempt();
    expect([verifies(rotated.secret, during), verifies(first, during)]).toEqual([true, true]);
    clock.advance(SECRET_ROTATION_GRACE_MS + 1);
    const after = await attempt();
    // The receiver's clock check (5 minutes) is the library's: keep its view of "now" in step.
    jest.useFakeTimers({ now: clock.now(), doNotFake: ['nextTick', 'setImmediate'] });
    try {
      expect([verifies(rotated.secret, after), verifies(first, after)]).toEqual([true, false]);
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('alert messages and rules users rely on', () => {
  let store: InMemoryNotificationStore;
  let clock: ManualClock;
  let key: Buffer;
  let service: AlertService;

  beforeEach(() => {
    ({ store, clock, key, service } = alertServiceUnderTest());
  });

  const failure = async (promise: Promise<unknown>) => {
    try {
      await promise;
    } catch (error) {
      return error instanceof AppError ? `${error.code}: ${error.detail}` : String(error);
    }
    return 'no error';
  };

  it('sends a threat alert with its exact fields and dashboard link, to enabled endpoints only', () => {
    const endpoint = (id: string, disabledAt: Date | null) => ({
      id,
      orgId: 'org-1',
      url: `https://${id}.example/`,
      description: null,
      createdAt: clock.now(),
      disabledAt,
    });
    const threat = newEnvelope('threat.detected', {
      org_id: 'org-1',
      device_id: 'd/1 x',
      hostname: 'kiosk',
      dangerous_blocks: 5,
      window_minutes: 10,
      detected_at: '2026-03-01T10:00:00.000Z',
    });

    const deliveries = threatDeliveries(
      threat,
      [endpoint('e1', null), endpoint('e2', clock.now()), endpoint('e3', null)],
      { publicAppUrl: 'https://app.example/base//' },
      clock.now(),
    );

    expect(deliveries.map((d) => [d.endpointId, d.status, d.attempts, d.eventType])).toEqual([
      ['e1', 'pending', 0, 'alert.threat_detected'],
      ['e3', 'pending', 0, 'alert.threat_detected'],
    ]);
    expect(JSON.parse(deliveries[0]!.body)).toEqual({
      id: threat.id,
      type: 'alert.threat_detected',
      created_at: '2026-03-01T10:00:00.000Z',
      data: {
        org_id: 'org-1',
        device_id: 'd/1 x',
        hostname: 'kiosk',
        dangerous_blocks: 5,
        window_minutes: 10,
        detected_at: '2026-03-01T10:00:00.000Z',
        dashboard_url: 'https://app.example/base/devices/d%2F1%20x',
      },
    });
    expect(deliveries[1]!.body).toBe(deliveries[0]!.body);
  });

  it('sends a test message with its exact fields', async () => {
    const { endpoint } = await service.create('org-1', 'https://a.example/', null);
    const test = await service.sendTest('org-1', endpoint.id);
    expect(JSON.parse(test.body)).toEqual({
      id: test.id,
      type: 'alert.test',
      created_at: clock.now().toISOString(),
      data: {
        org_id: 'org-1',
        endpoint_id: endpoint.id,
        message: 'A test alert: this endpoint receives alerts.',
      },
    });
  });

  it('refuses a duplicate URL as a duplicate even at the cap, and names the cap when it is reached', async () => {
    for (let i = 0; i < ALERT_LIMITS.endpointsPerOrganization; i++) {
      await service.create('org-1', `https://a.example/${i}`, null);
    }
    expect(await failure(service.create('org-1', 'https://a.example/0', null))).toMatch(
      /^ALERT_ENDPOINT_DUPLICATE: /,
    );
    expect(await failure(service.create('org-1', 'https://a.example/new', null))).toBe(
      'ALERT_ENDPOINT_LIMIT: An organization may have at most 20 alert endpoints',
    );
  });

  it('refuses a URL a concurrent create stored first (the insert loses the race)', async () => {
    await service.create('org-1', 'https://a.example/', null);
    // The other create committed after this one listed the endpoints.
    const racing: NotificationStore = {
      read: (work) => store.read(work),
      transaction: (work) =>
        store.transaction((repos) => work({ ...repos, listAlertEndpoints: async () => [] })),
    };
    const late = new AlertService(racing, clock, { sealingKey: key, publicAppUrl: 'https://app.example' });
    expect(await code(late.create('org-1', 'https://a.example/', null))).toBe('ALERT_ENDPOINT_DUPLICATE');
    expect(store.state.alertEndpoints).toHaveLength(1);
  });

  it('counts a test sent exactly a minute ago out of the minute, and the wait from the oldest in the window', async () => {
    const { endpoint } = await service.create('org-1', 'https://a.example/', null);
    for (let i = 0; i < ALERT_LIMITS.testsPerEndpointPerMinute; i++) {
      await service.sendTest('org-1', endpoint.id);
      clock.advance(10_000);
    }
    // Sent at 0, 10 and 20 s; now 30 s. The store need not return them in order.
    store.state.alertDeliveries.reverse();
    expect(await failure(service.sendTest('org-1', endpoint.id))).toBe(
      'RATE_LIMITED: At most 3 test messages per endpoint per minute; try again in 30 s',
    );
    clock.advance(29_999);
    expect(await failure(service.sendTest('org-1', endpoint.id))).toBe(
      'RATE_LIMITED: At most 3 test messages per endpoint per minute; try again in 1 s',
    );
    clock.advance(1);
    expect(await failure(service.sendTest('org-1', endpoint.id))).toBe('no error');
  });
});

describe('one delivery attempt', () => {
  let store: InMemoryNotificationStore;
  let clock: ManualClock;
  let key: Buffer;
  let service: AlertService;

  beforeEach(() => {
    ({ store, clock, key, service } = alertServiceUnderTest());
  });

  const answering = (status: number) => {
    const sent: Record<string, string>[] = [];
    const sender: AlertSender = {
      send: async ({ headers }) => {
        sent.push(headers);
        return { kind: 'answered', status, durationMs: 1, retryAfter: null };
      },
    };
    return { sender, sent };
  };

  /** A queue answering with `outcome`, recording the notices of disabled endpoints. */
  const queueOf = (outcome: { recorded: boolean; failingSince: Date | null }) => {
    const notices: string[] = [];
    const queue: AlertDeliveryQueue = {
      claimDue: async () => [],
      recordAttempt: async () => outcome,
      disableEndpoint: async (_endpoint, _at, notice) => {
        notices.push(notice.message);
        return true;
      },
    };
    return { queue, notices };
  };

  const setUpDelivery = async (): Promise<{
    delivery: AlertDelivery;
    endpoint: AlertEndpointWithSecret;
  }> => {
    const { endpoint } = await service.create('org-1', 'https://hooks.example.com/in', null);
    const delivery = await service.sendTest('org-1', endpoint.id);
    return { delivery, endpoint: store.state.alertEndpoints[0]! };
  };

  it('records a secret it cannot open as failed for good, without sending and without disabling', async () => {
    const { delivery, endpoint } = await setUpDelivery();
    const { sender, sent } = answering(200);
    const { queue, notices } = queueOf({ recorded: true, failingSince: null });

    const result = await attemptDelivery(
      { leaseToken: 'lease', delivery, endpoint },
      sender,
      queue,
      randomBytes(32),
      clock,
      0,
    );

    expect(result).toEqual({
      status: 'failed',
      nextAttemptAt: null,
      at: clock.now(),
      responseCode: null,
      error: 'the endpoint secret cannot be opened (SECRET_SEALING_KEY changed?); rotate the secret',
      durationMs: 0,
      endpointDisabled: false,
      recorded: true,
    });
    expect(sent).toHaveLength(0);
    expect(notices).toHaveLength(0);
  });

  it('schedules the second attempt after a first failure, 5 s later give or take the jitter', async () => {
    const { delivery, endpoint } = await setUpDelivery();
    const { queue } = queueOf({ recorded: true, failingSince: clock.now() });

    const result = await attemptDelivery(
      { leaseToken: 'lease', delivery, endpoint },
      answering(503).sender,
      queue,
      key,
      clock,
    );

    expect(result.status).toBe('pending');
    expect(result.error).toBe('HTTP 503');
    expect(result.endpointDisabled).toBe(false);
    const wait = result.nextAttemptAt!.getTime() - clock.now().getTime();
    expect(wait).toBeGreaterThanOrEqual(4_000);
    expect(wait).toBeLessThanOrEqual(6_000);
  });

  it('signs with the previous secret too only before it expires', async () => {
    const { delivery } = await setUpDelivery();
    await service.rotateSecret('org-1', delivery.endpointId);
    const { queue } = queueOf({ recorded: true, failingSince: null });
    const signatures = async () => {
      const { sender, sent } = answering(200);
      const endpoint = store.state.alertEndpoints[0]!;
      await attemptDelivery({ leaseToken: 'lease', delivery, endpoint }, sender, queue, key, clock);
      return sent[0]!['webhook-signature']!.split(' ').length;
    };

    clock.advance(SECRET_ROTATION_GRACE_MS - 1);
    expect(await signatures()).toBe(2);
    clock.advance(1);
    expect(await signatures()).toBe(1);
  });

  it('disables an endpoint failing for exactly the threshold, and tells the feed how to undo it', async () => {
    const { delivery, endpoint } = await setUpDelivery();
    const failingSince = new Date(clock.now().getTime() - 60_000);
    const { queue, notices } = queueOf({ recorded: true, failingSince });

    const result = await attemptDelivery(
      { leaseToken: 'lease', delivery, endpoint },
      answering(503).sender,
      queue,
      key,
      clock,
      60_000,
    );

    expect(result.endpointDisabled).toBe(true);
    expect(notices).toEqual([
      `Alert endpoint ${endpoint.id} (hooks.example.com) was disabled: deliveries have failed since ` +
        `${failingSince.toISOString()} (last: HTTP 503). Enable it again once it receives alerts.`,
    ]);
  });

  it('leaves an endpoint enabled while it fails for less than the threshold, after a delivery, or when the attempt was not recorded', async () => {
    const { delivery, endpoint } = await setUpDelivery();
    const attempt = (status: number, outcome: { recorded: boolean; failingSince: Date | null }) => {
      const { queue, notices } = queueOf(outcome);
      return attemptDelivery(
        { leaseToken: 'lease', delivery, endpoint },
        answering(status).sender,
        queue,
        key,
        clock,
        60_000,
      ).then((result) => ({ disabled: result.endpointDisabled, notices: notices.length }));
    };
    const longAgo = new Date(clock.now().getTime() - 3_600_000);

    expect(
      await attempt(503, { recorded: true, failingSince: new Date(clock.now().getTime() - 59_999) }),
    ).toEqual({ disabled: false, notices: 0 });
    expect(await attempt(200, { recorded: true, failingSince: null })).toEqual({
      disabled: false,
      notices: 0,
    });
    // Another worker holds the delivery now: its attempt decides.
    expect(await attempt(503, { recorded: false, failingSince: longAgo })).toEqual({
      disabled: false,
      notices: 0,
    });
  });
});
