import { signStripePayload, type StripeEvent } from './stripe-stand-in';

/** The part of a pino logger the stand-ins log through (a test may pass its own). */
export interface StandInLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface StripeWebhookSenderOptions {
  /** The endpoint Stripe would call, e.g. `http://localhost:8080/api/billing/webhook`. */
  url: string;
  /** The endpoint's signing secret (`whsec_…`). */
  secret: string;
  /** Attempts per event in all (default 4). */
  attempts?: number;
  /** Waits before the second, third, … attempt; the last repeats (default 250 ms, 1 s, 3 s). */
  retryDelaysMs?: readonly number[];
  /** How long one attempt may take (default 20 s: the gateway gives a webhook up to 15 s). */
  attemptTimeoutMs?: number;
  log?: StandInLog;
}

export interface StripeWebhookDelivery {
  delivered: boolean;
  attempts: number;
  /** Status of the last answer; null when the last attempt got none. */
  status: number | null;
  /** Why the last attempt failed, when it did. */
  error?: string;
}

export interface StripeWebhookSender {
  url: string;
  /** Signs and POSTs the event as Stripe does, retrying non-2xx answers and network errors. */
  send(event: StripeEvent): Promise<StripeWebhookDelivery>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Delivers webhook events the way Stripe does: POST with a JSON body, `Content-Type: application/json;
 * charset=utf-8` and a `Stripe-Signature` header over that exact body, signed anew (fresh timestamp) on each
 * attempt; any 2xx answer is a delivery. Stripe retries for days; this tries a few times within seconds.
 */
export function createStripeWebhookSender(options: StripeWebhookSenderOptions): StripeWebhookSender {
  const attempts = Math.max(1, options.attempts ?? 4);
  const delays = options.retryDelaysMs ?? [250, 1_000, 3_000];
  const timeoutMs = options.attemptTimeoutMs ?? 20_000;
  const log = options.log;

  const send = async (event: StripeEvent): Promise<StripeWebhookDelivery> => {
    let status: number | null = null;
    let error = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) await sleep(delays[Math.min(attempt - 2, delays.length - 1)] ?? 0);
      const { payload, signature } = signStripePayload(event, options.secret);
      try {
        const response = await fetch(options.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json; charset=utf-8',
            'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
            'stripe-signature': signature,
          },
          body: payload,
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutMs),
        });
        status = response.status;
        const answer = await response.text().catch(() => '');
        if (response.ok) {
          log?.info({ event: event.id, type: event.type, status, attempt }, 'webhook delivered');
          return { delivered: true, attempts: attempt, status };
        }
        error = `answered ${status}${answer ? `: ${answer.slice(0, 200)}` : ''}`;
      } catch (caught) {
        status = null;
        const cause =
          caught instanceof Error && caught.cause instanceof Error ? ` (${caught.cause.message})` : '';
        error = caught instanceof Error ? `${caught.name}: ${caught.message}${cause}` : String(caught);
      }
      log?.warn(
        { event: event.id, type: event.type, url: options.url, attempt, of: attempts, status, error },
        'webhook attempt failed',
      );
    }
    log?.error(
      { event: event.id, type: event.type, url: options.url, attempts, status, error },
      'webhook not delivered',
    );
    return { delivered: false, attempts, status, error };
  };

  return { url: options.url, send };
}
