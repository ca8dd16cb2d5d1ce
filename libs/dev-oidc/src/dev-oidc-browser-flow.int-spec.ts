import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';
import type { PublicClient } from './authorization-code-flow';
import { DevOidcProvider, devSubjectForEmail, type DevOidcProviderOptions } from './dev-oidc-provider';

// The browser sign-in as a single-page application (oidc-client-ts) does it, over real HTTP.

const AUDIENCE = 'https://api.security-telemetry.local';
const CALLBACK = 'http://localhost:8080/auth/callback';
const APP_ORIGIN = 'http://localhost:8080';
const DASHBOARD: PublicClient = {
  clientId: 'dash',
  redirectUris: [CALLBACK, 'http://127.0.0.1:8080/auth/callback'],
  postLogoutRedirectUris: [`${APP_ORIGIN}/`],
};
const OTHER: PublicClient = {
  clientId: 'other-app',
  redirectUris: ['https://other.example/cb'],
  postLogoutRedirectUris: [],
};

interface TokenAnswer {
  access_token: string;
  token_type: string;
  expires_in: number;
  id_token: string;
  refresh_token: string;
  scope: string;
  error?: string;
}

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

function requestIdOf(html: string): string {
  const id = /name="request_id" value="([^"]+)"/.exec(html)?.[1];
  if (!id) throw new Error(`no request_id in the page:\n${html}`);
  return id;
}

describe('DevOidcProvider: browser sign-in (authorization code + PKCE)', () => {
  let dir: string;
  let provider: DevOidcProvider;
  const started: DevOidcProvider[] = [];

  const startProvider = async (options: Partial<DevOidcProviderOptions> = {}) => {
    const instance = await DevOidcProvider.create({
      audience: AUDIENCE,
      keyFile: join(dir, 'key.json'),
      publicClients: [DASHBOARD, OTHER],
      ...options,
    });
    await instance.start();
    started.push(instance);
    return instance;
  };

  const authorizeUrl = (
    challenge: string,
    overrides: Record<string, string | undefined> = {},
    on = provider,
  ): string => {
    const parameters: Record<string, string | undefined> = {
      response_type: 'code',
      client_id: DASHBOARD.clientId,
      redirect_uri: CALLBACK,
      scope: 'openid profile email',
      // As the dashboard sends it (oidc-client-ts extraQueryParams).
      audience: AUDIENCE,
      state: 'state-1',
      nonce: 'nonce-1',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      ...overrides,
    };
    const url = new URL('/authorize', on.url);
    for (const [name, value] of Object.entries(parameters)) {
      if (value !== undefined) url.searchParams.set(name, value);
    }
    return url.toString();
  };

  const postForm = (url: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form).toString(),
    });

  /** Opens the form and submits it; the 303's Location, as the browser would follow it. */
  const signIn = async (
    form: Record<string, string>,
    options: { overrides?: Record<string, string>; on?: DevOidcProvider } = {},
  ) => {
    const on = options.on ?? provider;
    const { verifier, challenge } = pkce();
    const page = await fetch(authorizeUrl(challenge, options.overrides, on), { redirect: 'manual' });
    expect(page.status).toBe(200);
    const answer = await postForm(`${on.url}/authorize`, {
      request_id: requestIdOf(await page.text()),
      ...form,
    });
    expect(answer.status).toBe(303);
    const location = new URL(answer.headers.get('location') ?? '');
    return { verifier, location, code: location.searchParams.get('code') ?? '' };
  };

  const token = async (form: Record<string, string>, on = provider) => {
    const response = await postForm(`${on.url}/oauth/token`, form);
    return { status: response.status, body: (await response.json()) as TokenAnswer, response };
  };

  const exchange = (code: string, verifier: string, extra: Record<string, string> = {}, on = provider) =>
    token(
      {
        grant_type: 'authorization_code',
        client_id: DASHBOARD.clientId,
        code,
        redirect_uri: CALLBACK,
        code_verifier: verifier,
        ...extra,
      },
      on,
    );

  const refresh = (refreshToken: string, clientId = DASHBOARD.clientId) =>
    token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: refreshToken });

  /** Signs in and exchanges the code: the tokens the dashboard holds. */
  const tokensFor = async (email: string, name = '') => {
    const { code, verifier } = await signIn({ email, name });
    const { status, body } = await exchange(code, verifier);
    expect(status).toBe(200);
    return body;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dev-oidc-browser-'));
    provider = await startProvider();
  });

  afterAll(async () => {
    await Promise.all(started.map((instance) => instance.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  it('signs a user in: form, redirect with code, code for tokens the JWKS vouches for', async () => {
    const { verifier, challenge } = pkce();
    const page = await fetch(authorizeUrl(challenge), { redirect: 'manual' });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain(`form-action 'self' ${APP_ORIGIN}`);
    expect(csp).not.toMatch(/script-src|unsafe-inline/);
    const html = await page.text();
    expect(html).not.toMatch(/<script/i);
    expect(html).toMatch(/<form method="post" action="authorize">/);
    expect(html).toContain('name="email"');

    const answer = await postForm(`${provider.url}/authorize`, {
      request_id: requestIdOf(html),
      email: 'Ada@Example.com',
      name: '  Ada Lovelace ',
    });
    expect(answer.status).toBe(303);
    const location = new URL(answer.headers.get('location') ?? '');
    expect(`${location.origin}${location.pathname}`).toBe(CALLBACK);
    expect(location.searchParams.get('state')).toBe('state-1');
    expect(location.searchParams.get('iss')).toBe(provider.issuer);
    const code = location.searchParams.get('code') ?? '';
    expect(Buffer.from(code, 'base64url').length).toBeGreaterThanOrEqual(16);

    const { status, body, response } = await exchange(code, verifier);
    expect(status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(Object.keys(body).sort()).toEqual([
      'access_token',
      'expires_in',
      'id_token',
      'refresh_token',
      'scope',
      'token_type',
    ]);
    expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'openid profile email' });

    const jwks = createRemoteJWKSet(new URL(provider.jwksUri));
    const access = await jwtVerify(body.access_token, jwks, { issuer: provider.issuer, audience: AUDIENCE });
    expect(access.payload).toMatchObject({
      sub: devSubjectForEmail('ada@example.com'),
      email: 'Ada@Example.com',
      name: 'Ada Lovelace',
      email_verified: true,
    });
    const id = await jwtVerify(body.id_token, jwks, {
      issuer: provider.issuer,
      audience: DASHBOARD.clientId,
      algorithms: ['RS256'],
    });
    expect(id.protectedHeader).toMatchObject({ alg: 'RS256', typ: 'JWT', kid: provider.kid });
    expect(id.payload).toMatchObject({
      sub: devSubjectForEmail('ada@example.com'),
      aud: DASHBOARD.clientId,
      nonce: 'nonce-1',
      email: 'Ada@Example.com',
      name: 'Ada Lovelace',
      email_verified: true,
    });
    const now = Math.floor(Date.now() / 1000);
    expect(id.payload.auth_time).toEqual(expect.any(Number));
    expect(Math.abs((id.payload.auth_time as number) - now)).toBeLessThan(30);
    expect((id.payload.exp ?? 0) - (id.payload.iat ?? 0)).toBe(3600);
    expect(body.refresh_token.length).toBeGreaterThanOrEqual(43);
  });

  it('names the user after the local part of the e-mail when no name is given', async () => {
    const { access_token } = await tokensFor('grace.hopper@example.com');
    expect(decodeJwt(access_token)).toMatchObject({
      name: 'grace.hopper',
      email: 'grace.hopper@example.com',
    });
  });

  it('refuses a wrong or missing code_verifier with invalid_grant', async () => {
    const wrong = await signIn({ email: 'pkce@example.com' });
    const answer = await exchange(wrong.code, pkce().verifier);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('invalid_grant');
    // The code is burnt by the wrong attempt: the right verifier comes too late.
    expect((await exchange(wrong.code, wrong.verifier)).body.error).toBe('invalid_grant');

    const missing = await signIn({ email: 'pkce@example.com' });
    const noVerifier = await token({
      grant_type: 'authorization_code',
      client_id: DASHBOARD.clientId,
      code: missing.code,
      redirect_uri: CALLBACK,
    });
    expect(noVerifier.status).toBe(400);
    expect(noVerifier.body.error).toBe('invalid_grant');
  });

  it.each([
    ['another redirect_uri', { redirect_uri: 'http://127.0.0.1:8080/auth/callback' }],
    ['another client', { client_id: OTHER.clientId }],
  ])('refuses a code exchanged with %s', async (_case, extra) => {
    const { code, verifier } = await signIn({ email: 'bound@example.com' });
    const answer = await exchange(code, verifier, extra);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('invalid_grant');
  });

  it('answers an unknown public client at the token endpoint with invalid_client', async () => {
    const { code, verifier } = await signIn({ email: 'bound@example.com' });
    const answer = await exchange(code, verifier, { client_id: 'nobody' });
    expect(answer.status).toBe(401);
    expect(answer.body.error).toBe('invalid_client');
  });

  it.each([
    ['code_challenge_method=plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['no code_challenge_method', { code_challenge_method: undefined }, 'invalid_request'],
    ['no code_challenge', { code_challenge: undefined }, 'invalid_request'],
    ['a malformed code_challenge', { code_challenge: 'short' }, 'invalid_request'],
    ['a scope without openid', { scope: 'profile email' }, 'invalid_scope'],
    ['response_type=token', { response_type: 'token' }, 'unsupported_response_type'],
    ['prompt=none', { prompt: 'none' }, 'login_required'],
    ['another audience', { audience: 'https://other-api.example' }, 'invalid_request'],
  ])('redirects %s back with an error', async (_case, overrides, error) => {
    const response = await fetch(authorizeUrl(pkce().challenge, overrides), { redirect: 'manual' });
    expect(response.status).toBe(303);
    const location = new URL(response.headers.get('location') ?? '');
    expect(`${location.origin}${location.pathname}`).toBe(CALLBACK);
    expect(location.searchParams.get('error')).toBe(error);
    expect(location.searchParams.get('state')).toBe('state-1');
    expect(location.searchParams.get('iss')).toBe(provider.issuer);
    expect(location.searchParams.has('code')).toBe(false);
  });

  it.each([
    ['an unregistered redirect_uri', { redirect_uri: 'https://evil.example/auth/callback' }],
    ['a redirect_uri with a query added', { redirect_uri: `${CALLBACK}?next=https://evil.example` }],
    ['a redirect_uri with a trailing slash', { redirect_uri: `${CALLBACK}/` }],
    ["another client's redirect_uri", { redirect_uri: OTHER.redirectUris[0] }],
    ['no redirect_uri', { redirect_uri: undefined }],
    ['an unknown client', { client_id: 'nobody' }],
  ])('answers %s with a 400 page and no redirect', async (_case, overrides) => {
    const response = await fetch(
      authorizeUrl(pkce().challenge, { code_challenge_method: 'plain', ...overrides }),
      {
        redirect: 'manual',
      },
    );
    expect(response.status).toBe(400);
    expect(response.headers.get('location')).toBeNull();
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(response.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await response.text()).toMatch(/client_id|redirect_uri/);
  });

  it('refuses a code used twice and revokes what its first use issued', async () => {
    const { code, verifier } = await signIn({ email: 'twice@example.com' });
    const first = await exchange(code, verifier);
    expect(first.status).toBe(200);
    const second = await exchange(code, verifier);
    expect(second.status).toBe(400);
    expect(second.body.error).toBe('invalid_grant');
    const revoked = await refresh(first.body.refresh_token);
    expect(revoked.status).toBe(400);
    expect(revoked.body.error).toBe('invalid_grant');
  });

  it('refuses an expired code', async () => {
    const clock = { ms: Date.now() };
    const shortLived = await startProvider({ now: () => clock.ms });
    const { code, verifier } = await signIn({ email: 'late@example.com' }, { on: shortLived });
    // Codes live 60 s.
    clock.ms += 61_000;
    const answer = await exchange(code, verifier, {}, shortLived);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({
      error: 'invalid_grant',
      error_description: expect.stringMatching(/expired/),
    });

    // The same provider, in time: it is the age that fails it.
    const timely = await signIn({ email: 'late@example.com' }, { on: shortLived });
    expect((await exchange(timely.code, timely.verifier, {}, shortLived)).status).toBe(200);
  });

  it('rotates refresh tokens, refuses a reused one and then ends its family', async () => {
    const first = await tokensFor('rotate@example.com', 'Rota');
    const firstId = decodeJwt(first.id_token);

    const second = await refresh(first.refresh_token);
    expect(second.status).toBe(200);
    expect(second.body.refresh_token).not.toBe(first.refresh_token);
    expect(second.body.scope).toBe('openid profile email');
    expect(decodeJwt(second.body.access_token)).toMatchObject({ email: 'rotate@example.com', name: 'Rota' });
    const secondId = decodeJwt(second.body.id_token);
    expect(secondId).toMatchObject({
      sub: firstId.sub,
      aud: DASHBOARD.clientId,
      auth_time: firstId.auth_time,
    });
    expect(secondId).not.toHaveProperty('nonce');

    const third = await refresh(second.body.refresh_token);
    expect(third.status).toBe(200);

    const reused = await refresh(first.refresh_token);
    expect(reused.status).toBe(400);
    expect(reused.body.error).toBe('invalid_grant');
    // Two parties held the family: the newest token is gone as well.
    expect((await refresh(third.body.refresh_token)).body.error).toBe('invalid_grant');
  });

  it('binds refresh tokens to their client and to the scope granted', async () => {
    const tokens = await tokensFor('bound@example.com');
    const otherClient = await refresh(tokens.refresh_token, OTHER.clientId);
    expect(otherClient.body.error).toBe('invalid_grant');
    const wider = await token({
      grant_type: 'refresh_token',
      client_id: DASHBOARD.clientId,
      refresh_token: tokens.refresh_token,
      scope: 'openid offline_access',
    });
    expect(wider.body.error).toBe('invalid_scope');
    // Neither refusal used the token up.
    const next = await refresh(tokens.refresh_token);
    expect(next.status).toBe(200);
    // Scopes it does not know are ignored, as at /authorize; a narrower scope is granted.
    const narrower = await token({
      grant_type: 'refresh_token',
      client_id: DASHBOARD.clientId,
      refresh_token: next.body.refresh_token,
      scope: 'openid email api:unknown',
    });
    expect(narrower.status).toBe(200);
    expect(narrower.body.scope).toBe('openid email');
    expect(decodeJwt(narrower.body.access_token)['scope']).toBe('openid email');
  });

  it('answers grants it does not know with unsupported_grant_type', async () => {
    const answer = await token({ grant_type: 'password', client_id: DASHBOARD.clientId });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('unsupported_grant_type');
  });

  describe('logout', () => {
    const logout = (parameters: Record<string, string>) => {
      const url = new URL('/oauth/logout', provider.url);
      for (const [name, value] of Object.entries(parameters)) url.searchParams.set(name, value);
      return fetch(url, { redirect: 'manual' });
    };

    it('revokes the session and redirects to a registered post-logout URI with the state', async () => {
      const tokens = await tokensFor('leave@example.com');
      const other = await tokensFor('stay@example.com');
      const response = await logout({
        id_token_hint: tokens.id_token,
        client_id: DASHBOARD.clientId,
        post_logout_redirect_uri: `${APP_ORIGIN}/`,
        state: 'bye',
      });
      expect(response.status).toBe(303);
      expect(response.headers.get('location')).toBe(`${APP_ORIGIN}/?state=bye`);
      expect((await refresh(tokens.refresh_token)).body.error).toBe('invalid_grant');
      // Another session of the same browser application goes on.
      expect((await refresh(other.refresh_token)).status).toBe(200);
    });

    it('accepts an expired id_token_hint it signed', async () => {
      const tokens = await tokensFor('expired-hint@example.com');
      const claims = decodeJwt(tokens.id_token);
      const expired = await provider.signToken(
        { ...claims, iat: (claims.iat ?? 0) - 7200, exp: (claims.iat ?? 0) - 3600 },
        { typ: 'JWT' },
      );
      const response = await logout({ id_token_hint: expired, post_logout_redirect_uri: `${APP_ORIGIN}/` });
      expect(response.status).toBe(303);
      expect(response.headers.get('location')).toBe(`${APP_ORIGIN}/`);
      expect((await refresh(tokens.refresh_token)).body.error).toBe('invalid_grant');
    });

    it('shows a signed-out page instead of redirecting to an unregistered URI', async () => {
      const tokens = await tokensFor('nowhere@example.com');
      for (const target of ['https://evil.example/', `${APP_ORIGIN}/elsewhere`, OTHER.redirectUris[0]!]) {
        const response = await logout({ id_token_hint: tokens.id_token, post_logout_redirect_uri: target });
        expect(response.status).toBe(200);
        expect(response.headers.get('location')).toBeNull();
        expect(await response.text()).toContain('Signed out');
      }
      expect((await refresh(tokens.refresh_token)).body.error).toBe('invalid_grant');
    });

    it('refuses an id_token_hint it did not sign, or an access token, and revokes nothing', async () => {
      const tokens = await tokensFor('kept@example.com');
      const [header, payload] = tokens.id_token.split('.');
      const forged = `${header}.${payload}.${Buffer.from('not the signature').toString('base64url')}`;
      for (const hint of [forged, tokens.access_token]) {
        const response = await logout({ id_token_hint: hint, post_logout_redirect_uri: `${APP_ORIGIN}/` });
        expect(response.status).toBe(400);
        expect(response.headers.get('location')).toBeNull();
      }
      expect((await refresh(tokens.refresh_token)).status).toBe(200);
    });
  });

  describe("the provider's own session (cookie)", () => {
    const COOKIE = 'dev_oidc_session';
    const setCookies = (response: Response) =>
      response.headers.getSetCookie().filter((cookie) => cookie.startsWith(`${COOKIE}=`));

    /** Signs in through the form (with the browser's cookie, if any): the cookie set, as a browser keeps it. */
    const signInForSession = async (
      email: string,
      options: {
        name?: string;
        on?: DevOidcProvider;
        cookie?: string;
        overrides?: Record<string, string>;
      } = {},
    ) => {
      const on = options.on ?? provider;
      const headers: Record<string, string> = options.cookie ? { cookie: options.cookie } : {};
      const { verifier, challenge } = pkce();
      const page = await fetch(authorizeUrl(challenge, options.overrides, on), {
        redirect: 'manual',
        headers,
      });
      expect(page.status).toBe(200);
      const answer = await postForm(
        `${on.url}/authorize`,
        { request_id: requestIdOf(await page.text()), email, name: options.name ?? '' },
        headers,
      );
      expect(answer.status).toBe(303);
      const set = setCookies(answer);
      expect(set).toHaveLength(1);
      const code = new URL(answer.headers.get('location') ?? '').searchParams.get('code') ?? '';
      return { setCookie: set[0]!, cookie: set[0]!.split(';')[0]!, code, verifier };
    };

    const authorizeWith = async (
      cookie: string | undefined,
      overrides: Record<string, string> = {},
      on = provider,
    ) => {
      const { verifier, challenge } = pkce();
      const response = await fetch(authorizeUrl(challenge, overrides, on), {
        redirect: 'manual',
        headers: cookie ? { cookie } : {},
      });
      return { response, verifier };
    };

    /** The code of an immediate redirect to the application. */
    const codeOf = (response: Response, state = 'state-1', on = provider): string => {
      expect(response.status).toBe(303);
      const location = new URL(response.headers.get('location') ?? '');
      expect(`${location.origin}${location.pathname}`).toBe(CALLBACK);
      expect(location.searchParams.get('error')).toBeNull();
      expect(location.searchParams.get('state')).toBe(state);
      expect(location.searchParams.get('iss')).toBe(on.issuer);
      return location.searchParams.get('code') ?? '';
    };

    const errorOf = (response: Response): string | null => {
      expect(response.status).toBe(303);
      const location = new URL(response.headers.get('location') ?? '');
      expect(location.searchParams.has('code')).toBe(false);
      return location.searchParams.get('error');
    };

    const expectForm = async (response: Response) => {
      expect(response.status).toBe(200);
      expect(response.headers.get('location')).toBeNull();
      expect(await response.text()).toContain('name="request_id"');
    };

    const logoutWith = (cookie: string, parameters: Record<string, string> = {}) => {
      const url = new URL('/oauth/logout', provider.url);
      for (const [name, value] of Object.entries(parameters)) url.searchParams.set(name, value);
      return fetch(url, { redirect: 'manual', headers: { cookie } });
    };

    it('sets an HttpOnly, SameSite=Lax cookie for the whole origin, lasting 8 h, Secure only for an https issuer', async () => {
      const { setCookie, cookie, code, verifier } = await signInForSession('jar@example.com');
      const [pair, ...attributes] = setCookie.split('; ');
      expect(pair).toBe(cookie);
      expect(attributes.sort()).toEqual(['HttpOnly', 'Max-Age=28800', 'Path=/', 'SameSite=Lax']);
      const value = cookie.slice(`${COOKIE}=`.length);
      expect(value).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(Buffer.from(value, 'base64url').length).toBeGreaterThanOrEqual(16);
      // The cookie is no claim of the ID token: a script reading it cannot forge the cookie.
      const { body } = await exchange(code, verifier);
      expect(decodeJwt(body.id_token)['sid']).toEqual(expect.any(String));
      expect(decodeJwt(body.id_token)['sid']).not.toBe(value);

      const https = await startProvider({ issuer: 'https://idp.example' });
      const secure = await signInForSession('jar@example.com', { on: https });
      expect(secure.setCookie.split('; ')).toEqual(
        expect.arrayContaining(['HttpOnly', 'SameSite=Lax', 'Path=/', 'Secure']),
      );
    });

    it('sends a browser with a live session straight back with a code for the same user and session', async () => {
      const first = await signInForSession('sso@example.com', { name: 'Sso User' });
      const firstTokens = await exchange(first.code, first.verifier);
      const firstId = decodeJwt(firstTokens.body.id_token);

      const { response, verifier } = await authorizeWith(first.cookie, {
        state: 'state-2',
        nonce: 'nonce-2',
      });
      const code = codeOf(response, 'state-2');
      expect(setCookies(response)).toEqual([]);
      const { status, body } = await exchange(code, verifier);
      expect(status).toBe(200);
      expect(decodeJwt(body.access_token)).toMatchObject({ email: 'sso@example.com', name: 'Sso User' });
      expect(decodeJwt(body.id_token)).toMatchObject({
        sub: devSubjectForEmail('sso@example.com'),
        sid: firstId['sid'],
        auth_time: firstId['auth_time'],
        nonce: 'nonce-2',
      });
      // The code is bound to this request's PKCE challenge, as one from the form is.
      const other = await authorizeWith(first.cookie);
      expect((await exchange(codeOf(other.response), verifier)).body.error).toBe('invalid_grant');
    });

    it('checks the request before looking at the session: the same errors as without one', async () => {
      const { cookie } = await signInForSession('checked@example.com');
      const plain = await authorizeWith(cookie, { code_challenge_method: 'plain' });
      expect(errorOf(plain.response)).toBe('invalid_request');
      const noOpenid = await authorizeWith(cookie, { scope: 'profile email' });
      expect(errorOf(noOpenid.response)).toBe('invalid_scope');
      const evil = await authorizeWith(cookie, { redirect_uri: 'https://evil.example/auth/callback' });
      expect(evil.response.status).toBe(400);
      expect(evil.response.headers.get('location')).toBeNull();
      const unknownClient = await authorizeWith(cookie, { client_id: 'nobody' });
      expect(unknownClient.response.status).toBe(400);
      expect(unknownClient.response.headers.get('location')).toBeNull();
    });

    it('shows the form despite the session for prompt=login, prompt=select_account and max_age=0', async () => {
      const { cookie } = await signInForSession('again@example.com');
      const forms: Record<string, string>[] = [
        { prompt: 'login' },
        { prompt: 'select_account' },
        { max_age: '0' },
      ];
      for (const overrides of forms) {
        await expectForm((await authorizeWith(cookie, overrides)).response);
      }
      // A sign-in recent enough for max_age, and other prompts, use the session.
      codeOf((await authorizeWith(cookie, { max_age: '3600' })).response);
      codeOf((await authorizeWith(cookie, { prompt: 'consent' })).response);
    });

    it('answers prompt=none with login_required without a session, with a code with one', async () => {
      expect(errorOf((await authorizeWith(undefined, { prompt: 'none' })).response)).toBe('login_required');
      const { cookie } = await signInForSession('silent@example.com');
      const { response, verifier } = await authorizeWith(cookie, { prompt: 'none' });
      const { body } = await exchange(codeOf(response), verifier);
      expect(decodeJwt(body.access_token)['email']).toBe('silent@example.com');
      // Silent and a fresh sign-in at once cannot both be had.
      expect(errorOf((await authorizeWith(cookie, { prompt: 'none login' })).response)).toBe(
        'login_required',
      );
    });

    it('shows the form for an unknown cookie, and finds its own among several of the same name', async () => {
      const made = `${COOKIE}=${randomBytes(32).toString('base64url')}`;
      await expectForm((await authorizeWith(made)).response);
      expect(errorOf((await authorizeWith(made, { prompt: 'none' })).response)).toBe('login_required');
      // Cookies do not tell ports apart: another provider on the host sets one of the same name.
      const elsewhere = await startProvider();
      const theirs = await signInForSession('elsewhere@example.com', { on: elsewhere });
      await expectForm((await authorizeWith(theirs.cookie)).response);
      const ours = await signInForSession('ours@example.com');
      codeOf((await authorizeWith(`${made}; ${theirs.cookie}; ${ours.cookie}`)).response);
    });

    it('shows the form once the session is older than its lifetime; its refresh tokens live on', async () => {
      const clock = { ms: Date.now() };
      const shortLived = await startProvider({ sessionTtlSeconds: 0.3, now: () => clock.ms });
      const { cookie, setCookie, code, verifier } = await signInForSession('brief@example.com', {
        on: shortLived,
      });
      expect(setCookie).toContain('Max-Age=1;');
      codeOf((await authorizeWith(cookie, {}, shortLived)).response, 'state-1', shortLived);
      const tokens = await exchange(code, verifier, {}, shortLived);
      clock.ms += 400;
      await expectForm((await authorizeWith(cookie, {}, shortLived)).response);
      expect(errorOf((await authorizeWith(cookie, { prompt: 'none' }, shortLived)).response)).toBe(
        'login_required',
      );
      const refreshed = await token(
        {
          grant_type: 'refresh_token',
          client_id: DASHBOARD.clientId,
          refresh_token: tokens.body.refresh_token,
        },
        shortLived,
      );
      expect(refreshed.status).toBe(200);
    });

    it('ends the session at logout, refresh tokens included, and clears the cookie', async () => {
      const cleared = [`${COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax`];
      const hinted = await signInForSession('bye@example.com');
      const hintedTokens = (await exchange(hinted.code, hinted.verifier)).body;
      const redirected = await logoutWith(hinted.cookie, {
        id_token_hint: hintedTokens.id_token,
        post_logout_redirect_uri: `${APP_ORIGIN}/`,
      });
      expect(redirected.status).toBe(303);
      expect(setCookies(redirected)).toEqual(cleared);
      await expectForm((await authorizeWith(hinted.cookie)).response);
      expect((await refresh(hintedTokens.refresh_token)).body.error).toBe('invalid_grant');

      // Without an ID token hint, the cookie alone names the session to end.
      const bare = await signInForSession('bare@example.com');
      const bareTokens = (await exchange(bare.code, bare.verifier)).body;
      const signedOut = await logoutWith(bare.cookie);
      expect(signedOut.status).toBe(200);
      expect(setCookies(signedOut)).toEqual(cleared);
      await expectForm((await authorizeWith(bare.cookie)).response);
      expect((await refresh(bareTokens.refresh_token)).body.error).toBe('invalid_grant');
    });

    it('keeps the session when the logout request is refused', async () => {
      const { cookie } = await signInForSession('stays@example.com');
      const refused = await logoutWith(cookie, { id_token_hint: 'not.a.token' });
      expect(refused.status).toBe(400);
      expect(setCookies(refused)).toEqual([]);
      codeOf((await authorizeWith(cookie)).response);
    });

    it('replaces the session when the form signs in another user', async () => {
      const first = await signInForSession('one@example.com');
      const firstTokens = (await exchange(first.code, first.verifier)).body;
      const second = await signInForSession('two@example.com', {
        cookie: first.cookie,
        overrides: { prompt: 'login' },
      });
      expect(second.cookie).not.toBe(first.cookie);
      await expectForm((await authorizeWith(first.cookie)).response);
      const { response, verifier } = await authorizeWith(second.cookie);
      const { body } = await exchange(codeOf(response), verifier);
      expect(decodeJwt(body.access_token)['email']).toBe('two@example.com');
      // The replaced session's tokens are the application's until it signs out.
      expect((await refresh(firstTokens.refresh_token)).status).toBe(200);
    });
  });

  describe('CORS', () => {
    const cors = (response: Response) =>
      [...response.headers.keys()].filter((name) => name.startsWith('access-control-'));

    it('answers the origins of registered redirect URIs', async () => {
      for (const path of ['/.well-known/openid-configuration', '/.well-known/jwks.json']) {
        const response = await fetch(`${provider.url}${path}`, { headers: { origin: APP_ORIGIN } });
        expect(response.status).toBe(200);
        expect(response.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
        expect(response.headers.get('vary')).toBe('Origin');
      }
      const preflight = await fetch(`${provider.url}/oauth/token`, {
        method: 'OPTIONS',
        headers: {
          origin: 'http://127.0.0.1:8080',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type',
        },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:8080');
      expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
      expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('content-type');

      const { code, verifier } = await signIn({ email: 'cors@example.com' });
      const response = await postForm(
        `${provider.url}/oauth/token`,
        {
          grant_type: 'authorization_code',
          client_id: DASHBOARD.clientId,
          code,
          redirect_uri: CALLBACK,
          code_verifier: verifier,
        },
        { origin: APP_ORIGIN },
      );
      expect(response.status).toBe(200);
      expect(response.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    });

    it('gives other origins no CORS headers', async () => {
      const evil = 'https://evil.example';
      const discovery = await fetch(`${provider.url}/.well-known/openid-configuration`, {
        headers: { origin: evil },
      });
      expect(discovery.status).toBe(200);
      expect(cors(discovery)).toEqual([]);
      const preflight = await fetch(`${provider.url}/oauth/token`, {
        method: 'OPTIONS',
        headers: { origin: evil, 'access-control-request-method': 'POST' },
      });
      expect(cors(preflight)).toEqual([]);
      // A post-logout URI's origin is not a redirect URI's origin.
      const token = await postForm(
        `${provider.url}/oauth/token`,
        { grant_type: 'refresh_token' },
        { origin: evil },
      );
      expect(cors(token)).toEqual([]);
      const withoutOrigin = await fetch(`${provider.url}/.well-known/jwks.json`);
      expect(cors(withoutOrigin)).toEqual([]);
    });
  });

  describe('the sign-in form', () => {
    it('lists the e-mails recently signed in with, most recent first, at most ten', async () => {
      const fresh = await startProvider();
      for (let n = 1; n <= 11; n++) await signIn({ email: `user${n}@example.com` }, { on: fresh });
      await signIn({ email: 'USER5@example.com', name: 'Five' }, { on: fresh });
      const html = await (await fetch(authorizeUrl(pkce().challenge, {}, fresh))).text();
      const listed = [...html.matchAll(/name="recent" value="([^"]+)"/g)].map((match) => match[1]);
      expect(listed).toEqual([
        'USER5@example.com',
        'user11@example.com',
        'user10@example.com',
        'user9@example.com',
        'user8@example.com',
        'user7@example.com',
        'user6@example.com',
        'user4@example.com',
        'user3@example.com',
        'user2@example.com',
      ]);
      expect(html).toContain('Five <span>&lt;USER5@example.com&gt;</span>');
    });

    it('signs in with a recent e-mail picked by its button, under the name it had', async () => {
      const fresh = await startProvider();
      await signIn({ email: 'picked@example.com', name: 'Picked Person' }, { on: fresh });
      const { code, verifier } = await signIn({ recent: 'picked@example.com', email: '' }, { on: fresh });
      const { body } = await exchange(code, verifier, {}, fresh);
      expect(decodeJwt(body.access_token)).toMatchObject({
        email: 'picked@example.com',
        name: 'Picked Person',
      });
    });

    it('escapes what it echoes', async () => {
      const fresh = await startProvider();
      const page = await fetch(authorizeUrl(pkce().challenge, {}, fresh));
      const requestId = requestIdOf(await page.text());
      const refused = await postForm(`${fresh.url}/authorize`, {
        request_id: requestId,
        email: '<script>alert(1)</script>@example.com',
        name: '"><img src=x onerror=alert(1)>',
      });
      expect(refused.status).toBe(400);
      const refusedHtml = await refused.text();
      expect(refusedHtml).toContain('role="alert"');
      expect(refusedHtml).not.toMatch(/<script|<img/i);
      expect(refusedHtml).toContain('value="&lt;script&gt;alert(1)&lt;/script&gt;@example.com"');
      expect(refusedHtml).toContain('value="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"');

      // Quotes, ampersands and the like are valid in an e-mail's local part.
      const accepted = await postForm(`${fresh.url}/authorize`, {
        request_id: requestId,
        email: "o'hara&co@example.com",
        name: '"><img src=x onerror=alert(1)>',
      });
      expect(accepted.status).toBe(303);
      const html = await (await fetch(authorizeUrl(pkce().challenge, {}, fresh))).text();
      expect(html).not.toMatch(/<script|<img/i);
      expect(html).toContain('value="o&#39;hara&amp;co@example.com"');
      expect(html).toContain(
        '&quot;&gt;&lt;img src=x onerror=alert(1)&gt; <span>&lt;o&#39;hara&amp;co@example.com&gt;</span>',
      );
    });

    it.each([
      ['no e-mail', { email: '' }],
      ['a malformed e-mail', { email: 'not-an-email' }],
      [
        'an e-mail over 254 characters',
        {
          email: `${'a'.repeat(60)}@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.${'e'.repeat(10)}.com`,
        },
      ],
      ['a name over 200 characters', { email: 'long@example.com', name: 'n'.repeat(201) }],
    ])('shows the form again for %s', async (_case, form) => {
      const page = await fetch(authorizeUrl(pkce().challenge));
      const requestId = requestIdOf(await page.text());
      const response = await postForm(`${provider.url}/authorize`, {
        request_id: requestId,
        name: '',
        ...form,
      });
      expect(response.status).toBe(400);
      expect(response.headers.get('location')).toBeNull();
      const html = await response.text();
      expect(html).toContain('role="alert"');
      expect(requestIdOf(html)).toBe(requestId);
    });

    it('refuses an unknown or used sign-in request, and redirects a cancel with access_denied', async () => {
      const unknown = await postForm(`${provider.url}/authorize`, { request_id: 'made-up', email: 'a@b.c' });
      expect(unknown.status).toBe(400);
      expect(unknown.headers.get('location')).toBeNull();

      const page = await fetch(authorizeUrl(pkce().challenge));
      const requestId = requestIdOf(await page.text());
      const cancelled = await postForm(`${provider.url}/authorize`, { request_id: requestId, cancel: '1' });
      expect(cancelled.status).toBe(303);
      const location = new URL(cancelled.headers.get('location') ?? '');
      expect(location.searchParams.get('error')).toBe('access_denied');
      expect(location.searchParams.get('state')).toBe('state-1');
      const again = await postForm(`${provider.url}/authorize`, { request_id: requestId, email: 'a@b.c' });
      expect(again.status).toBe(400);
    });
  });

  it('publishes the browser flow in its discovery document', async () => {
    const discovery = (await (
      await fetch(`${provider.url}/.well-known/openid-configuration`)
    ).json()) as Record<string, unknown>;
    expect(discovery).toMatchObject({
      issuer: provider.url,
      authorization_endpoint: `${provider.url}/authorize`,
      token_endpoint: `${provider.url}/oauth/token`,
      end_session_endpoint: `${provider.url}/oauth/logout`,
      response_types_supported: ['code'],
      grant_types_supported: ['client_credentials', 'authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      id_token_signing_alg_values_supported: ['RS256'],
      subject_types_supported: ['public'],
    });
    expect(discovery['scopes_supported']).toEqual(expect.arrayContaining(['openid', 'profile', 'email']));
    expect(discovery['claims_supported']).toEqual(
      expect.arrayContaining(['sub', 'email', 'name', 'email_verified', 'nonce', 'auth_time']),
    );
    expect(discovery['token_endpoint_auth_methods_supported']).toEqual(
      expect.arrayContaining(['none', 'client_secret_post', 'client_secret_basic']),
    );
  });

  it('refuses public clients with redirect URIs it cannot compare safely', async () => {
    await expect(
      DevOidcProvider.create({
        audience: AUDIENCE,
        keyFile: join(dir, 'key.json'),
        publicClients: [
          { clientId: 'bad', redirectUris: ['http://x.example/cb#frag'], postLogoutRedirectUris: [] },
        ],
      }),
    ).rejects.toThrow(/fragment/);
    await expect(
      DevOidcProvider.create({
        audience: AUDIENCE,
        publicClients: [{ clientId: 'bad', redirectUris: ['/relative'], postLogoutRedirectUris: [] }],
      }),
    ).rejects.toThrow(/absolute/);
  });
});
