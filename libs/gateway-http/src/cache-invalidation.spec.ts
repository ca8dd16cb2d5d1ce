import type { Msg, NatsConnection, SubscriptionOptions } from '@nats-io/nats-core';
import { newEnvelope } from '@sts/events/event-envelope';
import type { Logger } from '@sts/logger/create-logger';
import { GatewayCaches } from './gateway-caches';
import { subscribeToCacheEvictions } from './cache-invalidation';

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
