import { loadConfig } from '@sts/config/load-config';
import { gatewayEnvSchema } from './gateway-config';
import type { LightMyRequestResponse } from 'fastify';
import { AppError } from '@sts/errors/app-error';
import { Role as ProtoRole } from '@sts/proto/gen/identity/v1/identity';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { isUuid } from '@sts/vocabulary/identifiers';
import { AT, ORG_ID, OTHER_ORG_ID, protoInvite, protoMember } from './test/fake-upstream';
import { startTestGateway, type TestGateway } from './test/test-gateway';

// light-my-request (behind app.inject) requires `cookie` 2, which is ESM only; jest.config.js does not
// transform it, so jest cannot load it. It is used only for inject's `cookies` option, which these tests
// do not use. Remove this stand-in once jest.config.js transforms `cookie` like `jose`.

/** Asserts an RFC 9457 problem response and returns its body. */
function expectProblem(
  response: LightMyRequestResponse,
  status: number,
  code: string,
): Record<string, unknown> {
  expect({ status: response.statusCode, body: response.body }).toMatchObject({ status });
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = response.json<Record<string, unknown>>();
  expect(body).toMatchObject({
    type: `urn:sts:problem:${code.toLowerCase().replace(/_/g, '-')}`,
    title: expect.any(String),
    status,
    detail: expect.any(String),
    code,
    request_id: response.headers['x-request-id'],
  });
  expect(Object.keys(body).sort()).toEqual(
    [
      'code',
      'detail',
      'request_id',
      'status',
      'title',
      'type',
      ...('errors' in body ? ['errors'] : []),
    ].sort(),
  );
  return body;
}

describe('gateway (fake upstream, real token verifier)', () => {
  let gw: TestGateway;
  let admin: string;

  beforeEach(async () => {
    gw = await startTestGateway();
    admin = await gw.tokens.user('ada@example.com');
  });

  afterEach(async () => {
    await gw.app.close();
  });

  const as = (token: string, headers: Record<string, string> = {}) => ({
    authorization: `Bearer ${token}`,
    ...headers,
  });

  describe('Fastify errors as problem+json', () => {
    it('answers invalid JSON with 400 MALFORMED_REQUEST', async () => {
      const response = await gw.app.inject({
        method: 'POST',
        url: '/api/invites/accept',
        headers: { 'content-type': 'application/json' },
        payload: '{"token": ',
      });
      expectProblem(response, 400, 'MALFORMED_REQUEST');
      expect(gw.upstream.calls).toEqual([]);
    });

    it('answers an empty JSON body with 400 MALFORMED_REQUEST', async () => {
      const response = await gw.app.inject({
        method: 'POST',
        url: '/api/invites',
        headers: as(admin, { 'content-type': 'application/json' }),
        payload: '',
      });
      expect(expectProblem(response, 400, 'MALFORMED_REQUEST').detail).toMatch(/empty/);
      expect(gw.upstream.callsOf('createInvite')).toEqual([]);
    });

    it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/xml'])(
      'answers a %s body with 415',
      async (type) => {
        const response = await gw.app.inject({
          method: 'POST',
          url: '/api/invites/accept',
          headers: { 'content-type': type },
          payload: 'token=sts_inv_x',
        });
        expectProblem(response, 415, 'UNSUPPORTED_MEDIA_TYPE');
        expect(gw.upstream.calls).toEqual([]);
      },
    );

    it('answers a body over the limit with 413', async () => {
      const small = await startTestGateway({ BODY_LIMIT_BYTES: 1024 });
      try {
        const response = await small.app.inject({
          method: 'POST',
          url: '/api/invites/accept',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ token: 'x'.repeat(2048) }),
        });
        expectProblem(response, 413, 'PAYLOAD_TOO_LARGE');
        expect(small.upstream.calls).toEqual([]);
      } finally {
        await small.app.close();
      }
    });

    it('answers invalid fields with 400 VALIDATION_FAILED naming each field path', async () => {
      const response = await gw.app.inject({
        method: 'POST',
        url: '/api/invites',
        headers: as(admin),
        payload: { email: 'not-an-email', role: 'BOSS' },
      });
      const body = expectProblem(response, 400, 'VALIDATION_FAILED');
      const errors = body.errors as { path: string; message: string }[];
      expect(errors.map((e) => e.path).sort()).toEqual(['body.email', 'body.role']);
      for (const error of errors) expect(error.message.length).toBeGreaterThan(0);
      expect(body.detail).toContain('body.email');
      expect(gw.upstream.callsOf('createInvite')).toEqual([]);
    });

    it('refuses unknown body fields, wrong types and bad query values', async () => {
      const unknownField = await gw.app.inject({
        method: 'POST',
        url: '/api/invites',
        headers: as(admin),
        payload: { email: 'grace@example.com', role: 'ANALYST', rol: 'x' },
      });
      expect(
        (expectProblem(unknownField, 400, 'VALIDATION_FAILED').errors as { path: string }[])[0]?.path,
      ).toMatch(/^body/);

      const wrongType = await gw.app.inject({
        method: 'PATCH',
        url: '/api/members/m-2',
        headers: as(admin),
        payload: { dashboard_access: 'yes' },
      });
      expect(expectProblem(wrongType, 400, 'VALIDATION_FAILED').errors).toEqual([
        { path: 'body.dashboard_access', message: expect.any(String) },
      ]);

      const empty = await gw.app.inject({
        method: 'PATCH',
        url: '/api/members/m-2',
        headers: as(admin),
        payload: {},
      });
      expect(expectProblem(empty, 400, 'VALIDATION_FAILED').errors).toEqual([
        { path: 'body', message: 'send role, dashboard_access or both' },
      ]);

      const limit = await gw.app.inject({ method: 'GET', url: '/api/members?limit=0', headers: as(admin) });
      expect(expectProblem(limit, 400, 'VALIDATION_FAILED').errors).toEqual([
        { path: 'querystring.limit', message: expect.any(String) },
      ]);

      const unread = await gw.app.inject({
        method: 'GET',
        url: '/api/notifications?unread=maybe',
        headers: as(admin),
      });
      expect(expectProblem(unread, 400, 'VALIDATION_FAILED').errors).toEqual([
        { path: 'querystring.unread', message: expect.any(String) },
      ]);

      expect(gw.upstream.callsOf('createInvite')).toEqual([]);
      expect(gw.upstream.callsOf('updateMember')).toEqual([]);
      expect(gw.upstream.callsOf('listMembers')).toEqual([]);
    });

    it('answers an unknown route with 404 ROUTE_NOT_FOUND, without the query string', async () => {
      const response = await gw.app.inject({ method: 'GET', url: '/api/nope?secret=1' });
      expect(expectProblem(response, 404, 'ROUTE_NOT_FOUND').detail).toBe('No route GET /api/nope');

      const wrongMethod = await gw.app.inject({ method: 'PUT', url: '/api/members', headers: as(admin) });
      expectProblem(wrongMethod, 404, 'ROUTE_NOT_FOUND');
    });
  });

  describe('errors from upstream services', () => {
    it.each([
      ['LAST_ADMIN', 409],
      ['MEMBER_NOT_FOUND', 404],
      ['SERVICE_UNAVAILABLE', 503],
      ['DEADLINE_EXCEEDED', 504],
    ] as const)('keeps the code and status of an AppError (%s → %i)', async (code, status) => {
      gw.upstream.identity.updateMember = async () => {
        throw new AppError(code, `upstream says ${code}`);
      };
      const response = await gw.app.inject({
        method: 'PATCH',
        url: '/api/members/m-2',
        headers: as(admin),
        payload: { role: 'ANALYST' },
      });
      expect(expectProblem(response, status, code).detail).toBe(`upstream says ${code}`);
    });

    it('answers an unexpected error with 500 INTERNAL without leaking its message, and logs it', async () => {
      gw.upstream.identity.listMembers = async () => {
        throw new Error('pg: password authentication failed for user "secret_user"');
      };
      const response = await gw.app.inject({ method: 'GET', url: '/api/members', headers: as(admin) });

      const body = expectProblem(response, 500, 'INTERNAL');
      expect(body.detail).toBe('Internal error');
      expect(response.body).not.toContain('secret_user');
      expect(response.body).not.toContain('pg:');
      const logged = gw.logs.find((line) => line.msg === 'request failed');
      expect(JSON.stringify(logged)).toContain('secret_user');
      // Nothing logged carries the bearer token.
      expect(JSON.stringify(gw.logs)).not.toContain(admin);
    });

    it('answers an upstream answer outside the contract with 500 INTERNAL and logs it', async () => {
      gw.upstream.identity.listMembers = async () => ({
        members: [protoMember({ role: ProtoRole.ROLE_UNSPECIFIED })],
        nextCursor: '',
      });
      const response = await gw.app.inject({ method: 'GET', url: '/api/members', headers: as(admin) });
      expect(expectProblem(response, 500, 'INTERNAL').detail).toBe('Internal error');
      expect(response.body).not.toContain('ROLE_UNSPECIFIED');
      expect(gw.logs.some((line) => line.msg === 'request failed')).toBe(true);
    });
  });

  describe('URLs rejected before routing', () => {
    it.each([
      ['an over-long id', `/api/members/${'a'.repeat(300)}`, 404, 'ROUTE_NOT_FOUND'],
      ['a badly percent-encoded id', '/api/members/%E0%A4%A', 400, 'MALFORMED_REQUEST'],
    ] as const)('answers %s with problem+json and the request id', async (_label, url, status, code) => {
      const response = await gw.app.inject({
        method: 'DELETE',
        url,
        headers: as(admin, { 'x-request-id': 'req-1' }),
      });
      expect(response.headers['x-request-id']).toBe('req-1');
      expect(expectProblem(response, status, code).request_id).toBe('req-1');
      expect(response.body).not.toContain('aaaaaaaaaa');
    });

    it('names each unknown body field and asks for a Bearer token on 401', async () => {
      const response = await gw.app.inject({
        method: 'POST',
        url: '/api/invites',
        headers: as(admin),
        payload: { email: 'a@b.test', role: 'ANALYST', rol: 'x' },
      });
      expect(expectProblem(response, 400, 'VALIDATION_FAILED').errors).toEqual([
        { path: 'body.rol', message: 'is not a known field' },
      ]);
      const anonymous = await gw.app.inject({ method: 'GET', url: '/api/members' });
      expectProblem(anonymous, 401, 'UNAUTHENTICATED');
      expect(anonymous.headers['www-authenticate']).toBe('Bearer');
    });
  });

  describe('authentication and roles', () => {
    it('answers 401 without a token, with a token of an unknown key and with an expired token', async () => {
      expectProblem(await gw.app.inject({ method: 'GET', url: '/api/session' }), 401, 'UNAUTHENTICATED');
      const foreign = await gw.tokens.foreign('ada@example.com');
      expectProblem(
        await gw.app.inject({ method: 'GET', url: '/api/session', headers: as(foreign) }),
        401,
        'UNAUTHENTICATED',
      );
      const expired = await gw.tokens.user('ada@example.com', { exp: Math.floor(Date.now() / 1000) - 60 });
      const response = await gw.app.inject({ method: 'GET', url: '/api/session', headers: as(expired) });
      expect(expectProblem(response, 401, 'UNAUTHENTICATED').detail).toBe('Token has expired');
      expect(gw.upstream.calls).toEqual([]);
    });

    it('checks the role before the body: an ANALYST posting an invalid invite gets 403, not 400', async () => {
      const analyst = await gw.tokens.user('ana@example.com');
      gw.upstream.memberships.set('ana@example.com', { role: ProtoRole.ROLE_ANALYST, dashboardAccess: true });

      const response = await gw.app.inject({
        method: 'POST',
        url: '/api/invites',
        headers: as(analyst),
        payload: { email: 'nope', extra: 1 },
      });
      expectProblem(response, 403, 'FORBIDDEN');
      const malformed = await gw.app.inject({
        method: 'POST',
        url: '/api/invites',
        headers: as(analyst, { 'content-type': 'application/json' }),
        payload: '{',
      });
      expectProblem(malformed, 403, 'FORBIDDEN');
      expect(gw.upstream.callsOf('createInvite')).toEqual([]);
    });

    it('applies least privilege by role', async () => {
      const analyst = await gw.tokens.user('ana@example.com');
      const appUser = await gw.tokens.user('app@example.com');
      gw.upstream.memberships.set('ana@example.com', { role: ProtoRole.ROLE_ANALYST, dashboardAccess: true });
      gw.upstream.memberships.set('app@example.com', {
        role: ProtoRole.ROLE_APP_USER,
        dashboardAccess: true,
      });
      const status = async (
        token: string,
        method: 'GET' | 'DELETE' | 'PATCH',
        url: string,
        payload?: object,
      ) =>
        (await gw.app.inject({ method, url, headers: as(token), ...(payload ? { payload } : {}) }))
          .statusCode;

      expect(await status(analyst, 'GET', '/api/members')).toBe(200);
      expect(await status(appUser, 'GET', '/api/members')).toBe(403);
      // The refusal names the roles the route needs.
      const members = await gw.app.inject({ method: 'GET', url: '/api/members', headers: as(appUser) });
      expect(expectProblem(members, 403, 'FORBIDDEN').detail).toBe('requires role ORG_ADMIN or ANALYST');
      expect(await status(analyst, 'GET', '/api/invites')).toBe(403);
      expect(await status(analyst, 'DELETE', '/api/members/m-2')).toBe(403);
      expect(await status(analyst, 'PATCH', '/api/members/m-2', { role: 'ORG_ADMIN' })).toBe(403);
      expect(await status(appUser, 'GET', '/api/session')).toBe(200);
      expect(await status(appUser, 'GET', '/api/notifications')).toBe(200);
      expect(gw.upstream.callsOf('removeMember')).toEqual([]);
      expect(gw.upstream.callsOf('updateMember')).toEqual([]);
    });

    it('refuses users without dashboard access (403 DASHBOARD_ACCESS_DENIED) on every route', async () => {
      const kept = await gw.tokens.user('kept@example.com');
      gw.upstream.memberships.set('kept@example.com', {
        role: ProtoRole.ROLE_ORG_ADMIN,
        dashboardAccess: false,
      });

      for (const url of ['/api/session', '/api/notifications', '/api/members']) {
        expectProblem(
          await gw.app.inject({ method: 'GET', url, headers: as(kept) }),
          403,
          'DASHBOARD_ACCESS_DENIED',
        );
      }
      expect(gw.upstream.callsOf('getLicense')).toEqual([]);
      expect(gw.upstream.callsOf('listMembers')).toEqual([]);
    });

    it('does not apply the dashboard rule to client-credentials tokens', async () => {
      // Even if identity said "no dashboard access", a client token is not a dashboard user.
      gw.upstream.identity.resolveCaller = async () => ({
        user: { id: 'client:ci', email: '', name: 'ci' },
        org: { id: ORG_ID, name: 'Acme' },
        memberId: '',
        role: ProtoRole.ROLE_ANALYST,
        dashboardAccess: false,
      });
      const client = await gw.tokens.client('ci', ORG_ID);

      const response = await gw.app.inject({ method: 'GET', url: '/api/members', headers: as(client) });

      expect(response.statusCode).toBe(200);
    });

    it('resolves client tokens with their organization and role (ANALYST by default)', async () => {
      const withRole = await gw.tokens.client('ci', ORG_ID, 'ORG_ADMIN');
      const withoutRole = await gw.tokens.client('ro', OTHER_ORG_ID);

      const session = await gw.app.inject({
        method: 'GET',
        url: '/api/session',
        headers: as(withRole, { 'x-org-id': OTHER_ORG_ID }),
      });
      expect(session.json()).toMatchObject({
        user: { id: 'client:ci', role: 'ORG_ADMIN' },
        org: { id: ORG_ID },
      });
      expect(gw.upstream.callsOf('resolveCaller')[0]?.request).toEqual({
        principal: {
          $case: 'client',
          value: {
            issuer: 'https://idp.test',
            subject: 'ci',
            orgId: ORG_ID,
            role: ProtoRole.ROLE_ORG_ADMIN,
          },
        },
        // A client token's organization is fixed; X-Org-Id is not passed on.
        orgId: '',
      });

      const refused = await gw.app.inject({ method: 'GET', url: '/api/invites', headers: as(withoutRole) });
      // The problem says which roles the route needs.
      expect(expectProblem(refused, 403, 'FORBIDDEN').detail).toBe('requires role ORG_ADMIN');
      expect(gw.upstream.callsOf('resolveCaller')[1]?.request).toMatchObject({
        principal: { value: { role: ProtoRole.ROLE_ANALYST } },
      });
    });

    it('passes a well-formed X-Org-Id to identity and refuses a malformed one', async () => {
      await gw.app.inject({
        method: 'GET',
        url: '/api/session',
        headers: as(admin, { 'x-org-id': OTHER_ORG_ID }),
      });
      expect(gw.upstream.callsOf('resolveCaller')[0]?.request).toMatchObject({
        principal: {
          $case: 'user',
          value: { subject: 'ada@example.com', email: 'ada@example.com', emailVerified: true, name: 'ada' },
        },
        orgId: OTHER_ORG_ID,
      });

      const response = await gw.app.inject({
        method: 'GET',
        url: '/api/session',
        headers: as(admin, { 'x-org-id': "1' or '1'='1" }),
      });
      const problem = expectProblem(response, 400, 'VALIDATION_FAILED');
      expect(problem.detail).toBe('X-Org-Id must be an organization id');
      expect(problem.errors).toEqual([{ path: 'headers.x-org-id', message: 'invalid id' }]);
      expect(gw.upstream.callsOf('resolveCaller')).toHaveLength(1);
    });

    it('passes identity errors of the caller resolution through (unknown organization → 404)', async () => {
      gw.upstream.identity.resolveCaller = async () => {
        throw new AppError('ORGANIZATION_NOT_FOUND', 'not a member of the requested organization');
      };
      expectProblem(
        await gw.app.inject({ method: 'GET', url: '/api/session', headers: as(admin) }),
        404,
        'ORGANIZATION_NOT_FOUND',
      );
    });
  });

  describe('request ids', () => {
    it('echoes a well-formed X-Request-Id and passes it upstream', async () => {
      const response = await gw.app.inject({
        method: 'GET',
        url: '/api/members',
        headers: as(admin, { 'x-request-id': 'req-123.abc:XYZ_9' }),
      });

      expect(response.statusCode).toBe(200);
      expect(response.headers['x-request-id']).toBe('req-123.abc:XYZ_9');
      expect(gw.upstream.calls.map((c) => c.requestId)).toEqual(['req-123.abc:XYZ_9', 'req-123.abc:XYZ_9']);
    });

    it.each([
      ['markup', '<script>alert(1)</script>'],
      ['spaces', 'a b'],
      ['too long', 'a'.repeat(65)],
      ['log injection', 'abc\\nlevel=error'],
    ])('replaces a hostile X-Request-Id (%s) with a fresh UUID, also in problems', async (_name, hostile) => {
      const response = await gw.app.inject({
        method: 'GET',
        url: '/api/nope',
        headers: { 'x-request-id': hostile },
      });

      expect(isUuid(String(response.headers['x-request-id']))).toBe(true);
      expect(response.json()).toMatchObject({ request_id: response.headers['x-request-id'] });
      expect(response.body).not.toContain(hostile);
    });

    it('generates one when none is sent', async () => {
      const response = await gw.app.inject({ method: 'GET', url: '/api/analytics/health' });
      expect(response.json()).toEqual({ status: 'ok' });
      expect(isUuid(String(response.headers['x-request-id']))).toBe(true);
    });
  });

  describe('accepting invites (no authentication, rate limited)', () => {
    it('returns the accepted invite and organization', async () => {
      const response = await gw.app.inject({
        method: 'POST',
        url: '/api/invites/accept',
        payload: { token: 'sts_inv_abc' },
      });

      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        status: 'accepted',
        email: 'grace@example.com',
        role: 'ANALYST',
        org: { id: ORG_ID, name: 'Acme' },
      });
      expect(gw.upstream.callsOf('acceptInvite')[0]?.request).toEqual({ token: 'sts_inv_abc' });
    });

    it('previews the invite the token would accept, apart from accepts in the rate limit', async () => {
      const limited = await startTestGateway({ RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: 2 });
      try {
        const call = (path: 'preview' | 'accept') =>
          limited.app.inject({
            method: 'POST',
            url: `/api/invites/${path}`,
            payload: { token: 'sts_inv_abc' },
            remoteAddress: '203.0.113.9',
          });
        const previewed = await call('preview');
        expect([previewed.statusCode, previewed.json()]).toEqual([
          200,
          {
            status: 'pending',
            email: 'grace@example.com',
            role: 'ANALYST',
            org: { id: ORG_ID, name: 'Acme' },
            expires_at: protoInvite().expiresAt!.toISOString(),
          },
        ]);
        expect(limited.upstream.callsOf('previewInvite').map((c) => c.request)).toEqual([
          { token: 'sts_inv_abc' },
        ]);
        expect(limited.upstream.callsOf('acceptInvite')).toEqual([]);
        expect((await call('preview')).statusCode).toBe(200);
        expectProblem(await call('preview'), 429, 'RATE_LIMITED');
        // Previews do not use up the address's accepts.
        expect((await call('accept')).statusCode).toBe(200);
        limited.upstream.identity.previewInvite = async () => {
          throw new AppError('INVITE_TOKEN_INVALID');
        };
        let addresses = 0;
        const other = (payload: object) =>
          limited.app.inject({
            method: 'POST',
            url: '/api/invites/preview',
            payload,
            remoteAddress: `203.0.113.${20 + addresses++}`,
          });
        expectProblem(await other({ token: 'sts_inv_used' }), 400, 'INVITE_TOKEN_INVALID');
        expectProblem(await other({ token: '' }), 400, 'VALIDATION_FAILED');
        expectProblem(await other({ token: 'sts_inv_x', org_id: ORG_ID }), 400, 'VALIDATION_FAILED');
      } finally {
        await limited.app.close();
      }
    });

    it('answers an invalid token with 400 INVITE_TOKEN_INVALID', async () => {
      gw.upstream.identity.acceptInvite = async () => {
        throw new AppError('INVITE_TOKEN_INVALID');
      };
      expectProblem(
        await gw.app.inject({
          method: 'POST',
          url: '/api/invites/accept',
          payload: { token: 'sts_inv_used' },
        }),
        400,
        'INVITE_TOKEN_INVALID',
      );
    });

    it.each<[string, false | number | string[]]>([
      ['false', false],
      ['true', 1],
      ['2', 2],
      ['10.0.0.0/8, 192.168.1.10', ['10.0.0.0/8', '192.168.1.10']],
      ['::1/128', ['::1/128']],
    ])('reads TRUST_PROXY=%s', (value, expected) => {
      expect(
        loadConfig(gatewayEnvSchema.pick({ TRUST_PROXY: true }), { TRUST_PROXY: value }).TRUST_PROXY,
      ).toEqual(expected);
    });

    it.each(['yes', '10.0.0.0/33', 'proxy.internal', '1.2.3.4/8/9'])('refuses TRUST_PROXY=%s', (value) => {
      expect(() => loadConfig(gatewayEnvSchema.pick({ TRUST_PROXY: true }), { TRUST_PROXY: value })).toThrow(
        /TRUST_PROXY/,
      );
    });

    it('believes only the configured proxies in X-Forwarded-For, so a client cannot pick its address', async () => {
      for (const trust of [1, ['203.0.113.7']] as const) {
        const limited = await startTestGateway({
          RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: 2,
          TRUST_PROXY: trust as number | string[],
        });
        try {
          // The proxy (203.0.113.7) appends the address it saw; the client forged the hops before it.
          const accept = (forged: string) =>
            limited.app.inject({
              method: 'POST',
              url: '/api/invites/accept',
              payload: { token: 'sts_inv_abc' },
              remoteAddress: '203.0.113.7',
              headers: { 'x-forwarded-for': `${forged}, 198.51.100.1` },
            });
          expect((await accept('10.0.0.1')).statusCode).toBe(200);
          expect((await accept('10.0.0.2')).statusCode).toBe(200);
          // Another forged first hop does not give a new allowance: the address is the proxy's hop, 198.51.100.1.
          expectProblem(await accept('10.0.0.3'), 429, 'RATE_LIMITED');
        } finally {
          await limited.app.close();
        }
      }
    });

    // Every per-address limit keys an IPv6 client by its /64 (clientAddressKey).
    it('limits an IPv6 client by its /64, which one subscriber picks addresses from at will', async () => {
      const limited = await startTestGateway({ RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: 2 });
      try {
        const accept = (remoteAddress: string) =>
          limited.app.inject({
            method: 'POST',
            url: '/api/invites/accept',
            payload: { token: 'sts_inv_abc' },
            remoteAddress,
          });
        expect((await accept('2001:db8:7:1::1')).statusCode).toBe(200);
        expect((await accept('2001:db8:7:1::2')).statusCode).toBe(200);
        expectProblem(await accept('2001:db8:7:1:abcd::3'), 429, 'RATE_LIMITED');
        // Another /64 has its own allowance.
        expect((await accept('2001:db8:7:2::1')).statusCode).toBe(200);
      } finally {
        await limited.app.close();
      }
    });

    it('allows RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE requests per client address, then 429 RATE_LIMITED', async () => {
      const limited = await startTestGateway({ RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: 3 });
      try {
        const accept = (remoteAddress = '203.0.113.7') =>
          limited.app.inject({
            method: 'POST',
            url: '/api/invites/accept',
            payload: { token: 'sts_inv_abc' },
            remoteAddress,
          });

        for (let i = 0; i < 3; i += 1) expect((await accept()).statusCode).toBe(200);
        const fourth = await accept();

        expect(expectProblem(fourth, 429, 'RATE_LIMITED').detail).toMatch(
          /^Too many requests; retry in \d+ s$/,
        );
        expect(Number(fourth.headers['retry-after'])).toBeGreaterThan(0);
        expect(limited.upstream.callsOf('acceptInvite')).toHaveLength(3);
        // Without TRUST_PROXY a client cannot pick its address with X-Forwarded-For.
        const spoofed = await limited.app.inject({
          method: 'POST',
          url: '/api/invites/accept',
          payload: { token: 'sts_inv_abc' },
          remoteAddress: '203.0.113.7',
          headers: { 'x-forwarded-for': '198.51.100.1' },
        });
        expectProblem(spoofed, 429, 'RATE_LIMITED');
        // Another address has its own allowance; authenticated routes are not limited.
        expect((await accept('203.0.113.8')).statusCode).toBe(200);
        const token = await limited.tokens.user('ada@example.com');
        for (let i = 0; i < 5; i += 1) {
          expect(
            (
              await limited.app.inject({
                method: 'GET',
                url: '/api/members',
                headers: as(token),
                remoteAddress: '203.0.113.7',
              })
            ).statusCode,
          ).toBe(200);
        }
      } finally {
        await limited.app.close();
      }
    });
  });

  describe('responses', () => {
    it('serializes only the contract fields, whatever upstream adds', async () => {
      gw.upstream.identity.listMembers = async () => ({
        members: [
          { ...protoMember(), passwordHash: 'bcrypt$secret', internalNote: 'vip' } as ReturnType<
            typeof protoMember
          >,
        ],
        nextCursor: '',
      });
      const getLicense = gw.upstream.billing.getLicense;
      gw.upstream.billing.getLicense = async (request) => {
        const { license } = await getLicense(request);
        return { license: license && ({ ...license, stripeCustomerId: 'cus_secret' } as typeof license) };
      };

      const members = await gw.app.inject({ method: 'GET', url: '/api/members', headers: as(admin) });
      expect(members.json()).toEqual([
        {
          id: 'm-1',
          email: 'ada@example.com',
          name: 'Ada',
          role: 'ORG_ADMIN',
          dashboard_access: true,
          joined_at: '2026-03-01T12:00:00.000Z',
        },
      ]);
      expect(members.body).not.toMatch(/secret|vip|userId|u-1/);

      const session = await gw.app.inject({ method: 'GET', url: '/api/session', headers: as(admin) });
      expect(session.json()).toEqual({
        user: {
          id: 'user:ada@example.com',
          email: 'ada@example.com',
          name: 'ada',
          role: 'ORG_ADMIN',
          dashboard_access: true,
        },
        org: { id: ORG_ID, name: 'Acme', domain: null },
        license: {
          plan: 'none',
          status: 'pending',
          billing_cycle: 'monthly',
          expires_at: '2026-03-15T12:00:00.000Z',
        },
      });
      expect(session.body).not.toContain('cus_secret');
    });

    it('sets a Link header for the next page and passes limit and cursor upstream', async () => {
      const requests: unknown[] = [];
      gw.upstream.identity.listMembers = async (request) => {
        requests.push(request);
        return { members: [protoMember()], nextCursor: 'next/cur+sor=' };
      };

      const response = await gw.app.inject({
        method: 'GET',
        url: '/api/members?limit=1&cursor=prev',
        headers: as(admin),
      });

      expect(response.headers.link).toBe('</api/members?limit=1&cursor=next%2Fcur%2Bsor%3D>; rel="next"');
      const next = new URL(/^<([^>]+)>/.exec(String(response.headers.link))?.[1] ?? '', 'http://x');
      expect(next.searchParams.get('cursor')).toBe('next/cur+sor=');

      gw.upstream.identity.listMembers = async (request) => {
        requests.push(request);
        return { members: [], nextCursor: '' };
      };
      const last = await gw.app.inject({
        method: 'GET',
        url: '/api/members?cursor=next',
        headers: as(admin),
      });
      expect(last.headers.link).toBeUndefined();
      expect(requests).toEqual([
        { orgId: ORG_ID, limit: 1, cursor: 'prev' },
        { orgId: ORG_ID, limit: 0, cursor: 'next' },
      ]);
    });

    it('lists notifications with X-Unread-Count and the unread filter', async () => {
      const response = await gw.app.inject({
        method: 'GET',
        url: '/api/notifications?unread=true',
        headers: as(admin),
      });

      expect(response.statusCode).toBe(200);
      expect(response.headers['x-unread-count']).toBe('1');
      expect(response.json()).toEqual([
        {
          id: 'n-1',
          type: 'member.joined',
          message: 'Grace (grace@example.com) joined as ANALYST',
          read: false,
          created_at: '2026-03-01T12:00:00.000Z',
        },
      ]);
      expect(gw.upstream.callsOf('listNotifications')[0]?.request).toEqual({
        orgId: ORG_ID,
        userId: 'user:ada@example.com',
        limit: 0,
        cursor: '',
        unreadOnly: true,
      });
    });

    it('creates invites (201) with the proto role and the inviting member, and deletes with 204', async () => {
      const created = await gw.app.inject({
        method: 'POST',
        url: '/api/invites',
        headers: as(admin),
        payload: { email: 'Grace@Example.com', role: 'APP_USER' },
      });
      expect(created.statusCode).toBe(201);
      expect(created.json()).toEqual({
        id: 'i-1',
        email: 'grace@example.com',
        role: 'APP_USER',
        created_at: '2026-03-01T12:00:00.000Z',
        expires_at: '2026-03-08T12:00:00.000Z',
        status: 'pending',
        accepted_at: null,
      });
      expect(gw.upstream.callsOf('createInvite')[0]?.request).toEqual({
        orgId: ORG_ID,
        email: 'Grace@Example.com',
        role: ProtoRole.ROLE_APP_USER,
        invitedByMemberId: 'member:ada@example.com',
      });

      const revoked = await gw.app.inject({ method: 'DELETE', url: '/api/invites/i-1', headers: as(admin) });
      expect(revoked.statusCode).toBe(204);
      expect(revoked.body).toBe('');
      const removed = await gw.app.inject({ method: 'DELETE', url: '/api/members/m-2', headers: as(admin) });
      expect(removed.statusCode).toBe(204);
      expect(gw.upstream.callsOf('removeMember')[0]?.request).toEqual({ orgId: ORG_ID, memberId: 'm-2' });
    });

    it('patches a member with only the fields sent', async () => {
      const response = await gw.app.inject({
        method: 'PATCH',
        url: '/api/members/m-2',
        headers: as(admin),
        payload: { dashboard_access: false },
      });
      expect(response.statusCode).toBe(200);
      expect(gw.upstream.callsOf('updateMember')[0]?.request).toEqual({
        orgId: ORG_ID,
        memberId: 'm-2',
        role: undefined,
        dashboardAccess: false,
      });
    });
  });

  describe('devices and enrollment', () => {
    /** An upstream that enrolls code GOOD and refuses every other code as a guess would be refused. */
    const scriptEnrollment = (target: TestGateway) => {
      target.upstream.enrollment.enrollDevice = async (request) => {
        target.upstream.calls.push({ method: 'enrollDevice', request, requestId: undefined });
        if (request.code !== 'GOOD') throw new AppError('ENROLLMENT_CODE_INVALID');
        return { deviceId: 'd-1', orgId: ORG_ID, deviceToken: 'sts_dev_x', reEnrolled: false };
      };
    };
    /** Runs `test` against a gateway of its own with these limits and the scripted upstream. */
    const withLimits = async (
      config: Parameters<typeof startTestGateway>[0],
      test: (target: TestGateway) => Promise<void>,
    ) => {
      const target = await startTestGateway(config);
      try {
        scriptEnrollment(target);
        await test(target);
      } finally {
        await target.app.close();
      }
    };
    const enrollFrom = (target: TestGateway, address: string, key: string | null, code: string) =>
      target.app.inject({
        method: 'POST',
        url: '/api/device/enroll',
        remoteAddress: address,
        headers: key === null ? {} : { 'x-enrollment-key': key },
        payload: { code, machine_id: 'm-1', hostname: 'alpha' },
      });

    it('throttles failed enrollments per address, never successful ones', async () => {
      await withLimits({ ENROLL_FAILURES_PER_MINUTE: 3 }, async (limited) => {
        for (let i = 0; i < 5; i++)
          expect((await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
        for (let i = 0; i < 3; i++)
          expectProblem(
            await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', `GUESS-${i}`),
            400,
            'ENROLLMENT_CODE_INVALID',
          );

        const blocked = await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', 'GOOD');
        expectProblem(blocked, 429, 'RATE_LIMITED');
        // The pinned clock is 30 s into its minute: the window ends in 30 s.
        expect(blocked.headers['retry-after']).toBe('30');
        // The address is blocked with any key; the key still works from elsewhere.
        expectProblem(await enrollFrom(limited, '10.0.0.1', 'sts_ek_b', 'GOOD'), 429, 'RATE_LIMITED');
        expect((await enrollFrom(limited, '10.0.0.2', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
        // Blocked requests never reach the enrollment service.
        expect(limited.upstream.callsOf('enrollDevice')).toHaveLength(5 + 3 + 1);
        // The next minute starts afresh.
        limited.clock.nowMs += 30_000;
        expect((await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
      });
    });

    it("does not let guessers lock an organization's key for its agents (issue 26)", async () => {
      await withLimits(
        { ENROLL_FAILURES_PER_MINUTE: 20, ENROLL_KEY_FAILURES_PER_MINUTE: 30 },
        async (limited) => {
          // Twenty bad codes a minute used to lock the key for everyone; now only their address waits.
          for (let i = 0; i < 20; i++)
            expect((await enrollFrom(limited, '203.0.113.1', 'sts_ek_a', `GUESS-${i}`)).statusCode).toBe(400);
          expectProblem(await enrollFrom(limited, '203.0.113.1', 'sts_ek_a', 'GOOD'), 429, 'RATE_LIMITED');
          expect((await enrollFrom(limited, '198.51.100.7', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
          // Past the key's ceiling (guessers spread over networks), networks that failed with it wait, every
          // address of their /24...
          for (let i = 0; i < 10; i++)
            expect((await enrollFrom(limited, `192.0.${10 + i}.1`, 'sts_ek_a', 'GUESS')).statusCode).toBe(
              400,
            );
          expectProblem(await enrollFrom(limited, '192.0.10.1', 'sts_ek_a', 'GOOD'), 429, 'RATE_LIMITED');
          expectProblem(await enrollFrom(limited, '192.0.10.200', 'sts_ek_a', 'GOOD'), 429, 'RATE_LIMITED');
          // ...with that key only; and agents of networks that have not failed go on enrolling.
          expect((await enrollFrom(limited, '192.0.10.1', 'sts_ek_b', 'GOOD')).statusCode).toBe(200);
          for (let i = 0; i < 5; i++)
            expect((await enrollFrom(limited, `198.51.100.${20 + i}`, 'sts_ek_a', 'GOOD')).statusCode).toBe(
              200,
            );
          // A fresh network gets one try past the ceiling, then waits too: an IPv4 /24, or an IPv6 /48
          // whatever /64s of it the guesser picks (issue 26 review: by /64, a /48 was 65,536 tries).
          expect((await enrollFrom(limited, '192.0.99.1', 'sts_ek_a', 'GUESS')).statusCode).toBe(400);
          expectProblem(await enrollFrom(limited, '192.0.99.2', 'sts_ek_a', 'GOOD'), 429, 'RATE_LIMITED');
          const fromOneSite = [];
          for (let i = 0; i < 20; i++)
            fromOneSite.push(
              (await enrollFrom(limited, `2001:db8:5:${i.toString(16)}::1`, 'sts_ek_a', 'GUESS')).statusCode,
            );
          expect(fromOneSite).toEqual([400, ...Array<number>(19).fill(429)]);
          expect((await enrollFrom(limited, '2001:db8:6::1', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
          // At twice the ceiling (32 failures so far, 28 more fresh networks) the key answers no one until
          // the minute ends, not even a network that never failed; other keys are not concerned.
          for (let i = 0; i < 28; i++)
            expect((await enrollFrom(limited, `198.18.${i}.1`, 'sts_ek_a', 'GUESS')).statusCode).toBe(400);
          expectProblem(await enrollFrom(limited, '198.18.200.1', 'sts_ek_a', 'GUESS'), 429, 'RATE_LIMITED');
          expectProblem(await enrollFrom(limited, '198.51.100.30', 'sts_ek_a', 'GOOD'), 429, 'RATE_LIMITED');
          expect((await enrollFrom(limited, '198.51.100.30', 'sts_ek_b', 'GOOD')).statusCode).toBe(200);
          limited.clock.nowMs += 30_000;
          expect((await enrollFrom(limited, '198.51.100.30', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
          // An IPv6 guesser is one address per /64 for the limit per address, whatever addresses it picks in it.
          for (let i = 0; i < 20; i++)
            await enrollFrom(limited, `2001:db8:7:6::${(i + 1).toString(16)}`, 'sts_ek_c', 'GUESS');
          expectProblem(
            await enrollFrom(limited, '2001:db8:7:6:ffff::1', 'sts_ek_c', 'GOOD'),
            429,
            'RATE_LIMITED',
          );
          expect((await enrollFrom(limited, '2001:db8:7:7::1', 'sts_ek_c', 'GOOD')).statusCode).toBe(200);
        },
      );
    });

    it('counts malformed requests and answers of a machine enrolled elsewhere as failed enrollments (issue 41)', async () => {
      await withLimits({ ENROLL_FAILURES_PER_MINUTE: 3 }, async (limited) => {
        const upstream = limited.upstream.enrollment.enrollDevice;
        limited.upstream.enrollment.enrollDevice = async (request) =>
          request.machineId === 'm-elsewhere'
            ? Promise.reject(new AppError('MACHINE_ENROLLED_ELSEWHERE'))
            : upstream(request);
        const post = (payload: unknown) =>
          limited.app.inject({
            method: 'POST',
            url: '/api/device/enroll',
            remoteAddress: '10.0.0.9',
            headers: { 'x-enrollment-key': 'sts_ek_a' },
            payload: payload as Record<string, unknown>,
          });
        expectProblem(
          await post({ code: 'GOOD', machine_id: 'm-elsewhere', hostname: 'alpha' }),
          409,
          'MACHINE_ENROLLED_ELSEWHERE',
        );
        expectProblem(await post({ code: 'GOOD', machine_id: 'm-1' }), 400, 'VALIDATION_FAILED');
        expectProblem(
          await post({ code: 'GOOD', machine_id: 'm-elsewhere', hostname: 'b' }),
          409,
          'MACHINE_ENROLLED_ELSEWHERE',
        );
        // Three failures: the address waits, and asking about other machine ids gets nothing more.
        expectProblem(
          await post({ code: 'GOOD', machine_id: 'm-elsewhere', hostname: 'c' }),
          429,
          'RATE_LIMITED',
        );
        expectProblem(
          await post({ code: 'GOOD', machine_id: 'm-1', hostname: 'alpha' }),
          429,
          'RATE_LIMITED',
        );
        expect(limited.upstream.callsOf('enrollDevice')).toHaveLength(0);
      });
    });

    it('answers 400 to metadata nested too deep for JSON.stringify, before any call (issue 41)', async () => {
      await withLimits({}, async (limited) => {
        const levels = 32_000;
        const response = await limited.app.inject({
          method: 'POST',
          url: '/api/device/enroll',
          headers: { 'x-enrollment-key': 'sts_ek_a', 'content-type': 'application/json' },
          payload: `{"code":"GOOD","machine_id":"m-1","hostname":"alpha","metadata":{"a":${'['.repeat(levels)}${']'.repeat(levels)}}}`,
        });
        expectProblem(response, 400, 'VALIDATION_FAILED');
        expect(response.json<{ errors: { path: string; message: string }[] }>().errors).toEqual([
          { path: 'body.metadata', message: 'must not nest deeper than 8 levels' },
        ]);
        expect(limited.upstream.callsOf('enrollDevice')).toHaveLength(0);
      });
    });

    it('passes the device token of a re-enrolling agent to the enrollment service', async () => {
      await withLimits({}, async (limited) => {
        const response = await limited.app.inject({
          method: 'POST',
          url: '/api/device/enroll',
          headers: { 'x-enrollment-key': 'sts_ek_a', 'x-device-token': 'sts_dt_current' },
          payload: { code: 'GOOD', machine_id: 'm-1', hostname: 'alpha' },
        });
        expect(response.statusCode).toBe(200);
        await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', 'GOOD');
        expect(
          limited.upstream
            .callsOf('enrollDevice')
            .map((c) => (c.request as { deviceToken: string }).deviceToken),
        ).toEqual(['sts_dt_current', '']);
      });
    });

    it('counts requests without an enrollment key as failures of their address', async () => {
      await withLimits({ ENROLL_FAILURES_PER_MINUTE: 2 }, async (limited) => {
        expectProblem(await enrollFrom(limited, '10.0.0.1', null, 'GOOD'), 401, 'ENROLLMENT_KEY_INVALID');
        expectProblem(await enrollFrom(limited, '10.0.0.1', '', 'GOOD'), 401, 'ENROLLMENT_KEY_INVALID');
        expectProblem(await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', 'GOOD'), 429, 'RATE_LIMITED');
        expect((await enrollFrom(limited, '10.0.0.2', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
        expect(limited.upstream.callsOf('enrollDevice')).toHaveLength(1);
      });
    });

    it('caps all enrollment requests per address (ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE)', async () => {
      await withLimits({ ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: 3 }, async (limited) => {
        for (let i = 0; i < 3; i++)
          expect((await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
        expectProblem(await enrollFrom(limited, '10.0.0.1', 'sts_ek_a', 'GOOD'), 429, 'RATE_LIMITED');
        expect((await enrollFrom(limited, '10.0.0.2', 'sts_ek_a', 'GOOD')).statusCode).toBe(200);
        expect(limited.upstream.callsOf('enrollDevice')).toHaveLength(4);
      });
    });

    it('bounds hostnames in characters of any script and refuses control characters before the upstream call', async () => {
      scriptEnrollment(gw);
      const enroll = (hostname: string) =>
        gw.app.inject({
          method: 'POST',
          url: '/api/device/enroll',
          headers: { 'x-enrollment-key': 'sts_ek_a' },
          payload: { code: 'GOOD', machine_id: 'm-1', hostname },
        });
      // 255 characters outside the Basic Multilingual Plane are 510 UTF-16 units.
      expect((await enroll('🖥'.repeat(255))).statusCode).toBe(200);
      expect((await enroll('主'.repeat(255))).statusCode).toBe(200);
      for (const hostname of [
        '🖥'.repeat(256),
        'a'.repeat(256),
        'alpha\u0085beta',
        'alpha\u0007',
        'alpha\u007f',
        '',
      ]) {
        const body = expectProblem(await enroll(hostname), 400, 'VALIDATION_FAILED');
        expect(body.errors).toEqual([expect.objectContaining({ path: 'body.hostname' })]);
      }
      expect(gw.upstream.callsOf('enrollDevice')).toHaveLength(2);
    });

    it('lets ANALYST list, read, disable and enable devices, only ORG_ADMIN delete them, and APP_USER none of it', async () => {
      const analyst = await gw.tokens.user('ana@example.com');
      const appUser = await gw.tokens.user('app@example.com');
      gw.upstream.memberships.set('ana@example.com', { role: ProtoRole.ROLE_ANALYST, dashboardAccess: true });
      gw.upstream.memberships.set('app@example.com', {
        role: ProtoRole.ROLE_APP_USER,
        dashboardAccess: true,
      });
      gw.upstream.enrollment.listDevices = async () => ({ devices: [], nextCursor: '' });
      gw.upstream.enrollment.getDevice = async (request) => {
        gw.upstream.calls.push({ method: 'getDevice', request, requestId: undefined });
        return {
          device: {
            id: request.deviceId,
            name: 'alpha',
            machineId: 'm-1',
            status: DeviceStatus.DEVICE_STATUS_DISABLED,
            enrolledAt: new Date('2026-03-01T12:00:00.000Z'),
            lastSeenAt: new Date('2026-03-02T08:30:00.000Z'),
            metadataJson: '{"os":"linux"}',
          },
        };
      };
      for (const method of ['disableDevice', 'enableDevice', 'deleteDevice'] as const) {
        gw.upstream.enrollment[method] = async (request) => {
          gw.upstream.calls.push({ method, request, requestId: undefined });
          return {};
        };
      }
      const status = async (token: string, method: 'GET' | 'POST' | 'DELETE', url: string) =>
        (await gw.app.inject({ method, url, headers: as(token) })).statusCode;
      const routes = [
        ['GET', '/api/devices'],
        ['GET', '/api/devices/d-1'],
        ['POST', '/api/devices/d-1/disable'],
        ['POST', '/api/devices/d-1/enable'],
        ['DELETE', '/api/devices/d-1'],
      ] as const;
      for (const [method, url] of routes)
        expect([method, url, await status(appUser, method, url)]).toEqual([method, url, 403]);
      expect(gw.upstream.calls.filter((call) => call.method.endsWith('Device'))).toEqual([]);

      expect(await status(analyst, 'GET', '/api/devices')).toBe(200);
      const one = await gw.app.inject({ method: 'GET', url: '/api/devices/d-1', headers: as(analyst) });
      expect([one.statusCode, one.json()]).toEqual([
        200,
        {
          id: 'd-1',
          name: 'alpha',
          machine_id: 'm-1',
          status: 'disabled',
          enrolled_at: '2026-03-01T12:00:00.000Z',
          last_seen_at: '2026-03-02T08:30:00.000Z',
          metadata: { os: 'linux' },
        },
      ]);
      expect(await status(analyst, 'POST', '/api/devices/d-1/disable')).toBe(204);
      expect(await status(analyst, 'POST', '/api/devices/d-1/enable')).toBe(204);
      expect(await status(analyst, 'DELETE', '/api/devices/d-1')).toBe(403);
      expect(await status(admin, 'DELETE', '/api/devices/d-1')).toBe(204);
      expect(
        gw.upstream.calls.filter((call) => call.method.endsWith('Device')).map((call) => call.method),
      ).toEqual(['getDevice', 'disableDevice', 'enableDevice', 'deleteDevice']);
    });

    it('links the next page of devices, keeping the filters', async () => {
      gw.upstream.enrollment.listDevices = async (request) => ({
        devices: [],
        nextCursor: request.cursor ? '' : 'c2',
      });
      const first = await gw.app.inject({
        method: 'GET',
        url: '/api/devices?status=active&q=ws-0&limit=10',
        headers: as(admin),
      });
      expect(first.statusCode).toBe(200);
      const link = /^<([^>]+)>; rel="next"$/.exec(String(first.headers.link));
      expect(link).not.toBeNull();
      const next = new URL(link?.[1] ?? '', 'http://gateway');
      expect(next.pathname).toBe('/api/devices');
      expect(Object.fromEntries(next.searchParams)).toEqual({
        status: 'active',
        q: 'ws-0',
        limit: '10',
        cursor: 'c2',
      });
      const last = await gw.app.inject({
        method: 'GET',
        url: `${next.pathname}${next.search}`,
        headers: as(admin),
      });
      expect(last.statusCode).toBe(200);
      expect(last.headers.link).toBeUndefined();
    });

    it('sends the enrollment metadata as one JSON text ({} when absent) and bounds it at 16 KiB', async () => {
      gw.upstream.enrollment.enrollDevice = async (request) => {
        gw.upstream.calls.push({ method: 'enrollDevice', request, requestId: undefined });
        return { deviceId: 'd-1', orgId: ORG_ID, deviceToken: 'sts_dev_x', reEnrolled: false };
      };
      const enroll = (payload: object) =>
        gw.app.inject({
          method: 'POST',
          url: '/api/device/enroll',
          headers: { 'x-enrollment-key': 'sts_ek_x' },
          payload,
        });
      const body = { code: 'ABCD-EFGH', machine_id: 'm-1', hostname: 'alpha' };

      const enrolled = await enroll({ ...body, metadata: { os: 'linux', tags: ['a', 'b'] } });
      expect(enrolled.json()).toEqual({
        device_id: 'd-1',
        org_id: ORG_ID,
        device_token: 'sts_dev_x',
        re_enrolled: false,
      });
      await enroll(body);
      expect(gw.upstream.callsOf('enrollDevice').map((call) => call.request)).toEqual([
        {
          enrollmentKey: 'sts_ek_x',
          code: 'ABCD-EFGH',
          machineId: 'm-1',
          hostname: 'alpha',
          metadataJson: '{"os":"linux","tags":["a","b"]}',
          deviceToken: '',
        },
        {
          enrollmentKey: 'sts_ek_x',
          code: 'ABCD-EFGH',
          machineId: 'm-1',
          hostname: 'alpha',
          metadataJson: '{}',
          deviceToken: '',
        },
      ]);

      // {"x":"…"} is 8 bytes around the value: 16,384 bytes in all is the most allowed.
      expect((await enroll({ ...body, metadata: { x: 'a'.repeat(16_384 - 8) } })).statusCode).toBe(200);
      const tooLarge = await enroll({ ...body, metadata: { x: 'a'.repeat(16_384 - 7) } });
      expect(expectProblem(tooLarge, 400, 'VALIDATION_FAILED').errors).toEqual([
        { path: 'body.metadata', message: 'must be at most 16384 bytes as JSON' },
      ]);
      expect(gw.upstream.callsOf('enrollDevice')).toHaveLength(3);
    });

    it('serves the enrollment key and codes to ORG_ADMIN only, in contract shapes', async () => {
      const created = new Date('2026-03-01T12:00:00.000Z');
      gw.upstream.enrollment.getEnrollmentKey = async () => ({
        key: { key: 'sts_ek_1', createdAt: created },
      });
      gw.upstream.enrollment.rotateEnrollmentKey = async () => ({
        key: { key: 'sts_ek_2', createdAt: created },
      });
      gw.upstream.enrollment.revokeEnrollmentKey = async () => ({});
      gw.upstream.enrollment.createEnrollmentCodes = async (request) => ({
        codes: Array.from({ length: request.count }, (_, i) => ({
          code: `CODE-000${i}`,
          expiresAt: created,
        })),
      });
      gw.upstream.enrollment.emailEnrollmentCode = async () => ({ expiresAt: created });

      const analyst = await gw.tokens.user('ana@example.com');
      gw.upstream.memberships.set('ana@example.com', { role: ProtoRole.ROLE_ANALYST, dashboardAccess: true });
      const routes = [
        ['GET', '/api/enrollment-key'],
        ['POST', '/api/enrollment-key'],
        ['DELETE', '/api/enrollment-key'],
        ['POST', '/api/enrollment-codes'],
        ['POST', '/api/enrollment-codes/email'],
      ] as const;
      for (const [method, url] of routes) {
        expectProblem(
          await gw.app.inject({ method, url, headers: as(analyst), payload: { email: 'x@example.com' } }),
          403,
          'FORBIDDEN',
        );
      }

      const at = '2026-03-01T12:00:00.000Z';
      expect(
        (await gw.app.inject({ method: 'GET', url: '/api/enrollment-key', headers: as(admin) })).json(),
      ).toEqual({ key: 'sts_ek_1', created_at: at });
      expect(
        (await gw.app.inject({ method: 'POST', url: '/api/enrollment-key', headers: as(admin) })).json(),
      ).toEqual({ key: 'sts_ek_2', created_at: at });
      expect(
        (await gw.app.inject({ method: 'DELETE', url: '/api/enrollment-key', headers: as(admin) }))
          .statusCode,
      ).toBe(204);
      expect(
        (
          await gw.app.inject({
            method: 'POST',
            url: '/api/enrollment-codes',
            headers: as(admin),
            payload: { count: 2 },
          })
        ).json(),
      ).toEqual({
        codes: [
          { code: 'CODE-0000', expires_at: at },
          { code: 'CODE-0001', expires_at: at },
        ],
      });
      expectProblem(
        await gw.app.inject({
          method: 'POST',
          url: '/api/enrollment-codes',
          headers: as(admin),
          payload: { count: 101 },
        }),
        400,
        'VALIDATION_FAILED',
      );
      const emailed = await gw.app.inject({
        method: 'POST',
        url: '/api/enrollment-codes/email',
        headers: as(admin),
        payload: { email: 'Ops@Example.com' },
      });
      expect(emailed.json()).toEqual({ email: 'ops@example.com', expires_at: at });

      gw.upstream.enrollment.getEnrollmentKey = async () => ({
        key: { key: 'sts_ek_1', createdAt: undefined },
      });
      gw.upstream.enrollment.createEnrollmentCodes = async () => ({
        codes: [{ code: 'CODE-0000', expiresAt: undefined }],
      });
      gw.upstream.enrollment.emailEnrollmentCode = async () => ({ expiresAt: undefined });
      expectProblem(
        await gw.app.inject({ method: 'GET', url: '/api/enrollment-key', headers: as(admin) }),
        500,
        'INTERNAL',
      );
      expectProblem(
        await gw.app.inject({ method: 'POST', url: '/api/enrollment-codes', headers: as(admin) }),
        500,
        'INTERNAL',
      );
      expectProblem(
        await gw.app.inject({
          method: 'POST',
          url: '/api/enrollment-codes/email',
          headers: as(admin),
          payload: { email: 'ops@example.com' },
        }),
        500,
        'INTERNAL',
      );
    });

    it('takes an e-mailed code from the quota first, and gives the place back only when it was refused (issue 26)', async () => {
      const created = new Date('2026-03-01T12:00:00.000Z');
      const emailCode = () =>
        gw.app.inject({
          method: 'POST',
          url: '/api/enrollment-codes/email',
          headers: as(admin),
          payload: { email: 'Ops@Example.com' },
        });
      gw.upstream.enrollment.emailEnrollmentCode = async (request) => {
        gw.upstream.calls.push({ method: 'emailEnrollmentCode', request, requestId: undefined });
        return { expiresAt: created };
      };
      expect((await emailCode()).statusCode).toBe(200);
      expect(gw.upstream.calls.map((c) => c.method).filter((m) => m !== 'resolveCaller')).toEqual([
        'reserveOutboundEmail',
        'emailEnrollmentCode',
      ]);
      expect(gw.upstream.callsOf('reserveOutboundEmail')[0]?.request).toEqual({
        orgId: ORG_ID,
        email: 'Ops@Example.com',
      });

      // Over quota: 429, and the enrollment service is not asked to make or send anything.
      gw.upstream.identity.reserveOutboundEmail = async () => {
        throw new AppError('RATE_LIMITED', 'this organization has sent its 50 e-mails for today (UTC)');
      };
      expectProblem(await emailCode(), 429, 'RATE_LIMITED');
      expect(gw.upstream.callsOf('emailEnrollmentCode')).toHaveLength(1);

      // Refused by enrollment (no key): the place is given back.
      gw.upstream.identity.reserveOutboundEmail = async (request) => {
        gw.upstream.calls.push({ method: 'reserveOutboundEmail', request, requestId: undefined });
        return { reservationId: 'r-2' };
      };
      gw.upstream.enrollment.emailEnrollmentCode = async () => {
        throw new AppError('ENROLLMENT_KEY_REQUIRED');
      };
      expectProblem(await emailCode(), 409, 'ENROLLMENT_KEY_REQUIRED');
      expect(gw.upstream.callsOf('releaseOutboundEmail').map((c) => c.request)).toEqual([
        { orgId: ORG_ID, reservationId: 'r-2' },
      ]);
      // An unknown outcome (timeout): the e-mail may have been requested, so the place stays taken.
      gw.upstream.enrollment.emailEnrollmentCode = async () => {
        throw new AppError('DEADLINE_EXCEEDED');
      };
      expectProblem(await emailCode(), 504, 'DEADLINE_EXCEEDED');
      expect(gw.upstream.callsOf('releaseOutboundEmail')).toHaveLength(1);
    });

    it('lets ORG_ADMIN alone allow a device to re-enroll without its token', async () => {
      gw.upstream.enrollment.allowReEnrollment = async (request) => {
        gw.upstream.calls.push({ method: 'allowReEnrollment', request, requestId: undefined });
        if (request.deviceId !== 'd-1') throw new AppError('DEVICE_NOT_FOUND');
        return { allowedUntil: new Date('2026-03-02T12:00:00.000Z') };
      };
      const allow = (token: string, deviceId = 'd-1') =>
        gw.app.inject({ method: 'POST', url: `/api/devices/${deviceId}/re-enrollment`, headers: as(token) });
      const allowed = await allow(admin);
      expect([allowed.statusCode, allowed.json()]).toEqual([
        200,
        { device_id: 'd-1', allowed_until: '2026-03-02T12:00:00.000Z' },
      ]);
      expect(gw.upstream.callsOf('allowReEnrollment')[0]?.request).toEqual({
        orgId: ORG_ID,
        deviceId: 'd-1',
      });
      expectProblem(await allow(admin, 'd-2'), 404, 'DEVICE_NOT_FOUND');
      const analyst = await gw.tokens.user('ana@example.com');
      gw.upstream.memberships.set('ana@example.com', { role: ProtoRole.ROLE_ANALYST, dashboardAccess: true });
      expectProblem(await allow(analyst), 403, 'FORBIDDEN');
      expect(gw.upstream.callsOf('allowReEnrollment')).toHaveLength(2);
    });

    it('lists devices as pre-written JSON, with the status filter in proto terms', async () => {
      const requests: unknown[] = [];
      gw.upstream.enrollment.listDevices = async (request) => {
        requests.push(request);
        return {
          devices: [
            {
              id: 'd-1',
              name: 'alpha',
              machineId: 'm-1',
              status: DeviceStatus.DEVICE_STATUS_DISABLED,
              enrolledAt: AT,
              lastSeenAt: undefined,
              metadataJson: '{"os":"linux"}',
            },
          ],
          nextCursor: '',
        };
      };
      const response = await gw.app.inject({
        method: 'GET',
        url: '/api/devices?status=disabled&q=alp',
        headers: as(admin),
      });
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(response.json()).toEqual([
        {
          id: 'd-1',
          name: 'alpha',
          machine_id: 'm-1',
          status: 'disabled',
          enrolled_at: '2026-03-01T12:00:00.000Z',
          last_seen_at: '2026-03-01T12:00:00.000Z',
          metadata: { os: 'linux' },
        },
      ]);
      await gw.app.inject({ method: 'GET', url: '/api/devices', headers: as(admin) });
      expect(requests).toEqual([
        { orgId: ORG_ID, limit: 0, cursor: '', status: DeviceStatus.DEVICE_STATUS_DISABLED, query: 'alp' },
        { orgId: ORG_ID, limit: 0, cursor: '', status: DeviceStatus.DEVICE_STATUS_UNSPECIFIED, query: '' },
      ]);
      expectProblem(
        await gw.app.inject({ method: 'GET', url: '/api/devices?status=gone', headers: as(admin) }),
        400,
        'VALIDATION_FAILED',
      );
    });

    it('disables and enables a device through the matching upstream call', async () => {
      gw.upstream.enrollment.disableDevice = async (request) => {
        gw.upstream.calls.push({ method: 'disableDevice', request, requestId: undefined });
        return {};
      };
      gw.upstream.enrollment.enableDevice = async (request) => {
        gw.upstream.calls.push({ method: 'enableDevice', request, requestId: undefined });
        return {};
      };
      expect(
        (await gw.app.inject({ method: 'POST', url: '/api/devices/d-1/disable', headers: as(admin) }))
          .statusCode,
      ).toBe(204);
      expect(
        (await gw.app.inject({ method: 'POST', url: '/api/devices/d-2/enable', headers: as(admin) }))
          .statusCode,
      ).toBe(204);
      expect(gw.upstream.calls.filter((call) => call.method.endsWith('ableDevice'))).toEqual([
        { method: 'disableDevice', request: { orgId: ORG_ID, deviceId: 'd-1' }, requestId: undefined },
        { method: 'enableDevice', request: { orgId: ORG_ID, deviceId: 'd-2' }, requestId: undefined },
      ]);
    });
  });

  describe('OpenAPI', () => {
    it('serves an OpenAPI 3.1.0 document with bearerAuth on protected routes only', async () => {
      const response = await gw.app.inject({ method: 'GET', url: '/docs/json' });
      expect(response.statusCode).toBe(200);
      const doc = response.json<{
        openapi: string;
        components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
        paths: Record<string, Record<string, { security?: unknown; responses: Record<string, unknown> }>>;
      }>();

      expect(doc.openapi).toBe('3.1.0');
      expect(doc.components.securitySchemes.bearerAuth).toEqual({
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
      });
      expect(doc.paths['/api/members']?.get?.security).toEqual([{ bearerAuth: [] }]);
      expect(doc.paths['/api/invites/accept']?.post?.security).toBeUndefined();
      expect(Object.keys(doc.paths['/api/invites/accept']?.post?.responses ?? {})).toEqual(
        expect.arrayContaining(['200', '400', '429']),
      );
      expect(Object.keys(doc.components.schemas)).toEqual(
        expect.arrayContaining(['Member', 'Invite', 'Problem', 'Session']),
      );
    });
  });
});

describe('gateway caches', () => {
  it('reuses a resolved caller and a license within their TTL', async () => {
    const gw = await startTestGateway({}, { CALLER_CACHE_TTL_MS: 60_000, LICENSE_CACHE_TTL_MS: 60_000 });
    try {
      const token = await gw.tokens.user('ada@example.com');
      for (let i = 0; i < 3; i += 1) {
        const response = await gw.app.inject({
          method: 'GET',
          url: '/api/session',
          headers: { authorization: `Bearer ${token}` },
        });
        expect(response.statusCode).toBe(200);
      }
      expect(gw.upstream.callsOf('resolveCaller')).toHaveLength(1);
      expect(gw.upstream.callsOf('getLicense')).toHaveLength(1);
      const other = await gw.tokens.user('grace@example.com');
      await gw.app.inject({
        method: 'GET',
        url: '/api/session',
        headers: { authorization: `Bearer ${other}` },
      });
      expect(gw.upstream.callsOf('resolveCaller')).toHaveLength(2);
    } finally {
      await gw.app.close();
    }
  });

  it('resolves concurrent first requests once, and reloads member pages after a change made through the gateway', async () => {
    const gw = await startTestGateway({}, { CALLER_CACHE_TTL_MS: 60_000, MEMBER_LIST_CACHE_TTL_MS: 60_000 });
    try {
      const headers = { authorization: `Bearer ${await gw.tokens.user('ada@example.com')}` };
      const list = () => gw.app.inject({ method: 'GET', url: '/api/members', headers });
      const first = await Promise.all([list(), list(), list()]);
      expect(first.map((response) => response.statusCode)).toEqual([200, 200, 200]);
      expect(gw.upstream.callsOf('resolveCaller')).toHaveLength(1);
      expect(gw.upstream.callsOf('listMembers')).toHaveLength(1);

      await list();
      expect(gw.upstream.callsOf('listMembers')).toHaveLength(1);
      const patched = await gw.app.inject({
        method: 'PATCH',
        url: '/api/members/m-2',
        headers,
        payload: { role: 'ANALYST' },
      });
      expect(patched.statusCode).toBe(200);
      await list();
      expect(gw.upstream.callsOf('listMembers')).toHaveLength(2);
    } finally {
      await gw.app.close();
    }
  });
});
