import { register } from 'prom-client';
import { outboxBacklog } from './metrics';

describe('gauges read at scrape time', () => {
  it('reports each source once per scrape, and nothing for a source that fails or is removed', async () => {
    let reads = 0;
    const removeHealthy = outboxBacklog.add('identity', async () => {
      reads++;
      return { events: 3, oldestAgeSeconds: 1.5, parked: 0 };
    });
    const removeBroken = outboxBacklog.add('billing', () => Promise.reject(new Error('connection refused')));
    try {
      const text = await register.metrics();
      expect(text).toMatch(/^sts_outbox_backlog_events\{schema="identity"\} 3$/m);
      expect(text).toMatch(/^sts_outbox_oldest_unpublished_age_seconds\{schema="identity"\} 1\.5$/m);
      expect(text).not.toMatch(/schema="billing"/);
      // Three gauges, one read of the source.
      expect(reads).toBe(1);

      removeHealthy();
      const after = await register.metrics();
      expect(after).not.toMatch(/schema="identity"/);
    } finally {
      removeHealthy();
      removeBroken();
    }
  });
});
