import type { Msg, NatsConnection, SubscriptionOptions } from '@nats-io/nats-core';
import { newEnvelope } from '@sts/events/event-envelope';
import type { Logger } from '@sts/logger/create-logger';
import { GatewayCaches } from './gateway-caches';
import { subscribeToCacheEvictions } from './cache-invalidation';
import { subscribeToDeviceChanges, type DeviceCredentials } from '../auth/device-credentials';

/** Records each subscription's callback, so a test can deliver messages to it. */
function fakeNats() {
  const callbacks = new Map<string, NonNullable<SubscriptionOptions['callback']>>();
  const nc = {
    subscribe: (subject: string, options: SubscriptionOptions) => {
      if (options.callback) callbacks.set(subject, options.callback);
      return { unsubscribe: () => undefined };
    },
  } as unknown as NatsConnection;
  const deliver = (subject: string, payload: unknown): void => {
    void callbacks.get(subject)?.(null, { json: () => payload } as unknown as Msg);
  };
  return { nc, callbacks, deliver };
}

describe('membership invalidation', () => {
  const at = '2026-03-01T12:00:00.000Z';
  const events = {
    'member.joined': {
      org_id: 'acme',
      member_id: 'm-1',
      user_id: 'ada',
      email: 'ada@example.com',
      name: 'Ada',
      role: 'ANALYST',
      joined_at: at,
    },
    'member.updated': {
      org_id: 'acme',
      member_id: 'm-1',
      user_id: 'ada',
      role: 'ANALYST',
      dashboard_access: false,
      at,
    },
    'member.removed': { org_id: 'acme', member_id: 'm-1', user_id: 'ada', at },
  } as const;

  it.each(Object.keys(events) as (keyof typeof events)[])(
    'evicts the user and organization named by %s',
    (type) => {
      const { nc, deliver, callbacks } = fakeNats();
      const caches = new GatewayCaches({
        CALLER_CACHE_TTL_MS: 0,
        LICENSE_CACHE_TTL_MS: 0,
        MEMBER_LIST_CACHE_TTL_MS: 0,
        ANALYTICS_CACHE_TTL_MS: 0,
      });
      const evicted = jest.spyOn(caches, 'membershipChanged');
      const logger = { warn: jest.fn() } as unknown as Logger;
      subscribeToCacheEvictions(nc, 'test', caches, logger);
      expect([...callbacks.keys()]).toEqual([
        'test.events.member.joined',
        'test.events.member.updated',
        'test.events.member.removed',
        'test.events.billing.updated',
        'test.signals.device-states-applied',
      ]);

      deliver(`test.events.${type}`, newEnvelope(type, events[type]));
      expect(evicted).toHaveBeenCalledWith('acme', 'ada');

      // Data outside the event catalogue is ignored, with a warning.
      deliver(`test.events.${type}`, newEnvelope(type, { org_id: 'acme' }));
      deliver(`test.events.${type}`, { data: events[type] });
      expect(evicted).toHaveBeenCalledTimes(1);
      expect(logger.warn).toHaveBeenCalledTimes(2);
    },
  );

  it("evicts the organization's license on billing.updated", () => {
    const { nc, deliver } = fakeNats();
    const caches = new GatewayCaches({
      CALLER_CACHE_TTL_MS: 0,
      LICENSE_CACHE_TTL_MS: 0,
      MEMBER_LIST_CACHE_TTL_MS: 0,
      ANALYTICS_CACHE_TTL_MS: 0,
    });
    const license = jest.spyOn(caches, 'licenseChanged');
    const membership = jest.spyOn(caches, 'membershipChanged');
    subscribeToCacheEvictions(nc, 'test', caches, { warn: jest.fn() } as unknown as Logger);
    deliver(
      'test.events.billing.updated',
      newEnvelope('billing.updated', {
        org_id: 'acme',
        plan: 'pro',
        status: 'active',
        billing_cycle: 'annual',
        expires_at: at,
        summary: 'Subscription active: Pro, billed yearly',
      }),
    );
    expect(license).toHaveBeenCalledWith('acme');
    expect(membership).not.toHaveBeenCalled();
  });
});

/** A promise and the function that settles it, so a test decides when a load finishes. */
function deferred<Value>() {
  let resolve!: (value: Value) => void;
  const promise = new Promise<Value>((res) => (resolve = res));
  return { promise, resolve };
}

describe('analytics answers and device changes', () => {
  const disabled = {
    org_id: 'acme',
    device_id: 'd-1',
    hostname: 'alpha',
    at: '2026-03-01T12:00:00.000Z',
  };

  /** A gateway's caches (a minute of analytics answers) with its subscriptions, over fake NATS. */
  function gateway() {
    const { nc, deliver } = fakeNats();
    const caches = new GatewayCaches({
      CALLER_CACHE_TTL_MS: 0,
      LICENSE_CACHE_TTL_MS: 0,
      MEMBER_LIST_CACHE_TTL_MS: 0,
      ANALYTICS_CACHE_TTL_MS: 60_000,
    });
    const logger = { warn: jest.fn() } as unknown as Logger;
    const credentials = { deviceChanged: jest.fn() } as unknown as DeviceCredentials;
    subscribeToCacheEvictions(nc, 'test', caches, logger);
    subscribeToDeviceChanges(nc, 'test', credentials, logger);
    const summary = (figures: string) => caches.analyticsAnswer('acme', '24h', async () => ({ figures }));
    return { deliver, caches, credentials, summary, logger };
  }

  it('keeps no answer read before analytics applied a device change, however late analytics applies it', async () => {
    const { deliver, credentials, summary } = gateway();
    expect(await summary('before')).toEqual({ figures: 'before' });
    // The gateway hears the device event before analytics has written it to ClickHouse: an answer read
    // now still has the old figures (a second later, or ten: analytics may be slow).
    deliver('test.events.device.disabled', newEnvelope('device.disabled', disabled));
    expect(credentials.deviceChanged).toHaveBeenCalledWith('d-1');
    await summary('still before');
    // Analytics has applied it: the next answer is read again, and kept.
    deliver('test.signals.device-states-applied', { org_id: 'acme' });
    expect(await summary('after')).toEqual({ figures: 'after' });
    expect(await summary('unused')).toEqual({ figures: 'after' });
    // Other organizations' answers are not concerned.
    deliver('test.signals.device-states-applied', { org_id: 'other' });
    expect(await summary('unused')).toEqual({ figures: 'after' });
  });

  it('does not keep an answer whose read was in flight when analytics applied the change', async () => {
    const { deliver, caches } = gateway();
    const stale = deferred<{ figures: string }>();
    const inFlight = caches.analyticsAnswer('acme', '24h', () => stale.promise);
    deliver('test.signals.device-states-applied', { org_id: 'acme' });
    stale.resolve({ figures: 'stale' });
    expect(await inFlight).toEqual({ figures: 'stale' });
    expect(await caches.analyticsAnswer('acme', '24h', async () => ({ figures: 'fresh' }))).toEqual({
      figures: 'fresh',
    });
  });

  it('ignores a malformed signal, with a warning', async () => {
    const { deliver, summary, logger } = gateway();
    await summary('before');
    deliver('test.signals.device-states-applied', { org: 'acme' });
    deliver('test.signals.device-states-applied', 'acme');
    expect(await summary('unused')).toEqual({ figures: 'before' });
    expect(logger.warn).toHaveBeenCalledTimes(2);
  });
});
