import { newEnvelope } from '@sts/events/event-envelope';
import { eventSubject } from '@sts/events/subjects';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { eventually } from '@sts/testing/eventually';
import { uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { GatewayCaches } from './gateway-caches';
import { subscribeToCacheEvictions } from './cache-invalidation';

describe('membership invalidation over a real NATS server', () => {
  const logger = createLogger('membership-int', 'silent');
  const namespace = uniqueNatsNamespace();
  let nats: JetStreamConnection;

  beforeAll(async () => {
    nats = await connectJetStream({
      url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      name: 'membership-int',
      logger,
    });
  });

  afterAll(async () => {
    await nats.close();
  });

  it('goes on evicting after a message that is not JSON, or not an event', async () => {
    const caches = new GatewayCaches({
      CALLER_CACHE_TTL_MS: 0,
      LICENSE_CACHE_TTL_MS: 0,
      MEMBER_LIST_CACHE_TTL_MS: 0,
      ANALYTICS_CACHE_TTL_MS: 0,
    });
    const evicted: string[] = [];
    caches.membershipChanged = (orgId, userId) => void evicted.push(`${orgId}/${userId}`);
    const subscriptions = subscribeToCacheEvictions(nats.nc, namespace, caches, logger);
    const subject = eventSubject(namespace, 'member.removed');
    try {
      nats.nc.publish(subject, 'this is not JSON {');
      nats.nc.publish(subject, '"a string"');
      nats.nc.publish(subject, JSON.stringify({ deeply: { nested: [1, 2, 3] } }));
      nats.nc.publish(
        subject,
        JSON.stringify(
          newEnvelope('member.removed', {
            org_id: 'acme',
            member_id: 'm-1',
            user_id: 'ada',
            at: new Date().toISOString(),
          }),
        ),
      );
      await eventually(async () => (evicted.length > 0 ? true : undefined));
      expect(evicted).toEqual(['acme/ada']);
      expect(subscriptions.every((subscription) => !subscription.isClosed())).toBe(true);
    } finally {
      for (const subscription of subscriptions) subscription.unsubscribe();
    }
  });
});
