import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import {
  MAX_ATTEMPTS,
  NO_ANSWER_ERRORS,
  RETRY_DELAYS_MS,
  judgeAttempt,
  nextAttemptAt,
  retryAfterMs,
  signedHeaders,
  type AttemptResult,
} from './alert-delivery-policy';

const now = new Date('2026-11-25T12:00:00Z');
const answered = (status: number, retryAfter: string | null = null): AttemptResult => ({
  kind: 'answered',
  status,
  durationMs: 12,
  retryAfter,
});

describe('alert delivery policy', () => {
  it('delivers on 2xx, retries timeouts, connection and TLS errors, addresses not allowed, 408, 429, 5xx and redirects, stops on other 4xx', () => {
    expect(judgeAttempt(answered(200), now)).toEqual({ outcome: 'delivered' });
    expect(judgeAttempt(answered(204), now)).toEqual({ outcome: 'delivered' });
    for (const status of [408, 429, 500, 502, 503, 301, 302, 307]) {
      expect(judgeAttempt(answered(status), now).outcome).toBe('retry');
    }
    for (const reason of ['timeout', 'network', 'tls', 'not-allowed'] as const) {
      expect(judgeAttempt({ kind: 'no-answer', reason, durationMs: 1 }, now)).toEqual({
        outcome: 'retry',
        error: NO_ANSWER_ERRORS[reason],
        retryAfterMs: null,
      });
    }
    for (const status of [400, 401, 403, 404, 410, 413, 422]) {
      expect(judgeAttempt(answered(status), now)).toMatchObject({ outcome: 'stop' });
    }
  });

  it('reads Retry-After as seconds or a date, capped at 10 hours', () => {
    expect(retryAfterMs('120', now)).toBe(120_000);
    expect(retryAfterMs('Wed, 25 Nov 2026 12:05:00 GMT', now)).toBe(300_000);
    expect(retryAfterMs('999999', now)).toBe(10 * 3_600_000);
    expect(retryAfterMs('soon', now)).toBeNull();
    expect(retryAfterMs(null, now)).toBeNull();
    expect(judgeAttempt(answered(503, '60'), now)).toEqual({
      outcome: 'retry',
      error: 'HTTP 503',
      retryAfterMs: 60_000,
    });
  });

  it('follows the schedule with ±20% jitter for about a day, honours a longer Retry-After, then gives up', () => {
    const retry = { outcome: 'retry' as const, error: 'HTTP 500', retryAfterMs: null };
    expect(nextAttemptAt(1, retry, now, () => 0.5)).toEqual(new Date(now.getTime() + 5_000));
    expect(nextAttemptAt(1, retry, now, () => 0)).toEqual(new Date(now.getTime() + 4_000));
    expect(nextAttemptAt(1, retry, now, () => 1)).toEqual(new Date(now.getTime() + 6_000));
    expect(nextAttemptAt(2, retry, now, () => 0.5)).toEqual(new Date(now.getTime() + 5 * 60_000));
    expect(nextAttemptAt(1, { ...retry, retryAfterMs: 600_000 }, now, () => 0.5)).toEqual(
      new Date(now.getTime() + 600_000),
    );
    expect(nextAttemptAt(MAX_ATTEMPTS - 1, retry, now, () => 0.5)).not.toBeNull();
    expect(nextAttemptAt(MAX_ATTEMPTS, retry, now, () => 0.5)).toBeNull();
    const total = RETRY_DELAYS_MS.reduce((sum, delay) => sum + delay, 0);
    expect(total / 3_600_000).toBeGreaterThan(24);
    expect(total / 3_600_000).toBeLessThan(30);
  });

  it('never lets a short Retry-After (1 s, or 0) cut the schedule short', () => {
    const retry = { outcome: 'retry' as const, error: 'HTTP 429' };
    for (const retryAfterMs of [1_000, 0]) {
      expect(nextAttemptAt(2, { ...retry, retryAfterMs }, now, () => 0.5)).toEqual(
        new Date(now.getTime() + 5 * 60_000),
      );
      // The earliest the jitter allows: still 4 minutes, not the receiver's second.
      expect(nextAttemptAt(2, { ...retry, retryAfterMs }, now, () => 0)).toEqual(
        new Date(now.getTime() + 4 * 60_000),
      );
    }
  });

  it('signs as Standard Webhooks says, with both secrets during a rotation', () => {
    const current = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    const previous = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
    const body = '{"id":"e1","type":"alert.test","created_at":"2026-11-25T12:00:00.000Z","data":{}}';
    const headers = signedHeaders('msg_1', body, [current, previous], new Date());
    expect(headers['webhook-id']).toBe('msg_1');
    expect(headers['webhook-timestamp']).toMatch(/^\d+$/);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+ v1,[A-Za-z0-9+/=]+$/);
    for (const secret of [current, previous]) {
      expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    }
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 3).toString('base64')}`).verify(body, headers),
    ).toThrow();
  });

  it('draws the 2xx and 3xx boundaries exactly: 199 stops, 299 delivers, 300 and 399 are redirects, 400 stops', () => {
    expect(judgeAttempt(answered(199), now)).toEqual({
      outcome: 'stop',
      error: 'HTTP 199: the receiver refused the message',
    });
    expect(judgeAttempt(answered(299), now)).toEqual({ outcome: 'delivered' });
    for (const status of [300, 399]) {
      expect(judgeAttempt(answered(status), now)).toEqual({
        outcome: 'retry',
        error: `redirect (${status}) not followed`,
        retryAfterMs: null,
      });
    }
    expect(judgeAttempt(answered(400), now)).toEqual({
      outcome: 'stop',
      error: 'HTTP 400: the receiver refused the message',
    });
  });

  it('records a readable error for each kind of attempt without an answer (shown in the delivery log)', () => {
    expect(NO_ANSWER_ERRORS).toEqual({
      'not-allowed':
        'address not allowed (the name does not resolve, or only to private or reserved addresses)',
      network: 'connection failed',
      tls: 'TLS handshake failed (certificate not trusted or not valid for the host)',
      timeout: 'timeout (no answer in time)',
    });
    expect(judgeAttempt({ kind: 'no-answer', reason: 'timeout', durationMs: 1 }, now)).toEqual({
      outcome: 'retry',
      error: 'timeout (no answer in time)',
      retryAfterMs: null,
    });
  });

  it('reads Retry-After seconds around whitespace, dates ending or starting in digits, and ignores seconds followed by text', () => {
    expect(retryAfterMs(' 120 ', now)).toBe(120_000);
    expect(retryAfterMs('0', now)).toBe(0);
    // An HTTP date with a numeric zone ends in digits; an ISO date starts with them: both are dates.
    expect(retryAfterMs('Wed, 25 Nov 2026 12:05:00 +0000', now)).toBe(300_000);
    expect(retryAfterMs('2026-11-25T12:05:00Z', now)).toBe(300_000);
    expect(retryAfterMs('120 seconds', now)).toBeNull();
    expect(retryAfterMs('', now)).toBeNull();
    // A date in the past means "now", not a negative delay.
    expect(retryAfterMs('Wed, 25 Nov 2026 11:00:00 GMT', now)).toBe(0);
  });

  it('sends exactly the Standard Webhooks headers: JSON content type, id, seconds timestamp, v1 HMAC-SHA256 signatures', () => {
    const key = Buffer.alloc(32, 7);
    const previousKey = Buffer.alloc(32, 9);
    const body = '{"id":"e1","type":"alert.test"}';
    const at = new Date('2026-11-25T12:00:00.987Z');
    const seconds = Math.floor(at.getTime() / 1000);
    const expected = (secretKey: Buffer) =>
      'v1,' + createHmac('sha256', secretKey).update(`msg_42.${seconds}.${body}`).digest('base64');
    expect(
      signedHeaders(
        'msg_42',
        body,
        [`whsec_${key.toString('base64')}`, `whsec_${previousKey.toString('base64')}`],
        at,
      ),
    ).toEqual({
      'content-type': 'application/json',
      'webhook-id': 'msg_42',
      'webhook-timestamp': String(seconds),
      'webhook-signature': `${expected(key)} ${expected(previousKey)}`,
    });
    expect(seconds).toBe(1_795_608_000);
  });
});
