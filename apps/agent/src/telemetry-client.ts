import { assertTransportAllowed, describeFetchError, parseProblem, parseRetryAfter } from './enroll-client';
import type { ReportedEvent } from './telemetry-spool';

export const TELEMETRY_PATH = '/api/device/telemetry';

/** What became of one batch, and what to do next. */
export type SendOutcome =
  | { kind: 'accepted'; duplicate: boolean }
  /** The server refuses this batch for good (400, other 4xx): set it aside, go on. */
  | { kind: 'rejected'; message: string }
  /** The batch is too large for the server (413): split it, or set a single event aside. */
  | { kind: 'too_large'; message: string }
  /** The device may not report (401 unknown token, 403 disabled): stop, keep the spool. */
  | { kind: 'refused'; status: number; message: string }
  /**
   * Try again later (network, 429, 5xx), after `retryAfterSeconds` when the server said. `status` is the
   * server's answer (none: no answer), so that a 5xx, which may be this batch's own doing, can be told apart.
   */
  | { kind: 'retry'; message: string; status?: number; retryAfterSeconds?: number };

/** Sends one batch. Throws InsecureServerError, before sending, for plain http to another machine without opt-in. */
export async function sendBatch(options: {
  server: URL;
  /** The user opted in to plain http to another machine (remembered in the config at enrollment). */
  allowInsecureHttp: boolean;
  deviceToken: string;
  batch: { batch_id: string; events: ReportedEvent[] };
  fetch: typeof fetch;
  timeoutMs: number;
  now: Date;
}): Promise<SendOutcome> {
  assertTransportAllowed(options.server, options.allowInsecureHttp);
  const url = new URL(TELEMETRY_PATH, options.server).toString();
  let response: Response;
  let text: string;
  try {
    response = await options.fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, application/problem+json',
        'x-device-token': options.deviceToken,
      },
      body: JSON.stringify(options.batch),
      // A redirect would carry the device token elsewhere.
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    text = await response.text();
  } catch (error) {
    return { kind: 'retry', message: describeFetchError(error, options.server, options.timeoutMs).message };
  }
  const { status } = response;
  if (status === 202) {
    const duplicate = (() => {
      try {
        return (JSON.parse(text) as { duplicate?: unknown }).duplicate === true;
      } catch {
        return false;
      }
    })();
    return { kind: 'accepted', duplicate };
  }
  const problem = parseProblem({ headers: response.headers, body: text });
  const detail = problem.detail ?? problem.title ?? `HTTP ${status}`;
  if (status === 401 || status === 403) return { kind: 'refused', status, message: detail };
  if (status === 413) return { kind: 'too_large', message: `HTTP ${status}: ${detail}` };
  if (status === 429 || status >= 500) {
    const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'), options.now);
    return {
      kind: 'retry',
      message: `the server answered ${status} (${detail})`,
      status,
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    };
  }
  return { kind: 'rejected', message: `HTTP ${status}: ${detail}` };
}
