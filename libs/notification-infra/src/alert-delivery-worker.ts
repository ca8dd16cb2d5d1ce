import type { Logger } from '@sts/logger/create-logger';
import { attemptDelivery } from '@sts/notification-domain/alert-service';
import type {
  AlertDeliveryQueue,
  AlertSender,
  ClaimedDelivery,
  Clock,
} from '@sts/notification-domain/notification-ports';

export interface AlertDeliveryWorkerOptions {
  queue: AlertDeliveryQueue;
  sender: AlertSender;
  sealingKey: Buffer;
  clock: Clock;
  logger: Logger;
  /** Attempts in flight at most (each bounded by the sender's timeout). */
  concurrency: number;
  /** A claimed delivery is someone else's again after this (a worker that died mid-attempt). */
  leaseMs: number;
  /** An endpoint failing this long is disabled. */
  disableAfterMs: number;
  /** How often due deliveries are looked for when nothing wakes the worker. */
  pollMs?: number;
}

export interface AlertDeliveryWorker {
  /** Looks for due deliveries now (called after a commit that scheduled some). */
  wake(): void;
  /** Stops claiming and waits for the attempts in flight. */
  stop(): Promise<void>;
}

/**
 * Keeps up to `concurrency` attempts in flight, claiming due deliveries from the durable schedule as
 * slots free up: a slow receiver holds its own slots (at most four per endpoint, see the queue), never
 * a whole pass. Several processes run workers side by side; the queue's leases keep them apart.
 */
export function startAlertDeliveryWorker(options: AlertDeliveryWorkerOptions): AlertDeliveryWorker {
  const { queue, sender, sealingKey, clock, logger, concurrency, leaseMs } = options;
  const log = logger.child({ component: 'alert-deliveries' });
  /** Deliveries with an attempt running here: one whose lease ran out and comes back is not started twice. */
  const inFlight = new Set<string>();
  let stopped = false;
  let filling = false;
  let fillAgain = false;
  let settled = Promise.resolve();
  let markIdle: (() => void) | undefined;

  async function attempt(claimed: ClaimedDelivery): Promise<void> {
    const { delivery, endpoint } = claimed;
    const fields = {
      delivery_id: delivery.id,
      endpoint_id: endpoint.id,
      org_id: endpoint.orgId,
      event_type: delivery.eventType,
      attempt: delivery.attempts + 1,
    };
    try {
      const record = await attemptDelivery(claimed, sender, queue, sealingKey, clock, options.disableAfterMs);
      if (!record.recorded) {
        log.warn(
          fields,
          'alert attempt not recorded: its lease ran out and another claim holds the delivery',
        );
        return;
      }
      if (record.endpointDisabled)
        log.warn(fields, 'alert endpoint disabled: its deliveries failed for too long');
      const line = {
        ...fields,
        status: record.status,
        response_code: record.responseCode,
        duration_ms: Math.round(record.durationMs),
        error: record.error,
        next_attempt_at: record.nextAttemptAt?.toISOString(),
      };
      if (record.status === 'failed') log.warn(line, 'alert delivery given up');
      else
        log.info(
          line,
          record.status === 'delivered' ? 'alert delivered' : 'alert attempt failed; will retry',
        );
    } catch (error) {
      // The lease runs out and the delivery is claimed again.
      log.error({ ...fields, err: error }, 'alert attempt could not be made or recorded');
    }
  }

  async function fill(): Promise<void> {
    if (stopped) return;
    if (filling) {
      fillAgain = true;
      return;
    }
    filling = true;
    try {
      do {
        fillAgain = false;
        while (!stopped && inFlight.size < concurrency) {
          const claimed = await queue.claimDue(concurrency - inFlight.size, leaseMs);
          // Stopped meanwhile: the claims' leases run out and another process takes them.
          if (claimed.length === 0 || stopped) break;
          for (const item of claimed) {
            if (inFlight.has(item.delivery.id)) continue;
            if (inFlight.size === 0) settled = new Promise<void>((resolve) => (markIdle = resolve));
            inFlight.add(item.delivery.id);
            void attempt(item).finally(() => {
              inFlight.delete(item.delivery.id);
              if (inFlight.size === 0) markIdle?.();
              void fill();
            });
          }
        }
      } while (fillAgain && !stopped);
    } catch (error) {
      log.warn({ err: error }, 'claiming alert deliveries failed; will retry');
    } finally {
      filling = false;
    }
  }

  const poll = setInterval(() => void fill(), options.pollMs ?? 1_000);
  poll.unref();
  void fill();

  return {
    wake: () => void fill(),
    stop: async () => {
      stopped = true;
      clearInterval(poll);
      await settled;
    },
  };
}
