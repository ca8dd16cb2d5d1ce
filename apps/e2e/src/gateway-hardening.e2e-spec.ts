import {
  createHostileTokens,
  HOSTILE_TOKEN_DESCRIPTIONS,
  type HostileTokenName,
} from '@sts/dev-oidc/hostile-tokens';
import { startSystem, type SystemUnderTest } from './system-under-test';

interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  request_id: string;
  errors?: { path: string; message: string }[];
}

describe('gateway hardening, end to end', () => {
  let system: SystemUnderTest;
  let admin: string;

  beforeAll(async () => {
    system = await startSystem();
    admin = await system.tokenFor('root@hardening.test', { name: 'Root' });
    expect((await system.api('GET', '/api/session', { token: admin })).status).toBe(200);
  });

  afterAll(async () => {
    await system?.stop();
  });

  function expectProblem(
    response: { status: number; headers: Headers; body: unknown },
    status: number,
    code: string,
  ): void {
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    const problem = response.body as Problem;
    expect(problem).toEqual(
      expect.objectContaining({
        status,
        code,
        type: expect.any(String),
        title: expect.any(String),
        detail: expect.any(String),
      }),
    );
    expect(problem.request_id).toBe(response.headers.get('x-request-id'));
  }

  it('answers 401 problem+json without a token or with a malformed header', async () => {
    expectProblem(await system.api('GET', '/api/session'), 401, 'UNAUTHENTICATED');
    expectProblem(
      await system.api('GET', '/api/members', { headers: { authorization: 'Basic abc' } }),
      401,
      'UNAUTHENTICATED',
    );
    expectProblem(
      await system.api('GET', '/api/members', { headers: { authorization: 'Bearer' } }),
      401,
      'UNAUTHENTICATED',
    );
  });

  it.each(Object.keys(HOSTILE_TOKEN_DESCRIPTIONS) as HostileTokenName[])(
    'refuses a hostile token: %s',
    async (name) => {
      const tokens = await createHostileTokens(system.idp);
      for (const path of ['/api/session', '/api/members', '/api/notifications']) {
        expectProblem(await system.api('GET', path, { token: tokens[name] }), 401, 'UNAUTHENTICATED');
      }
    },
  );

  it('answers 400, never 500, to tampered paging cursors on every list', async () => {
    const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const id = '00000000-0000-4000-8000-000000000001';
    const tampered = [
      cursorOf(['5', id]),
      cursorOf(['+275760-09-13T00:00:00.000Z', id]),
      cursorOf(['0000-01-01T00:00:00.000Z', id]),
      cursorOf(['2026-01-01T00:00:00.000Z', 'not-a-uuid']),
      cursorOf([1, 2]),
      'bm90IGpzb24',
    ];
    for (const path of ['/api/members', '/api/invites', '/api/notifications', '/api/devices']) {
      for (const cursor of tampered) {
        const response = await system.api('GET', `${path}?cursor=${cursor}`, { token: admin });
        expect([path, cursor, response.status]).toEqual([path, cursor, 400]);
        expectProblem(response, 400, 'VALIDATION_FAILED');
      }
    }
  });

  it('rejects malformed and hostile bodies with 4xx problems and writes nothing', async () => {
    const before = (await system.api<unknown[]>('GET', '/api/invites', { token: admin })).body.length;
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        rawBody: '{"email": ',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'MALFORMED_REQUEST',
    );
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        rawBody: '',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'MALFORMED_REQUEST',
    );
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        rawBody: 'email=a',
        headers: { 'content-type': 'text/plain' },
      }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );

    const wrongType = await system.api<Problem>('POST', '/api/invites', {
      token: admin,
      body: { email: 42, role: 'ANALYST' },
    });
    expectProblem(wrongType, 400, 'VALIDATION_FAILED');
    expect(wrongType.body.errors?.map((e) => e.path)).toContain('body.email');
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        body: { email: 'a@b.test', role: 'SUPERUSER' },
      }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        body: { email: 'not-an-email', role: 'ANALYST' },
      }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        body: { email: 'a@b.test', role: 'ANALYST', admin: true },
      }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('POST', '/api/invites', { token: admin, body: [] }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        body: { email: `${'a'.repeat(300)}@b.test`, role: 'ANALYST' },
      }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: admin,
        body: { email: 'a@b.test', role: 'ANALYST', pad: 'x'.repeat(70 * 1024) },
      }),
      413,
      'PAYLOAD_TOO_LARGE',
    );
    expectProblem(
      await system.api('PATCH', '/api/members/00000000-0000-0000-0000-000000000000', {
        token: admin,
        body: {},
      }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('POST', '/api/invites/accept', { body: { token: 12 } }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('POST', '/api/invites/accept', { body: { token: "sts_inv_' or 1=1 --" } }),
      400,
      'INVITE_TOKEN_INVALID',
    );
    expectProblem(
      await system.api('GET', '/api/members?limit=0', { token: admin }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('GET', '/api/members?cursor=garbage', { token: admin }),
      400,
      'VALIDATION_FAILED',
    );
    expectProblem(
      await system.api('GET', '/api/members', { token: admin, headers: { 'x-org-id': 'nope' } }),
      400,
      'VALIDATION_FAILED',
    );

    const after = (await system.api<unknown[]>('GET', '/api/invites', { token: admin })).body.length;
    expect(after).toBe(before);
  });

  it('answers 404 for unknown ids of any shape and unknown routes', async () => {
    for (const id of ['00000000-0000-0000-0000-000000000000', 'not-a-uuid', "1' OR '1'='1", '%F0%9F%92%A5']) {
      expectProblem(
        await system.api('DELETE', `/api/members/${id}`, { token: admin }),
        404,
        'MEMBER_NOT_FOUND',
      );
      expectProblem(
        await system.api('DELETE', `/api/invites/${id}`, { token: admin }),
        404,
        'INVITE_NOT_FOUND',
      );
      expectProblem(
        await system.api('POST', `/api/notifications/${id}/read`, { token: admin }),
        404,
        'NOTIFICATION_NOT_FOUND',
      );
      expectProblem(
        await system.api('POST', `/api/devices/${id}/disable`, { token: admin }),
        404,
        'DEVICE_NOT_FOUND',
      );
      expectProblem(
        await system.api('POST', `/api/devices/${id}/enable`, { token: admin }),
        404,
        'DEVICE_NOT_FOUND',
      );
      expectProblem(
        await system.api('DELETE', `/api/devices/${id}`, { token: admin }),
        404,
        'DEVICE_NOT_FOUND',
      );
    }
    expectProblem(await system.api('GET', '/api/nope', { token: admin }), 404, 'ROUTE_NOT_FOUND');
  });

  it('serves client-credentials tokens for integrations, with least privilege by default', async () => {
    const session = (await system.api<{ org: { id: string } }>('GET', '/api/session', { token: admin })).body;
    system.idp.registerClient({
      clientId: 'siem-export',
      clientSecret: 'siem-secret-0123456789abcdef',
      orgId: session.org.id,
    });
    const tokenResponse = await fetch(`${system.idp.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_id: 'siem-export',
        client_secret: 'siem-secret-0123456789abcdef',
        audience: system.idp.audience,
        grant_type: 'client_credentials',
      }),
    });
    expect(tokenResponse.status).toBe(200);
    const { access_token } = (await tokenResponse.json()) as { access_token: string };
    const members = await system.api<unknown[]>('GET', '/api/members', { token: access_token });
    expect(members.status).toBe(200);
    expect(members.body).toHaveLength(1);
    expectProblem(
      await system.api('POST', '/api/invites', {
        token: access_token,
        body: { email: 'x@y.test', role: 'ANALYST' },
      }),
      403,
      'FORBIDDEN',
    );
  });

  it('publishes OpenAPI 3.1 docs and a health endpoint', async () => {
    const health = await system.api<{ status: string }>('GET', '/api/analytics/health');
    expect(health.body).toEqual({ status: 'ok' });
    const spec = await system.api<{ openapi: string; paths: Record<string, unknown> }>('GET', '/docs/json');
    expect(spec.status).toBe(200);
    expect(spec.body.openapi).toBe('3.1.0');
    for (const path of [
      '/api/session',
      '/api/members',
      '/api/members/{id}',
      '/api/invites',
      '/api/invites/accept',
      '/api/notifications/read-all',
    ]) {
      expect(Object.keys(spec.body.paths)).toContain(path);
    }
    const ui = await system.api<string>('GET', '/docs/');
    expect(ui.status).toBe(200);
    // Swagger UI shares the dashboard's origin: its page, files and document carry the same guards.
    for (const answer of [ui, spec, await system.api('GET', '/docs/static/swagger-ui-bundle.js')]) {
      expect(answer.headers.get('content-security-policy')).toMatch(
        /script-src 'self';.*frame-ancestors 'none'/,
      );
      expect(answer.headers.get('x-frame-options')).toBe('DENY');
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
      expect(answer.headers.get('referrer-policy')).toBe('no-referrer');
    }
  });
});

describe('signed-in changes are limited per subject and per organization (issue 41)', () => {
  const PER_SUBJECT = 3;
  const PER_ORG = 5;
  let system: SystemUnderTest;

  beforeAll(async () => {
    system = await startSystem({
      gatewayEnv: {
        WRITES_PER_SUBJECT_PER_MINUTE: String(PER_SUBJECT),
        WRITES_PER_ORG_PER_MINUTE: String(PER_ORG),
      },
    });
  });

  afterAll(async () => {
    await system?.stop();
  });

  it('answers 429 with Retry-After past either limit, and never counts reads', async () => {
    const admin = await system.tokenFor('root@writes.test', { name: 'Root' });
    expect((await system.api('GET', '/api/session', { token: admin })).status).toBe(200);
    const markAllRead = (token: string) =>
      system.api<{ code: string; detail: string }>('POST', '/api/notifications/read-all', { token });

    // Counted in whole clock minutes: begin early in one, so that all of this falls in it.
    const secondsLeft = 60 - new Date().getUTCSeconds();
    if (secondsLeft < 20) await new Promise((resolve) => setTimeout(resolve, secondsLeft * 1000 + 100));

    // A second member of the organization (the invite is the admin's first change).
    const invited = await system.api('POST', '/api/invites', {
      token: admin,
      body: { email: 'second@writes.test', role: 'ANALYST' },
    });
    expect(invited.status).toBe(201);
    const mail = await system.mail.waitFor((m) => m.to.includes('second@writes.test'), 10_000);
    const token = /sts_inv_[A-Za-z0-9_-]{43}/.exec(mail.text ?? '')![0];
    expect((await system.api('POST', '/api/invites/accept', { body: { token } })).status).toBe(200);
    const second = await system.tokenFor('second@writes.test', { name: 'Second' });
    expect((await system.api('GET', '/api/session', { token: second })).status).toBe(200);

    const bySubject = [];
    for (let i = 1; i <= PER_SUBJECT; i++) bySubject.push((await markAllRead(admin)).status);
    expect(bySubject).toEqual([200, 200, 429]);
    const refused = await markAllRead(admin);
    expect([refused.status, refused.body.code]).toEqual([429, 'RATE_LIMITED']);
    expect(refused.body.detail).toContain('by this caller');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Reads go on.
    expect((await system.api('GET', '/api/notifications', { token: admin })).status).toBe(200);

    // The organization counts every change offered, refused ones too (5 so far): the second member has none
    // of its own yet, and is refused for the organization's.
    const other = await markAllRead(second);
    expect([other.status, other.body.code]).toEqual([429, 'RATE_LIMITED']);
    expect(other.body.detail).toContain('in this organization');
  });
});
