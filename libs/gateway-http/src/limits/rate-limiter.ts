import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '@sts/errors/app-error';
import { clientAddressKey } from './client-address';
import type { WindowCounter } from './window-counter';

/**
 * One limit: at most `max` per key (an address, a device, an organization) in fixed windows of
 * `windowMs` (whole clock minutes by default), counted in `scope` (a WindowCounter scope: letters,
 * digits, `-` and `_`; its name is part of the shared keys, so it stays the same across releases).
 */
export interface Limit {
  scope: string;
  max: number;
  windowMs?: number;
}

/** What a limit says of one key in the current window. */
export interface LimitVerdict {
  /** Over the limit: the request must wait (`RateLimitExceeded`). */
  over: boolean;
  /** The key's count in the window as far as this process knows (after this call's charge, if any). */
  count: number;
  /** Milliseconds until the window ends. */
  resetInMs: number;
}

const MINUTE_MS = 60_000;

/**
 * 429 RATE_LIMITED, with `Retry-After` until the window ends (the problem handler writes the header):
 * the one answer of every limit of the gateway (docs/decisions.md, "Rate limits hold across gateway
 * replicas").
 */
export class RateLimitExceeded extends AppError {
  readonly retryAfterSeconds: number;

  constructor(resetInMs: number, detail: string | ((seconds: number) => string)) {
    const seconds = retryAfterSeconds(resetInMs);
    super('RATE_LIMITED', typeof detail === 'string' ? detail : detail(seconds));
    this.retryAfterSeconds = seconds;
  }
}

/** Whole seconds until a window ends, at least 1. */
export function retryAfterSeconds(resetInMs: number): number {
  return Math.max(1, Math.ceil(resetInMs / 1000));
}

/**
 * Every rate limit of the gateway goes through this: requests per address on unauthenticated routes,
 * enrollment and device-authentication failures, telemetry batches per device and bytes per
 * organization. The counts are in a WindowCounter: shared by the replicas in NATS KV (each replica
 * counts alone, from the last shared count it saw, while the bucket does not answer), this process's
 * own in unit tests. Counters keep only hashes of the keys (they hold addresses and enrollment keys).
 *
 * - `charge` counts a request (or bytes) and says whether that went over: requests are counted before
 *   they are checked, so requests in flight together cannot all pass.
 * - `check` and `record` serve limits on failures, known only once a request has been answered:
 *   `check` before the work (has the key reached its limit?), `record` after a failure. Successes never
 *   count, so a roll-out of thousands of devices is not slowed by them.
 */
export class RateLimiter {
  constructor(private readonly counter: WindowCounter) {}

  /** Counts `amount` (1: a request) against the key; over once the count exceeds `max`. */
  async charge(limit: Limit, key: string, amount = 1): Promise<LimitVerdict> {
    // Past max + 1 the answer no longer changes: a shared counter need not be asked.
    const { count, resetInMs } = await this.counter.increment(
      limit.scope,
      key,
      windowOf(limit),
      limit.max + 1,
      amount,
    );
    return { over: count > limit.max, count, resetInMs };
  }

  /** Whether the key has reached `max` in this window, without counting. */
  async check(limit: Limit, key: string): Promise<LimitVerdict> {
    const { count, resetInMs } = await this.counter.read(limit.scope, key, windowOf(limit), limit.max);
    return { over: count >= limit.max, count, resetInMs };
  }

  /** Counts one failure against the key (`check` says when it has had enough). */
  async record(limit: Limit, key: string): Promise<void> {
    await this.counter.increment(limit.scope, key, windowOf(limit), limit.max);
  }

  /**
   * A route's `onRequest` hook: `limit.max` requests per client address (an IPv6 client by its /64) per
   * window, counted before the body is read; then 429 until the window ends.
   */
  perAddress(limit: Limit): onRequestAsyncHookHandler {
    return async (request: FastifyRequest) => {
      const verdict = await this.charge(limit, clientAddressKey(request.ip));
      if (verdict.over) {
        throw new RateLimitExceeded(
          verdict.resetInMs,
          (seconds) => `Too many requests; retry in ${seconds} s`,
        );
      }
    };
  }
}

function windowOf(limit: Limit): number {
  return limit.windowMs ?? MINUTE_MS;
}
