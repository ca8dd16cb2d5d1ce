import { setTimeout as sleep } from 'node:timers/promises';
import { JetStreamApiError } from '@nats-io/jetstream';
import { NoRespondersError, TimeoutError } from '@nats-io/nats-core';
import type { Logger } from '@sts/logger/create-logger';

/** JetStream API error code of "JetStream system temporarily unavailable" (no meta or stream leader yet). */
const JETSTREAM_TEMPORARILY_UNAVAILABLE = 10008;

/**
 * Whether a JetStream API request failed because the cluster has no leader to answer it yet: a restarted
 * cluster elects its meta leader, then each stream's and consumer's, and until then the API times out,
 * answers 503, or has no responder for a stream. A refusal (a wrong configuration, a missing permission) is not.
 */
export function isJetStreamElecting(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof TimeoutError || cause instanceof NoRespondersError) return true;
    if (
      cause instanceof JetStreamApiError &&
      (cause.code === JETSTREAM_TEMPORARILY_UNAVAILABLE || cause.status === 503)
    )
      return true;
  }
  return false;
}

export interface JetStreamWait {
  logger: Logger;
  /** How long to wait in all before giving up with an error that names what was waited for. */
  timeoutMs: number;
  /** Milliseconds between attempts at most (default 2 s). */
  maxDelayMs?: number;
}

/**
 * Runs `action` (an idempotent JetStream API call) until the cluster answers it, for at most `timeoutMs`: a
 * restarted cluster is waited for, not given up on, and the wait says in the log what it waits for. Errors
 * that are not about leaders fail at once.
 */
export async function untilJetStreamAnswers<T>(
  what: string,
  action: () => Promise<T>,
  { logger, timeoutMs, maxDelayMs = 2_000 }: JetStreamWait,
): Promise<T> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await action();
      if (attempt > 1) logger.info({ waitedMs: Date.now() - started }, `JetStream answers: ${what}`);
      return result;
    } catch (error) {
      if (!isJetStreamElecting(error)) throw error;
      const waited = Date.now() - started;
      if (waited >= timeoutMs)
        throw new Error(
          `JetStream did not answer within ${timeoutMs / 1000} s: ${what} (a NATS cluster needs a majority of its servers up to elect its leaders)`,
          { cause: error },
        );
      if (attempt === 1 || attempt % 10 === 0)
        logger.warn(
          { err: error, attempt, waitedMs: waited, timeoutMs },
          `waiting for JetStream: ${what} (a restarted cluster elects its leaders first)`,
        );
      await sleep(Math.min(250 * attempt, maxDelayMs, Math.max(0, timeoutMs - waited)));
    }
  }
}
