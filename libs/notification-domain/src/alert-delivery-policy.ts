import { Webhook } from 'standardwebhooks';

/**
 * When to try again after a failed attempt, by attempts made so far: the Standard Webhooks schedule
 * (immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), about 28 hours in all. After the last,
 * the delivery is given up.
 */
export const RETRY_DELAYS_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const;

export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** A Retry-After longer than this is not honoured in full (a receiver cannot park an alert for days). */
const MAX_RETRY_AFTER_MS = 10 * 3_600_000;

/**
 * Why an attempt got no answer, as a class only: the sender's own messages never reach the delivery log
 * (shown to the organization). `not-allowed` is both a name that does not resolve and one that resolves
 * only to addresses a delivery may not reach, so that the log tells no one which internal names exist.
 */
export type NoAnswerReason = 'not-allowed' | 'network' | 'tls' | 'timeout';

/** What one attempt came to. */
export type AttemptResult =
  | { kind: 'answered'; status: number; durationMs: number; retryAfter: string | null }
  | { kind: 'no-answer'; reason: NoAnswerReason; durationMs: number };

/** The recorded error of an attempt without an answer. */
export const NO_ANSWER_ERRORS: Record<NoAnswerReason, string> = {
  'not-allowed': 'address not allowed (the name does not resolve, or only to private or reserved addresses)',
  network: 'connection failed',
  tls: 'TLS handshake failed (certificate not trusted or not valid for the host)',
  timeout: 'timeout (no answer in time)',
};

export type AttemptVerdict =
  | { outcome: 'delivered' }
  | { outcome: 'retry'; error: string; retryAfterMs: number | null }
  | { outcome: 'stop'; error: string };

/**
 * 2xx delivers. Timeouts, connection and TLS errors, addresses not allowed (the DNS answer may change), 408, 429,
 * 5xx and redirects (never followed) are tried again; any other 4xx stops: the receiver said the
 * message is unwelcome, and asking again would not change its mind.
 */
export function judgeAttempt(result: AttemptResult, now: Date): AttemptVerdict {
  if (result.kind === 'no-answer')
    return { outcome: 'retry', error: NO_ANSWER_ERRORS[result.reason], retryAfterMs: null };
  const { status } = result;
  if (status >= 200 && status < 300) return { outcome: 'delivered' };
  if (status >= 300 && status < 400)
    return { outcome: 'retry', error: `redirect (${status}) not followed`, retryAfterMs: null };
  if (status === 408 || status === 429 || status >= 500)
    return { outcome: 'retry', error: `HTTP ${status}`, retryAfterMs: retryAfterMs(result.retryAfter, now) };
  return { outcome: 'stop', error: `HTTP ${status}: the receiver refused the message` };
}

/** `Retry-After` as seconds or an HTTP date, in ms from now; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now: Date): number | null {
  if (!header) return null;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Math.min(Number(trimmed) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return null;
  return Math.min(Math.max(at - now.getTime(), 0), MAX_RETRY_AFTER_MS);
}

/**
 * The next attempt after `attemptsMade` failed ones, or null when the delivery is given up: the
 * schedule's delay with ±20% jitter (so that a receiver coming back is not hit by every message at
 * once), or the receiver's Retry-After when that is longer.
 */
export function nextAttemptAt(
  attemptsMade: number,
  verdict: Extract<AttemptVerdict, { outcome: 'retry' }>,
  now: Date,
  random: () => number = Math.random,
): Date | null {
  const delay = RETRY_DELAYS_MS[attemptsMade - 1];
  if (delay === undefined) return null;
  const jittered = Math.round(delay * (0.8 + random() * 0.4));
  return new Date(now.getTime() + Math.max(jittered, verdict.retryAfterMs ?? 0));
}

/**
 * The Standard Webhooks headers of one attempt: `webhook-id` (the same on every attempt of a message),
 * `webhook-timestamp` (now, in seconds) and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of
 * `id.timestamp.body`), signed by the specification's reference library. During a secret rotation
 * `secrets` holds the new secret and the previous one: both signatures are sent, space-separated.
 */
export function signedHeaders(
  messageId: string,
  body: string,
  secrets: readonly string[],
  now: Date,
): Record<string, string> {
  const timestamp = new Date(Math.floor(now.getTime() / 1000) * 1000);
  return {
    'content-type': 'application/json',
    'webhook-id': messageId,
    'webhook-timestamp': String(timestamp.getTime() / 1000),
    'webhook-signature': secrets
      .map((secret) => new Webhook(secret).sign(messageId, timestamp, body))
      .join(' '),
  };
}
