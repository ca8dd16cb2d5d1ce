/**
 * POST /api/device/enroll over the global fetch, and the translation of every answer (problem+json
 * bodies, statuses, network failures) into an EnrollResult the command line can explain.
 * Never puts the enrollment key or the device token into a message.
 */

export const ENROLL_PATH = '/api/device/enroll';
export const DEFAULT_TIMEOUT_MS = 15_000;
/** Answers larger than this are not an enrollment response. */
export const MAX_RESPONSE_BYTES = 1024 * 1024;

export interface EnrollRequestBody {
  code: string;
  machine_id: string;
  hostname: string;
  metadata: Record<string, string>;
}

export interface Enrollment {
  device_id: string;
  org_id: string;
  device_token: string;
  /** Our extension: the machine was already enrolled in this organization (same device id, new token). */
  re_enrolled?: boolean;
}

export type EnrollFailureKind =
  /** 401: enrollment key missing, wrong, rotated away or revoked. */
  | 'key_rejected'
  /** 400 ENROLLMENT_CODE_INVALID / _EXPIRED / _USED (or a bare 400, which the contract reserves for codes). */
  | 'code_rejected'
  /** 409 MACHINE_ENROLLED_ELSEWHERE. */
  | 'machine_enrolled_elsewhere'
  /** 409 MACHINE_ALREADY_ENROLLED: enrolled in this organization, and no proof of being that device. */
  | 'machine_already_enrolled'
  /** 429, with the Retry-After delay when the server sent one. */
  | 'rate_limited'
  /** Any other 4xx: validation errors, 413, 404 (wrong --server)... */
  | 'request_rejected'
  /** 5xx. */
  | 'server_error'
  /** Connection refused, DNS, TLS, connection reset. */
  | 'network'
  /** No complete answer within the timeout. */
  | 'timeout'
  /** A redirect, a 2xx without the expected body, an oversized or non-JSON answer. */
  | 'bad_response';

/** The parts of an RFC 9457 problem body the agent uses. */
export interface Problem {
  code?: string;
  title?: string;
  detail?: string;
  request_id?: string;
  errors?: { path: string; message: string }[];
}

export interface EnrollFailure {
  ok: false;
  kind: EnrollFailureKind;
  /** What happened and what to do, in a few lines for a person at a terminal. */
  message: string;
  status?: number;
  /** The problem's stable `code`, when the server sent one. */
  code?: string;
  /** Seconds to wait, from Retry-After (429). */
  retryAfterSeconds?: number;
}

export type EnrollResult = { ok: true; enrollment: Enrollment } | EnrollFailure;

export interface EnrollOptions {
  /** Base URL of the service (already checked by parseServerUrl). */
  server: URL;
  enrollmentKey: string;
  /**
   * The device token of this machine's current enrollment with this server, when the agent has one:
   * sent as X-Device-Token, it proves a re-enrollment comes from the enrolled device itself.
   */
  deviceToken?: string;
  body: EnrollRequestBody;
  timeoutMs?: number;
  userAgent?: string;
  fetch?: typeof fetch;
  now?: () => Date;
  /** The user opted in to plain http to another machine (--allow-insecure-http). */
  allowInsecureHttp?: boolean;
}

export class ServerUrlError extends Error {
  override readonly name = 'ServerUrlError';
}

/** Checks the --server value: http(s), no credentials, query or fragment. `insecure` for plain http to a non-local host. */
export function parseServerUrl(raw: string): { url: URL; insecure: boolean } {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ServerUrlError(`--server must be a URL such as https://api.example.com (got "${raw}")`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ServerUrlError(
      `--server must start with https:// (or http:// for local testing), not ${url.protocol}//`,
    );
  }
  if (url.username || url.password) {
    throw new ServerUrlError('--server must not contain a user name or password');
  }
  if (url.search || url.hash) {
    throw new ServerUrlError('--server must not contain a query (?...) or fragment (#...)');
  }
  return { url, insecure: isInsecureServer(url) };
}

/**
 * This machine, as a URL's host: `localhost`, 127.0.0.0/8 and ::1 (also as an IPv4-mapped address,
 * which the URL parser writes in hex: ::ffff:7f00:1). Not `*.localhost`: a resolver may ask DNS for it.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  return (
    host === 'localhost' ||
    host === '::1' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) ||
    /^::ffff:(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|7f[0-9a-f]{2}:[0-9a-f]{1,4})$/.test(host)
  );
}

/** Plain http to another machine: the enrollment key and the device token would cross the network unencrypted. */
export function isInsecureServer(server: URL): boolean {
  return server.protocol !== 'https:' && !(server.protocol === 'http:' && isLoopbackHost(server.hostname));
}

/** A server the agent must not send its credentials to (plain http to another machine, no opt-in). */
export class InsecureServerError extends Error {
  override readonly name = 'InsecureServerError';
}

/**
 * Throws InsecureServerError unless credentials may go to `server`: https, plain http to this
 * machine, or plain http elsewhere when the user opted in (`--allow-insecure-http` at enrollment,
 * remembered in the config). Checked before every request that carries the key or the token.
 */
export function assertTransportAllowed(server: URL, allowInsecureHttp: boolean): void {
  if (!isInsecureServer(server)) return;
  if (server.protocol === 'http:' && allowInsecureHttp) return;
  throw new InsecureServerError(
    `${server.origin} is plain http to another machine: the enrollment key and the device token would ` +
      'cross the network unencrypted. Use https://, or opt in with --allow-insecure-http at enrollment.',
  );
}

/** The server's base address without trailing slashes, keeping a path prefix the server may sit under. */
export function serverBaseUrl(server: URL): string {
  return `${server.origin}${server.pathname.replace(/\/+$/, '')}`;
}

/** `${server}/api/device/enroll`, keeping a path prefix the server may sit under. */
export function enrollUrl(server: URL): string {
  return `${serverBaseUrl(server)}${ENROLL_PATH}`;
}

/**
 * Sends the enrollment request; never throws for anything the server or network does. Throws
 * InsecureServerError, before sending anything, for plain http to another machine without opt-in.
 */
export async function enrollDevice(options: EnrollOptions): Promise<EnrollResult> {
  assertTransportAllowed(options.server, options.allowInsecureHttp === true);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const doFetch = options.fetch ?? fetch;
  const url = enrollUrl(options.server);
  const now = options.now ?? (() => new Date());
  try {
    const response = await doFetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, application/problem+json',
        'x-enrollment-key': options.enrollmentKey,
        ...(options.deviceToken ? { 'x-device-token': options.deviceToken } : {}),
        ...(options.userAgent ? { 'user-agent': options.userAgent } : {}),
      },
      body: JSON.stringify(options.body),
      // A redirect would carry X-Enrollment-Key to wherever it points (fetch only strips Authorization).
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await readBody(response, MAX_RESPONSE_BYTES);
    if (text === undefined) {
      return failure(
        'bad_response',
        `The server's answer (HTTP ${response.status}) is larger than ${MAX_RESPONSE_BYTES} bytes; it is not an enrollment response.`,
        { status: response.status },
      );
    }
    return interpretEnrollResponse(
      {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
        body: text,
        url,
      },
      now(),
    );
  } catch (error) {
    return describeFetchError(error, options.server, timeoutMs);
  }
}

async function readBody(response: Response, limit: number): Promise<string | undefined> {
  if (!response.body) return '';
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export interface RawResponse {
  status: number;
  statusText?: string;
  headers: { get(name: string): string | null };
  body: string;
  /** The URL that was requested (for messages and relative redirects). */
  url: string;
}

/** Maps one HTTP answer to an enrollment or to a failure with its message. Pure. */
export function interpretEnrollResponse(response: RawResponse, now: Date): EnrollResult {
  const { status } = response;
  const problem = parseProblem(response);
  const extra = { status, ...(problem.code ? { code: problem.code } : {}) };
  const trailer = requestIdLine(problem);

  if (status >= 200 && status < 300) {
    const enrollment = parseEnrollment(response.body);
    if (enrollment.ok) return enrollment;
    return failure(
      'bad_response',
      `The server answered HTTP ${status} but not with an enrollment (${enrollment.reason}). ` +
        'Check that --server is the service address and that the service is up to date.',
      extra,
    );
  }
  if (status >= 300 && status < 400) {
    const location = response.headers.get('location');
    const target = location ? safeResolve(location, response.url) : undefined;
    return failure(
      'bad_response',
      `The server answered with a redirect (HTTP ${status})${target ? ` to ${target}` : ''}. ` +
        'The agent does not follow redirects, so the enrollment key is not sent elsewhere; ' +
        `pass the final address as --server${target ? ` (probably ${new URL(target).origin})` : ''}.`,
      extra,
    );
  }
  if (status === 401) {
    return failure(
      'key_rejected',
      'The server rejected the enrollment key: it is missing, wrong, or has been rotated or revoked.\n' +
        'Ask your administrator for the current key of your organization.' +
        trailer,
      extra,
    );
  }
  if (status === 400 && (problem.code === undefined || problem.code.startsWith('ENROLLMENT_CODE_'))) {
    return failure(
      'code_rejected',
      `${codeMessage(problem.code)}\nAsk your administrator for a new enrollment code.${trailer}`,
      extra,
    );
  }
  if (status === 409 && problem.code === 'MACHINE_ALREADY_ENROLLED') {
    return failure(
      'machine_already_enrolled',
      'This machine is already enrolled in this organization, and this agent holds no device token that ' +
        'proves it is that device (for example after a reinstall).\n' +
        'Ask an administrator to allow its re-enrollment (POST /api/devices/<device id>/re-enrollment; the ' +
        'device is listed with the machine id shown above), then enroll again with a new code; or to delete ' +
        'the device, which enrolls it anew.' +
        trailer,
      extra,
    );
  }
  if (status === 409 && (problem.code === undefined || problem.code === 'MACHINE_ENROLLED_ELSEWHERE')) {
    return failure(
      'machine_enrolled_elsewhere',
      'This machine is already enrolled in another organization.\n' +
        "Ask that organization's administrator to delete the device, then enroll again; " +
        'or, if this machine was cloned from another, give it its own machine id.' +
        trailer,
      extra,
    );
  }
  if (status === 429) {
    const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'), now);
    const wait =
      retryAfterSeconds === undefined
        ? 'Wait a minute and try again.'
        : `Try again in ${formatDuration(retryAfterSeconds)} (after ${new Date(now.getTime() + retryAfterSeconds * 1000).toISOString()}).`;
    return failure(
      'rate_limited',
      `Too many enrollment attempts; the server is rate limiting them. ${wait}${trailer}`,
      {
        ...extra,
        ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
      },
    );
  }
  if (status >= 400 && status < 500) {
    const hint =
      status === 404 || status === 405
        ? `\nThere is no enrollment endpoint at ${response.url}; check --server (the service's base address).`
        : status === 413
          ? '\nThe request is too large for the server: use a shorter --hostname.'
          : '';
    return failure(
      'request_rejected',
      `The server rejected the enrollment request (${statusLine(response)})${reason(problem)}.${hint}${trailer}`,
      extra,
    );
  }
  if (status >= 500) {
    return failure(
      'server_error',
      `The server failed to handle the enrollment (${statusLine(response)})${reason(problem)}.\n` +
        'Try again later; if it keeps failing, tell your administrator.' +
        trailer,
      extra,
    );
  }
  return failure('bad_response', `Unexpected answer from the server: ${statusLine(response)}.`, extra);
}

function codeMessage(code: string | undefined): string {
  switch (code) {
    case 'ENROLLMENT_CODE_EXPIRED':
      return 'The enrollment code has expired (codes are valid for 24 hours).';
    case 'ENROLLMENT_CODE_USED':
      return 'The enrollment code has already been used (each code enrolls one device, once).';
    case 'ENROLLMENT_CODE_INVALID':
      return 'The enrollment code is not valid: check it for typos (it looks like 7KQD-M3XP).';
    default:
      return 'The enrollment code was rejected: it is invalid, expired or already used.';
  }
}

function parseEnrollment(body: string): { ok: true; enrollment: Enrollment } | { ok: false; reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { ok: false, reason: body.trim() === '' ? 'the body is empty' : 'the body is not JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, reason: 'the body is not a JSON object' };
  }
  const record = value as Record<string, unknown>;
  const missing = (['device_id', 'org_id', 'device_token'] as const).filter(
    (field) => typeof record[field] !== 'string' || record[field].trim() === '',
  );
  if (missing.length > 0) return { ok: false, reason: `missing ${missing.join(', ')}` };
  return {
    ok: true,
    enrollment: {
      device_id: record['device_id'] as string,
      org_id: record['org_id'] as string,
      device_token: record['device_token'] as string,
      ...(typeof record['re_enrolled'] === 'boolean' ? { re_enrolled: record['re_enrolled'] } : {}),
    },
  };
}

/** The problem+json (or plain JSON) error body, when there is one; otherwise an empty problem. */
export function parseProblem(response: Pick<RawResponse, 'headers' | 'body'>): Problem {
  const type = response.headers.get('content-type') ?? '';
  if (!/json/i.test(type)) return {};
  let value: unknown;
  try {
    value = JSON.parse(response.body);
  } catch {
    return {};
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  const record = value as Record<string, unknown>;
  const problem: Problem = {};
  for (const field of ['code', 'title', 'detail', 'request_id'] as const) {
    const fieldValue = record[field];
    if (typeof fieldValue === 'string' && fieldValue.trim() !== '')
      problem[field] = printable(fieldValue, 500);
  }
  if (Array.isArray(record['errors'])) {
    problem.errors = record['errors']
      .filter((entry): entry is Record<string, unknown> => typeof entry === 'object' && entry !== null)
      .map((entry) => ({
        path: printable(stringOr(entry['path']), 200),
        message: printable(stringOr(entry['message']), 200),
      }))
      .slice(0, 10);
  }
  return problem;
}

/** Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3). */
export function parseRetryAfter(value: string | null, now: Date): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - now.getTime()) / 1000));
}

function formatDuration(seconds: number): string {
  if (seconds < 120) return `${seconds} s`;
  const minutes = Math.ceil(seconds / 60);
  return minutes < 120 ? `${minutes} min` : `${Math.ceil(minutes / 60)} h`;
}

/** Network-level failures (fetch rejects) as a failure naming the host and the likely cause. */
export function describeFetchError(error: unknown, server: URL, timeoutMs: number): EnrollFailure {
  const name = (error as { name?: unknown } | null)?.name;
  const host = server.host;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return timeout(host, timeoutMs);
  }
  const cause = (error as { cause?: unknown } | null)?.cause ?? error;
  const code = causeCode(cause);
  const detail = causeMessage(cause);
  switch (code) {
    case 'ECONNREFUSED':
      return failure(
        'network',
        `Could not connect to ${host}: connection refused. Is the service running, and is --server right?`,
      );
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
    case 'EAI_FAIL':
      return failure(
        'network',
        `Could not resolve the host name ${server.hostname} (DNS: ${code}). Check --server and this machine's network.`,
      );
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return failure(
        'network',
        `The connection to ${host} was closed before the server answered. Try again; a proxy or firewall may be in the way.`,
      );
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENETDOWN':
      return failure(
        'network',
        `${host} is unreachable from this machine (${code}). Check the network connection.`,
      );
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return timeout(host, timeoutMs);
    default:
      break;
  }
  if (typeof code === 'string' && (/CERT|TLS|SSL/.test(code) || code === 'EPROTO')) {
    return failure(
      'network',
      `Secure connection to ${host} failed (${code}${detail ? `: ${detail}` : ''}). ` +
        'If the service uses a private certificate authority, point NODE_EXTRA_CA_CERTS at its certificate.',
    );
  }
  return failure(
    'network',
    `Could not reach ${host}${detail ? `: ${detail}` : ''}${typeof code === 'string' ? ` (${code})` : ''}.`,
  );
}

function timeout(host: string, timeoutMs: number): EnrollFailure {
  return failure(
    'timeout',
    `No answer from ${host} within ${formatSeconds(timeoutMs)}. The service may be overloaded or unreachable; ` +
      'try again, or allow longer with --timeout SECONDS.',
  );
}

function formatSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

function causeCode(cause: unknown): unknown {
  const direct = (cause as { code?: unknown } | null)?.code;
  if (direct !== undefined) return direct;
  // Happy eyeballs: an AggregateError with one error per address tried.
  const errors = (cause as { errors?: unknown } | null)?.errors;
  return Array.isArray(errors) ? (errors[0] as { code?: unknown } | undefined)?.code : undefined;
}

function causeMessage(cause: unknown): string | undefined {
  const message = (cause as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message !== '' ? printable(message, 300) : undefined;
}

function stringOr(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function failure(
  kind: EnrollFailureKind,
  message: string,
  extra: Partial<EnrollFailure> = {},
): EnrollFailure {
  return { ...extra, ok: false, kind, message };
}

function statusLine(response: Pick<RawResponse, 'status' | 'statusText'>): string {
  return `HTTP ${response.status}${response.statusText ? ` ${printable(response.statusText, 100)}` : ''}`;
}

function reason(problem: Problem): string {
  const text = problem.detail ?? problem.title;
  const fields = problem.errors?.length
    ? `; ${problem.errors.map((e) => `${e.path} ${e.message}`).join('; ')}`
    : '';
  return text || fields ? `: ${text ?? ''}${fields}`.replace(/^: ; /, ': ') : '';
}

function requestIdLine(problem: Problem): string {
  return problem.request_id ? `\n(request id ${problem.request_id})` : '';
}

function safeResolve(location: string, base: string): string | undefined {
  try {
    const url = new URL(location, base);
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return undefined;
  }
}

/** Server text shown on a terminal: no control characters (escape sequences), bounded length. */
function printable(text: string, max: number): string {
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}
