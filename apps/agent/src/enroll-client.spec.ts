import {
  assertTransportAllowed,
  describeFetchError,
  enrollDevice,
  enrollUrl,
  InsecureServerError,
  interpretEnrollResponse,
  parseRetryAfter,
  parseServerUrl,
  type EnrollFailure,
  type EnrollResult,
} from './enroll-client';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const URL_ = 'https://api.example.com/api/device/enroll';

function problem(
  status: number,
  code: string | undefined,
  detail: string,
  extra: Record<string, unknown> = {},
) {
  return {
    status,
    statusText: '',
    headers: new Headers({ 'content-type': 'application/problem+json' }),
    body: JSON.stringify({
      type: 'urn:x',
      title: 't',
      status,
      detail,
      ...(code ? { code } : {}),
      request_id: 'req-9',
      ...extra,
    }),
    url: URL_,
  };
}

function failed(result: EnrollResult): EnrollFailure {
  if (result.ok) throw new Error('expected a failure');
  return result;
}

describe('interpretEnrollResponse', () => {
  it('returns the enrollment on 200', () => {
    const result = interpretEnrollResponse(
      {
        status: 200,
        headers: new Headers({ 'content-type': 'application/json' }),
        body: JSON.stringify({ device_id: 'd1', org_id: 'o1', device_token: 'stsdt_x', extra: true }),
        url: URL_,
      },
      NOW,
    );
    expect(result).toEqual({
      ok: true,
      enrollment: { device_id: 'd1', org_id: 'o1', device_token: 'stsdt_x' },
    });
  });

  it.each([
    ['not JSON', '<html>hello</html>', /not JSON/],
    ['empty', '', /empty/],
    ['an array', '[]', /not a JSON object/],
    ['without a token', JSON.stringify({ device_id: 'd1', org_id: 'o1' }), /missing device_token/],
  ])('calls a 200 that is %s a bad response', (_name, body, reason) => {
    const result = failed(
      interpretEnrollResponse({ status: 200, headers: new Headers(), body, url: URL_ }, NOW),
    );
    expect(result.kind).toBe('bad_response');
    expect(result.message).toMatch(reason);
  });

  it('401: the key, whatever the body', () => {
    const result = failed(
      interpretEnrollResponse(
        problem(401, 'ENROLLMENT_KEY_INVALID', 'Enrollment key missing or invalid'),
        NOW,
      ),
    );
    expect(result).toMatchObject({ kind: 'key_rejected', status: 401, code: 'ENROLLMENT_KEY_INVALID' });
    expect(result.message).toContain('ask your administrator for the current key'.replace('ask', 'Ask'));
    expect(result.message).toContain('request id req-9');
    const bare = failed(
      interpretEnrollResponse({ status: 401, headers: new Headers(), body: 'no', url: URL_ }, NOW),
    );
    expect(bare.kind).toBe('key_rejected');
  });

  it.each([
    ['ENROLLMENT_CODE_INVALID', /not valid: check it for typos/],
    ['ENROLLMENT_CODE_EXPIRED', /has expired/],
    ['ENROLLMENT_CODE_USED', /already been used/],
    [undefined, /invalid, expired or already used/],
  ])('400 %s: says which, suggests a new code', (code, text) => {
    const result = failed(interpretEnrollResponse(problem(400, code, 'whatever'), NOW));
    expect(result.kind).toBe('code_rejected');
    expect(result.message).toMatch(text);
    expect(result.message).toContain('Ask your administrator for a new enrollment code.');
  });

  it('400 validation errors are a rejected request with the detail and fields', () => {
    const result = failed(
      interpretEnrollResponse(
        problem(400, 'VALIDATION_FAILED', 'Invalid body', {
          errors: [{ path: 'body.hostname', message: 'too long' }],
        }),
        NOW,
      ),
    );
    expect(result.kind).toBe('request_rejected');
    expect(result.message).toContain('HTTP 400');
    expect(result.message).toContain('Invalid body; body.hostname too long');
  });

  it('409 MACHINE_ENROLLED_ELSEWHERE', () => {
    const result = failed(interpretEnrollResponse(problem(409, 'MACHINE_ENROLLED_ELSEWHERE', 'x'), NOW));
    expect(result.kind).toBe('machine_enrolled_elsewhere');
    expect(result.message).toContain('enrolled in another organization');
  });

  it('409 MACHINE_ALREADY_ENROLLED: an administrator must allow the re-enrollment', () => {
    const result = failed(interpretEnrollResponse(problem(409, 'MACHINE_ALREADY_ENROLLED', 'x'), NOW));
    expect(result).toMatchObject({ kind: 'machine_already_enrolled', code: 'MACHINE_ALREADY_ENROLLED' });
    expect(result.message).toContain('already enrolled in this organization');
    expect(result.message).toContain('re-enrollment');
  });

  it('429 shows Retry-After, as seconds or as a date', () => {
    const seconds = problem(429, 'RATE_LIMITED', 'Too many requests; retry in 42 s');
    seconds.headers.set('retry-after', '42');
    const result = failed(interpretEnrollResponse(seconds, NOW));
    expect(result).toMatchObject({ kind: 'rate_limited', retryAfterSeconds: 42 });
    expect(result.message).toContain('Try again in 42 s (after 2026-03-01T12:00:42.000Z)');

    const dated = problem(429, 'RATE_LIMITED', 'x');
    dated.headers.set('retry-after', 'Sun, 01 Mar 2026 12:10:00 GMT');
    expect(failed(interpretEnrollResponse(dated, NOW))).toMatchObject({ retryAfterSeconds: 600 });

    const none = failed(
      interpretEnrollResponse({ status: 429, headers: new Headers(), body: '', url: URL_ }, NOW),
    );
    expect(none.message).toContain('Wait a minute');
  });

  it('413 and other 4xx show the detail; 404 points at --server', () => {
    const large = failed(
      interpretEnrollResponse(problem(413, 'PAYLOAD_TOO_LARGE', 'Request body is too large'), NOW),
    );
    expect(large).toMatchObject({ kind: 'request_rejected', status: 413 });
    expect(large.message).toContain('Request body is too large');
    const notFound = failed(
      interpretEnrollResponse(
        { status: 404, statusText: 'Not Found', headers: new Headers(), body: 'nope', url: URL_ },
        NOW,
      ),
    );
    expect(notFound.message).toContain(`no enrollment endpoint at ${URL_}`);
    expect(failed(interpretEnrollResponse(problem(409, 'SOMETHING_ELSE', 'other conflict'), NOW)).kind).toBe(
      'request_rejected',
    );
  });

  it('5xx is a server error with the detail, even when the body is not JSON', () => {
    const result = failed(
      interpretEnrollResponse(problem(503, 'SERVICE_UNAVAILABLE', 'enrollment is unavailable'), NOW),
    );
    expect(result).toMatchObject({ kind: 'server_error', status: 503 });
    expect(result.message).toContain('enrollment is unavailable');
    const html = failed(
      interpretEnrollResponse(
        {
          status: 502,
          statusText: 'Bad Gateway',
          headers: new Headers({ 'content-type': 'text/html' }),
          body: '<h1>502</h1>',
          url: URL_,
        },
        NOW,
      ),
    );
    expect(html.kind).toBe('server_error');
    expect(html.message).toContain('HTTP 502 Bad Gateway');
  });

  it('redirects are not followed but explained', () => {
    const result = failed(
      interpretEnrollResponse(
        {
          status: 308,
          headers: new Headers({ location: 'https://new.example.com/api/device/enroll' }),
          body: '',
          url: URL_,
        },
        NOW,
      ),
    );
    expect(result.kind).toBe('bad_response');
    expect(result.message).toContain('(probably https://new.example.com)');
  });

  it('strips control characters from server text', () => {
    const result = failed(interpretEnrollResponse(problem(500, 'INTERNAL', 'bad\u001b[31m red'), NOW));
    expect(result.message).not.toContain('\u001b');
  });
});

describe('describeFetchError', () => {
  const server = new URL('https://api.example.com:8443');
  const fetchFailed = (cause: unknown) => Object.assign(new TypeError('fetch failed'), { cause });

  it.each([
    [{ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' }, 'network', /connection refused/],
    [
      { code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND' },
      'network',
      /resolve the host name api\.example\.com/,
    ],
    [{ code: 'ECONNRESET' }, 'network', /closed before the server answered/],
    [{ code: 'CERT_HAS_EXPIRED', message: 'certificate has expired' }, 'network', /NODE_EXTRA_CA_CERTS/],
    [{ code: 'UND_ERR_CONNECT_TIMEOUT' }, 'timeout', /within 2 s/],
    [
      new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })]),
      'network',
      /connection refused/,
    ],
    [new Error('bad port'), 'network', /Could not reach api\.example\.com:8443: bad port/],
  ])('%p → %s', (cause, kind, message) => {
    const result = describeFetchError(fetchFailed(cause), server, 2000);
    expect(result.kind).toBe(kind);
    expect(result.message).toMatch(message);
  });

  it('AbortSignal.timeout → timeout', () => {
    const error = Object.assign(new Error('The operation was aborted due to timeout'), {
      name: 'TimeoutError',
    });
    expect(describeFetchError(error, server, 1500)).toMatchObject({
      kind: 'timeout',
      message: expect.stringContaining('1.5 s'),
    });
  });
});

describe('parseServerUrl and enrollUrl', () => {
  it('accepts http(s) and flags plain http to other hosts', () => {
    expect(parseServerUrl('https://api.example.com').insecure).toBe(false);
    expect(parseServerUrl('https://10.0.0.5').insecure).toBe(false);
    for (const remote of [
      'http://api.example.com',
      'http://10.0.0.5:8080',
      'http://[2001:db8::1]',
      // Names a resolver may look up in DNS are not this machine.
      'http://gw.localhost',
      'http://localhost.example.com',
      'http://127.0.0.1.nip.io',
      'http://0.0.0.0:8080',
    ]) {
      expect([remote, parseServerUrl(remote).insecure]).toEqual([remote, true]);
    }
    for (const local of [
      'http://localhost:8080',
      'http://LOCALHOST',
      'http://127.0.0.1:8080',
      'http://127.45.6.7',
      'http://[::1]:8080',
      'http://[::ffff:127.0.0.1]',
      'http://2130706433', // 127.0.0.1, as the URL parser reads it
    ]) {
      expect([local, parseServerUrl(local).insecure]).toEqual([local, false]);
    }
  });

  it('lets credentials go over plain http to another machine only with the opt-in', () => {
    expect(() => assertTransportAllowed(new URL('https://api.example.com'), false)).not.toThrow();
    expect(() => assertTransportAllowed(new URL('http://127.0.0.1:8080'), false)).not.toThrow();
    expect(() => assertTransportAllowed(new URL('http://api.example.com'), false)).toThrow(
      InsecureServerError,
    );
    expect(() => assertTransportAllowed(new URL('http://api.example.com'), true)).not.toThrow();
    // The opt-in is for plain http, nothing else.
    expect(() => assertTransportAllowed(new URL('ftp://api.example.com'), true)).toThrow(InsecureServerError);
  });

  it('enrollDevice sends nothing over plain http to another machine without the opt-in', async () => {
    const calls: string[] = [];
    const fetchFn = (async (url: string) => {
      calls.push(url);
      return new Response(JSON.stringify({ device_id: 'd', org_id: 'o', device_token: 't' }), {
        status: 200,
      });
    }) as unknown as typeof fetch;
    const options = {
      server: new URL('http://api.example.com'),
      enrollmentKey: 'stsek_k',
      body: { code: 'C-1', machine_id: 'm', hostname: 'h', metadata: {} },
      fetch: fetchFn,
    };
    await expect(enrollDevice(options)).rejects.toBeInstanceOf(InsecureServerError);
    expect(calls).toEqual([]);
    expect((await enrollDevice({ ...options, allowInsecureHttp: true })).ok).toBe(true);
    expect(calls).toEqual(['http://api.example.com/api/device/enroll']);
  });

  it.each([
    'api.example.com',
    'ftp://api.example.com',
    'https://u:p@api.example.com',
    'https://x.com/?a=1',
    'https://x.com/#a',
  ])('rejects %s', (raw) => {
    expect(() => parseServerUrl(raw)).toThrow(/--server/);
  });

  it('appends the path, keeping a prefix and dropping trailing slashes', () => {
    expect(enrollUrl(new URL('https://api.example.com/'))).toBe('https://api.example.com/api/device/enroll');
    expect(enrollUrl(new URL('https://example.com/sts//'))).toBe('https://example.com/sts/api/device/enroll');
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds and dates, ignores nonsense', () => {
    expect(parseRetryAfter('120', NOW)).toBe(120);
    expect(parseRetryAfter('Sun, 01 Mar 2026 11:00:00 GMT', NOW)).toBe(0);
    expect(parseRetryAfter('soon', NOW)).toBeUndefined();
    expect(parseRetryAfter(null, NOW)).toBeUndefined();
  });
});

describe('enrollDevice', () => {
  it('posts the body with the key header, no redirects, and a timeout signal', async () => {
    let seen: { url: string; init: RequestInit } | undefined;
    const fakeFetch = (async (url: string, init: RequestInit) => {
      seen = { url, init };
      return new Response(JSON.stringify({ device_id: 'd', org_id: 'o', device_token: 't' }), {
        status: 200,
        headers: { 'content-type': 'application/json' },
      });
    }) as unknown as typeof fetch;
    const body = { code: 'AAAA-BBBB', machine_id: 'm', hostname: 'h', metadata: { os: 'linux' } };
    const result = await enrollDevice({
      server: new URL('https://x.example'),
      enrollmentKey: 'stsek_k',
      body,
      fetch: fakeFetch,
    });
    expect(result.ok).toBe(true);
    expect(seen?.url).toBe('https://x.example/api/device/enroll');
    expect(seen?.init).toMatchObject({ method: 'POST', redirect: 'manual', body: JSON.stringify(body) });
    expect((seen?.init.headers as Record<string, string>)['x-enrollment-key']).toBe('stsek_k');
    expect(seen?.init.headers).not.toHaveProperty('x-device-token');
    expect(seen?.init.signal).toBeInstanceOf(AbortSignal);

    await enrollDevice({
      server: new URL('https://x.example'),
      enrollmentKey: 'stsek_k',
      deviceToken: 'sts_dt_current',
      body,
      fetch: fakeFetch,
    });
    expect((seen?.init.headers as Record<string, string>)['x-device-token']).toBe('sts_dt_current');
  });

  it('refuses oversized answers', async () => {
    const fakeFetch = (async () =>
      new Response('x'.repeat(1024 * 1024 + 1), { status: 200 })) as unknown as typeof fetch;
    const result = await enrollDevice({
      server: new URL('https://x.example'),
      enrollmentKey: 'k',
      body: { code: 'c', machine_id: 'm', hostname: 'h', metadata: {} },
      fetch: fakeFetch,
    });
    expect(failed(result).kind).toBe('bad_response');
  });
});
