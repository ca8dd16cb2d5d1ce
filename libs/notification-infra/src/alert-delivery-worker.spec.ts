import { randomBytes } from 'node:crypto';
import { sealSecret } from '@sts/crypto/secrets';
import { createLogger } from '@sts/logger/create-logger';
import { eventually } from '@sts/testing/eventually';
import type { AttemptResult } from '@sts/notification-domain/alert-delivery-policy';
import { alertSecretContext } from '@sts/notification-domain/alert-model';
import type { AlertDeliveryQueue, ClaimedDelivery } from '@sts/notification-domain/notification-ports';
import { startAlertDeliveryWorker } from './alert-delivery-worker';

const ORG_ID = '0b6a8a55-7c55-4b8e-9d0e-5f2f3c1a1a01';
/** Where the receiver's credential sits in a webhook URL: its path and its query. */
const SECRET = 'Zq9vS3cr3tT0k3nValue1234';
const URL_WITH_SECRET = `https://hooks.example.com/services/T0ACME/${SECRET}?token=${SECRET}`;

/**
 * The delivery worker's log lines name a delivery by its ids, never by its endpoint's URL: the path and
 * query of a webhook URL are often the receiver's credential, and logs are read by more people than
 * the organization's admins.
 */
describe('alert delivery worker: its log lines', () => {
  it('never hold the endpoint URL, whatever the attempt came to', async () => {
    const sealingKey = randomBytes(32);
    const at = new Date('2026-03-01T12:00:00.000Z');
    const answers: Record<string, AttemptResult> = {
      delivered: { kind: 'answered', status: 200, durationMs: 5, retryAfter: null },
      retried: { kind: 'answered', status: 503, durationMs: 5, retryAfter: null },
      refused: { kind: 'answered', status: 410, durationMs: 5, retryAfter: null },
      unreachable: { kind: 'no-answer', reason: 'network', durationMs: 5 },
      late: { kind: 'answered', status: 200, durationMs: 5, retryAfter: null },
    };
    const claims: ClaimedDelivery[] = Object.keys(answers).map((id, index) => {
      const endpoint = { id: `endpoint-${index}`, orgId: ORG_ID };
      return {
        leaseToken: `lease-${id}`,
        delivery: {
          id,
          orgId: ORG_ID,
          endpointId: endpoint.id,
          eventType: 'alert.test',
          body: '{}',
          status: 'pending',
          attempts: 0,
          nextAttemptAt: at,
          createdAt: at,
          lastAttemptAt: null,
          lastResponseCode: null,
          lastError: null,
          lastDurationMs: null,
        },
        endpoint: {
          ...endpoint,
          url: URL_WITH_SECRET,
          secretSealed: sealSecret('whsec_c2VjcmV0', sealingKey, alertSecretContext(endpoint)),
          previousSecretSealed: null,
          previousSecretExpiresAt: null,
        },
      };
    });
    let pending = [...claims];
    const recorded: string[] = [];
    const queue: AlertDeliveryQueue = {
      claimDue: async () => {
        const due = pending;
        pending = [];
        return due;
      },
      recordAttempt: async (claimed) => {
        recorded.push(claimed.delivery.id);
        // "late": its lease ran out and another claim holds it; "unreachable" has failed for days.
        return {
          recorded: claimed.delivery.id !== 'late',
          failingSince:
            claimed.delivery.id === 'unreachable' ? new Date(at.getTime() - 10 * 86_400_000) : null,
        };
      },
      disableEndpoint: async () => true,
    };
    const lines: string[] = [];
    const worker = startAlertDeliveryWorker({
      queue,
      sender: { send: async ({ headers }) => answers[headers['webhook-id']!]! },
      sealingKey,
      clock: { now: () => at },
      logger: createLogger('notification', 'debug', { write: (line: string) => void lines.push(line) }),
      concurrency: 8,
      leaseMs: 30_000,
      disableAfterMs: 5 * 86_400_000,
      pollMs: 60_000,
    });
    await eventually(() => recorded.length === claims.length);
    await worker.stop();

    expect(recorded.sort()).toEqual(Object.keys(answers).sort());
    const messages = lines.map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages).toEqual(
      expect.arrayContaining([
        'alert delivered',
        'alert attempt failed; will retry',
        'alert delivery given up',
        'alert endpoint disabled: its deliveries failed for too long',
        'alert attempt not recorded: its lease ran out and another claim holds the delivery',
      ]),
    );
    for (const line of lines) {
      expect(line).not.toContain(SECRET);
      expect(line).not.toContain('hooks.example.com/services');
    }
  });
});
