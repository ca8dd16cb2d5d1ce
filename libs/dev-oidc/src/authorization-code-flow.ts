import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { JWTPayload } from 'jose';
import { CLIENT_ID_PATTERN } from './client-registry';
import { OAuthError } from './oauth-error';

/**
 * The browser sign-in of the development identity provider: OpenID Connect authorization code flow with
 * PKCE (S256 only) for public clients, rotating refresh tokens and RP-initiated logout. Everything lives
 * in memory (a restart signs everyone out). The provider routes HTTP here and renders the outcomes.
 *
 * Like a real provider, it keeps a session of its own: a sign-in through the form starts one, and the
 * browser holds it in a cookie (its "browser key", a secret distinct from the `sid` that ID tokens carry,
 * so that a script reading an ID token cannot forge the HttpOnly cookie). While it lasts, /authorize sends
 * the browser straight back with a code, unless `prompt=login`, `prompt=select_account` or `max_age` asks
 * for the form. The refresh tokens belong to the same session: logout ends both.
 */

/** A browser application: no secret, so PKCE is what binds the code to it. */
export interface PublicClient {
  readonly clientId: string;
  /** Compared exactly with `redirect_uri`, as RFC 9700 asks (no prefix or pattern matching). */
  readonly redirectUris: readonly string[];
  readonly postLogoutRedirectUris: readonly string[];
}

export interface SignedInUser {
  readonly email: string;
  readonly name: string;
}

/** What the flow needs from the provider: its issuer and its signing key. */
export interface FlowSigner {
  /** Known once the server listens, unless configured. */
  issuer(): string;
  /** The API audience of the access tokens. */
  readonly audience: string;
  readonly tokenTtlSeconds: number;
  issueAccessToken(user: SignedInUser, scope: string): Promise<string>;
  issueIdToken(
    user: SignedInUser,
    claims: { aud: string; auth_time: number; sid: string; nonce?: string },
  ): Promise<string>;
  /** Claims of an ID token this provider signed, expired or not; undefined for anything else. */
  verifyIdTokenHint(token: string): Promise<JWTPayload | undefined>;
}

export interface AuthorizationCodeFlowOptions {
  /** Default 60 s. */
  readonly codeTtlSeconds?: number;
  /** How long the sign-in form may stay open. Default 600 s. */
  readonly signInTtlSeconds?: number;
  /** Lifetime of each refresh token (every refresh gives a new one). Default 8 h. */
  readonly refreshTokenTtlSeconds?: number;
  /**
   * How long after a sign-in through the form the browser's session cookie skips the form. Default 8 h.
   * Only the cookie's use ends then: refresh tokens of the session keep their own lifetime.
   */
  readonly sessionTtlSeconds?: number;
  /** The clock of every expiry here (epoch ms); tests move it instead of waiting. */
  readonly now?: () => number;
}

/** The browser's handle on its provider session: the provider puts it in a cookie. */
export interface BrowserSession {
  readonly key: string;
  readonly maxAgeSeconds: number;
}

export type AuthorizeOutcome =
  | {
      readonly kind: 'redirect';
      readonly location: string;
      /** A sign-in through the form started this session: the browser is to keep it. */
      readonly session?: BrowserSession;
    }
  | { readonly kind: 'error-page'; readonly message: string }
  | {
      readonly kind: 'sign-in';
      readonly requestId: string;
      readonly clientId: string;
      /** Where the form's answer redirects: the form's Content-Security-Policy must allow it. */
      readonly redirectOrigin: string;
      readonly recent: readonly SignedInUser[];
      readonly error?: string;
      readonly email?: string;
      readonly name?: string;
    };

export type LogoutOutcome =
  | { readonly kind: 'redirect'; readonly location: string }
  | { readonly kind: 'signed-out' }
  | { readonly kind: 'error-page'; readonly message: string };

export interface CodeGrantResponse {
  readonly access_token: string;
  readonly token_type: 'Bearer';
  readonly expires_in: number;
  readonly id_token: string;
  readonly refresh_token: string;
  readonly scope: string;
}

type Parameters = Record<string, string | undefined>;

export const SCOPES_SUPPORTED = ['openid', 'profile', 'email', 'offline_access'] as const;
const MAX_RECENT_USERS = 10;
const MAX_STATE_LENGTH = 2048;
const MAX_EMAIL_LENGTH = 254;
const MAX_NAME_LENGTH = 200;
// Beyond this many, the oldest sessions are forgotten (their refresh tokens stop working).
const MAX_SESSIONS = 1000;
/** BASE64URL(SHA256(verifier)) is always 43 characters. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
/** RFC 7636 section 4.1. */
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
/** RFC 5322 dot-atom local part @ host name labels: reasonable, not exhaustive. */
const EMAIL =
  /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

interface PendingSignIn {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly state: string | undefined;
  readonly nonce: string | undefined;
  readonly codeChallenge: string;
  readonly scope: string;
  readonly expiresAt: number;
}

interface Session {
  readonly user: SignedInUser;
  /** Seconds since the epoch. */
  readonly authTime: number;
  /** The value of the browser's cookie (never the `sid`, which ID tokens show to scripts). */
  readonly browserKey: string;
  /** Milliseconds since the epoch: until then, the cookie signs the browser in without the form. */
  readonly browserExpiresAt: number;
}

interface AuthorizationCode {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly codeChallenge: string;
  readonly nonce: string | undefined;
  readonly scope: string;
  readonly sessionId: string;
  readonly expiresAt: number;
  used: boolean;
  /** The grant its first use made, revoked if the code comes again. */
  grantId?: string;
}

/** What one code exchange started: the refresh tokens rotated from it form one family. */
interface Grant {
  readonly clientId: string;
  readonly sessionId: string;
  readonly scope: string;
  revoked: boolean;
}

interface RefreshToken {
  readonly grantId: string;
  readonly expiresAt: number;
  used: boolean;
}

export class AuthorizationCodeFlow {
  private readonly clients = new Map<string, PublicClient>();
  private readonly pending = new Map<string, PendingSignIn>();
  private readonly sessions = new Map<string, Session>();
  /** Browser key (cookie value) to session id: one per session at most, forgotten with it. */
  private readonly browserSessions = new Map<string, string>();
  private readonly codes = new Map<string, AuthorizationCode>();
  private readonly grants = new Map<string, Grant>();
  private readonly refreshTokens = new Map<string, RefreshToken>();
  /** Most recent first. */
  private recent: SignedInUser[] = [];

  constructor(
    clients: readonly PublicClient[],
    private readonly signer: FlowSigner,
    private readonly options: AuthorizationCodeFlowOptions = {},
  ) {
    for (const client of clients) {
      assertPublicClient(client);
      if (this.clients.has(client.clientId)) throw new Error(`public client ${client.clientId} given twice`);
      this.clients.set(client.clientId, client);
    }
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /** Origins of the registered redirect URIs: the browsers that may call the token endpoint. */
  get corsOrigins(): ReadonlySet<string> {
    return new Set([...this.clients.values()].flatMap((c) => c.redirectUris.map((u) => new URL(u).origin)));
  }

  /**
   * GET /authorize (OpenID Connect Core 3.1.2.1). `browserKeys`: the values of the session cookies the
   * browser sent (several when providers on other ports of the same host set one too).
   */
  authorize(query: URLSearchParams, browserKeys: readonly string[] = []): AuthorizeOutcome {
    const duplicated = [...new Set(query.keys())].filter((name) => query.getAll(name).length > 1);
    const clientId = query.get('client_id');
    const redirectUri = query.get('redirect_uri');
    const client = clientId === null ? undefined : this.clients.get(clientId);
    // Without a registered client and redirect URI there is nowhere safe to send the error (RFC 6749 4.1.2.1).
    if (!client || duplicated.includes('client_id')) {
      return { kind: 'error-page', message: 'Unknown or missing client_id.' };
    }
    if (!redirectUri || duplicated.includes('redirect_uri') || !client.redirectUris.includes(redirectUri)) {
      return {
        kind: 'error-page',
        message: `redirect_uri is missing or not registered for ${client.clientId}.`,
      };
    }
    const state = query.get('state') ?? undefined;
    const fail = (error: string, description: string): AuthorizeOutcome => ({
      kind: 'redirect',
      location: this.redirectTo(redirectUri, { error, error_description: description, state }),
    });
    if (duplicated.length > 0) {
      return fail('invalid_request', `${duplicated.join(', ')} given more than once`);
    }
    if ((state?.length ?? 0) > MAX_STATE_LENGTH || (query.get('nonce')?.length ?? 0) > MAX_STATE_LENGTH) {
      return fail('invalid_request', 'state or nonce is too long');
    }
    const responseType = query.get('response_type');
    if (!responseType) return fail('invalid_request', 'response_type is required');
    if (responseType !== 'code') return fail('unsupported_response_type', 'only response_type=code');
    const responseMode = query.get('response_mode');
    if (responseMode !== null && responseMode !== 'query') {
      return fail('invalid_request', 'only response_mode=query');
    }
    if (query.has('request')) return fail('request_not_supported', 'request objects are not supported');
    if (query.has('request_uri')) return fail('request_uri_not_supported', 'request_uri is not supported');
    const scopes = (query.get('scope') ?? '').split(' ').filter(Boolean);
    if (!scopes.includes('openid')) return fail('invalid_scope', 'scope must include openid');
    const codeChallenge = query.get('code_challenge');
    if (query.get('code_challenge_method') !== 'S256' || !codeChallenge) {
      return fail('invalid_request', 'PKCE is required: code_challenge with code_challenge_method=S256');
    }
    if (!S256_CHALLENGE.test(codeChallenge)) {
      return fail('invalid_request', 'code_challenge must be 43 base64url characters');
    }
    // Auth0-style `audience`: accepted when it names the one API this provider issues tokens for.
    const audience = query.get('audience');
    if (audience !== null && audience !== this.signer.audience) {
      return fail(
        'invalid_request',
        `unknown audience; this provider issues tokens for ${this.signer.audience}`,
      );
    }

    this.sweep();
    const request: PendingSignIn = {
      clientId: client.clientId,
      redirectUri,
      state,
      nonce: query.get('nonce') ?? undefined,
      codeChallenge,
      // Unknown scopes are dropped; the token response says what was granted.
      scope: SCOPES_SUPPORTED.filter((scope) => scopes.includes(scope)).join(' '),
      expiresAt: this.now() + (this.options.signInTtlSeconds ?? 600) * 1000,
    };
    // Single sign-on: a browser with a live session is sent straight back, unless the client asks for
    // the form (`prompt=login`, `prompt=select_account`) or for a sign-in more recent than `max_age`.
    const prompts = (query.get('prompt') ?? '').split(' ');
    const sessionId =
      prompts.includes('login') || prompts.includes('select_account')
        ? undefined
        : this.liveBrowserSession(browserKeys, maxAgeSeconds(query.get('max_age')));
    if (sessionId !== undefined) {
      return { kind: 'redirect', location: this.issueCode(request, sessionId) };
    }
    // Silent authentication (`prompt=none`) needs the session: the form may not be shown.
    if (prompts.includes('none')) {
      return fail('login_required', 'no session at this provider: the sign-in form is needed');
    }

    const requestId = randomToken();
    this.pending.set(requestId, request);
    return {
      kind: 'sign-in',
      requestId,
      clientId: client.clientId,
      redirectOrigin: new URL(redirectUri).origin,
      recent: this.recent,
    };
  }

  /**
   * POST /authorize: the sign-in form's answer. A sign-in starts a new session, which replaces the one
   * the browser's cookie named (that one keeps its refresh tokens, but no browser signs in with it again).
   */
  signIn(form: Parameters, browserKeys: readonly string[] = []): AuthorizeOutcome {
    const requestId = form['request_id'] ?? '';
    const request = this.pending.get(requestId);
    if (!request || request.expiresAt <= this.now()) {
      return {
        kind: 'error-page',
        message: 'This sign-in request has expired or was already used. Start again from the application.',
      };
    }
    if (form['cancel'] !== undefined) {
      this.pending.delete(requestId);
      return {
        kind: 'redirect',
        location: this.redirectTo(request.redirectUri, {
          error: 'access_denied',
          error_description: 'the user cancelled the sign-in',
          state: request.state,
        }),
      };
    }
    const picked = form['recent']
      ? this.recent.find((user) => user.email.toLowerCase() === form['recent']?.toLowerCase())
      : undefined;
    const email = (picked?.email ?? form['recent'] ?? form['email'] ?? '').trim();
    const name = (picked?.name ?? form['name'] ?? '').trim() || (email.split('@')[0] ?? '');
    const error = validateUser(email, name);
    if (error) {
      return {
        kind: 'sign-in',
        requestId,
        clientId: request.clientId,
        redirectOrigin: new URL(request.redirectUri).origin,
        recent: this.recent,
        error,
        email: form['recent'] ?? form['email'] ?? '',
        name: form['name'] ?? '',
      };
    }

    this.pending.delete(requestId);
    const user = { email, name };
    this.recent = [
      user,
      ...this.recent.filter((other) => other.email.toLowerCase() !== email.toLowerCase()),
    ].slice(0, MAX_RECENT_USERS);
    for (const key of browserKeys) this.browserSessions.delete(key);
    const sessionId = randomToken();
    const browserKey = randomToken();
    const ttlSeconds = this.options.sessionTtlSeconds ?? 8 * 3600;
    this.sessions.set(sessionId, {
      user,
      authTime: Math.floor(this.now() / 1000),
      browserKey,
      browserExpiresAt: this.now() + ttlSeconds * 1000,
    });
    this.browserSessions.set(browserKey, sessionId);
    for (const oldest of [...this.sessions.keys()].slice(0, Math.max(0, this.sessions.size - MAX_SESSIONS))) {
      this.forgetSession(oldest);
    }
    return {
      kind: 'redirect',
      location: this.issueCode(request, sessionId),
      // Whole seconds, rounded up: the provider's own clock ends the session, the browser's keeps the cookie.
      session: { key: browserKey, maxAgeSeconds: Math.ceil(ttlSeconds) },
    };
  }

  /** POST /oauth/token with grant_type=authorization_code (RFC 6749 4.1.3, RFC 7636 4.6). */
  async exchangeCode(body: Parameters): Promise<CodeGrantResponse> {
    const client = this.publicClient(body['client_id']);
    const code = body['code'];
    if (!code) throw new OAuthError(400, 'invalid_request', 'code is required');
    const record = this.codes.get(code);
    if (!record) throw invalidGrant('unknown authorization code');
    if (record.used) {
      // RFC 6749 4.1.2: a code presented twice may have been stolen; what its first use issued is revoked.
      if (record.grantId) this.revokeGrant(record.grantId);
      throw invalidGrant('the authorization code was already used');
    }
    // Burnt at its first presentation, right or wrong, so that a stolen code cannot be retried.
    record.used = true;
    if (record.expiresAt <= this.now()) throw invalidGrant('the authorization code has expired');
    if (record.clientId !== client.clientId) throw invalidGrant('the code was issued to another client');
    if (body['redirect_uri'] !== record.redirectUri) {
      throw invalidGrant('redirect_uri differs from the authorization request');
    }
    if (!verifierMatches(body['code_verifier'], record.codeChallenge)) {
      throw invalidGrant('code_verifier does not match the code_challenge');
    }
    if (!this.sessions.has(record.sessionId)) throw invalidGrant('the session has ended');
    const grantId = randomToken();
    this.grants.set(grantId, {
      clientId: client.clientId,
      sessionId: record.sessionId,
      scope: record.scope,
      revoked: false,
    });
    record.grantId = grantId;
    return this.issueTokens(grantId, record.scope, record.nonce);
  }

  /** POST /oauth/token with grant_type=refresh_token (RFC 6749 section 6), rotating every time. */
  async refresh(body: Parameters): Promise<CodeGrantResponse> {
    const client = this.publicClient(body['client_id']);
    const token = body['refresh_token'];
    if (!token) throw new OAuthError(400, 'invalid_request', 'refresh_token is required');
    const record = this.refreshTokens.get(token);
    const grant = record && this.grants.get(record.grantId);
    if (!record || !grant) throw invalidGrant('unknown refresh token');
    if (grant.clientId !== client.clientId)
      throw invalidGrant('the refresh token was issued to another client');
    if (record.used) {
      // A rotated token coming back means two parties hold the family: end it (RFC 9700 4.14.2).
      this.revokeGrant(record.grantId);
      throw invalidGrant('the refresh token was already used');
    }
    if (grant.revoked || !this.sessions.has(grant.sessionId))
      throw invalidGrant('the refresh token is revoked');
    if (record.expiresAt <= this.now()) throw invalidGrant('the refresh token has expired');
    // Unknown scopes are ignored, as at /authorize; known ones must have been granted.
    const requested = body['scope']
      ?.split(' ')
      .filter((scope) => (SCOPES_SUPPORTED as readonly string[]).includes(scope));
    const granted = grant.scope.split(' ');
    if (requested && !requested.every((scope) => granted.includes(scope))) {
      throw new OAuthError(400, 'invalid_scope', 'scope exceeds what was granted');
    }
    record.used = true;
    return this.issueTokens(record.grantId, requested?.length ? requested.join(' ') : grant.scope);
  }

  /**
   * GET or POST /oauth/logout (OpenID Connect RP-Initiated Logout 1.0): ends the session the ID token hint
   * names and the one of the browser's cookie (`browserKeys`); the provider then clears the cookie.
   */
  async logout(parameters: Parameters, browserKeys: readonly string[] = []): Promise<LogoutOutcome> {
    const hint = parameters['id_token_hint'];
    let hinted: JWTPayload | undefined;
    if (hint) {
      hinted = await this.signer.verifyIdTokenHint(hint);
      if (!hinted || typeof hinted.aud !== 'string' || !this.clients.has(hinted.aud)) {
        return { kind: 'error-page', message: 'id_token_hint was not issued by this provider.' };
      }
    }
    const clientId = parameters['client_id'];
    if (hinted && clientId && hinted.aud !== clientId) {
      return { kind: 'error-page', message: 'client_id differs from the audience of id_token_hint.' };
    }
    if (hinted && typeof hinted['sid'] === 'string') this.endSession(hinted['sid']);
    for (const key of browserKeys) {
      const sessionId = this.browserSessions.get(key);
      if (sessionId !== undefined) this.endSession(sessionId);
    }

    const client = this.clients.get(clientId ?? (hinted?.aud as string | undefined) ?? '');
    const target = parameters['post_logout_redirect_uri'];
    // Only registered URIs, compared exactly: anything else would make this an open redirect.
    if (client && target && client.postLogoutRedirectUris.includes(target)) {
      return { kind: 'redirect', location: withParameters(target, { state: parameters['state'] }) };
    }
    return { kind: 'signed-out' };
  }

  private publicClient(clientId: string | undefined): PublicClient {
    const client = clientId ? this.clients.get(clientId) : undefined;
    if (!client) throw new OAuthError(401, 'invalid_client', 'unknown public client');
    return client;
  }

  private async issueTokens(grantId: string, scope: string, nonce?: string): Promise<CodeGrantResponse> {
    const grant = this.grants.get(grantId);
    const session = grant && this.sessions.get(grant.sessionId);
    if (!grant || !session) throw invalidGrant('the session has ended');
    const refreshToken = randomToken();
    // Stored before signing, so that a revocation racing with this request also reaches it.
    this.refreshTokens.set(refreshToken, {
      grantId,
      expiresAt: this.now() + (this.options.refreshTokenTtlSeconds ?? 8 * 3600) * 1000,
      used: false,
    });
    const [accessToken, idToken] = await Promise.all([
      this.signer.issueAccessToken(session.user, scope),
      this.signer.issueIdToken(session.user, {
        aud: grant.clientId,
        auth_time: session.authTime,
        sid: grant.sessionId,
        // Only the first ID token echoes the nonce (OpenID Connect Core 12.2).
        ...(nonce !== undefined ? { nonce } : {}),
      }),
    ]);
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: this.signer.tokenTtlSeconds,
      id_token: idToken,
      refresh_token: refreshToken,
      scope,
    };
  }

  private revokeGrant(grantId: string): void {
    const grant = this.grants.get(grantId);
    if (grant) grant.revoked = true;
  }

  private endSession(sessionId: string): void {
    this.forgetSession(sessionId);
    for (const grant of this.grants.values()) if (grant.sessionId === sessionId) grant.revoked = true;
  }

  /** The session and its browser key; grants without their session stop working anyway. */
  private forgetSession(sessionId: string): void {
    const session = this.sessions.get(sessionId);
    if (session) this.browserSessions.delete(session.browserKey);
    this.sessions.delete(sessionId);
  }

  /** The first of the browser's keys naming a session whose cookie still counts (and recent enough). */
  private liveBrowserSession(browserKeys: readonly string[], maxAge: number | undefined): string | undefined {
    const now = this.now();
    for (const key of browserKeys) {
      const sessionId = this.browserSessions.get(key);
      const session = sessionId === undefined ? undefined : this.sessions.get(sessionId);
      if (!session || session.browserExpiresAt <= now) continue;
      // OpenID Connect Core 3.1.2.1: older than max_age seconds means signing in again (0: always).
      if (maxAge !== undefined && now >= (session.authTime + maxAge) * 1000) continue;
      return sessionId;
    }
    return undefined;
  }

  /** A code for the request in the session; the location of the redirect that carries it. */
  private issueCode(request: PendingSignIn, sessionId: string): string {
    const code = randomToken();
    this.codes.set(code, {
      clientId: request.clientId,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      nonce: request.nonce,
      scope: request.scope,
      sessionId,
      expiresAt: this.now() + (this.options.codeTtlSeconds ?? 60) * 1000,
      used: false,
    });
    return this.redirectTo(request.redirectUri, { code, state: request.state });
  }

  /** Authorization responses carry `iss` (RFC 9207), errors included. */
  private redirectTo(redirectUri: string, parameters: Record<string, string | undefined>): string {
    return withParameters(redirectUri, { ...parameters, iss: this.signer.issuer() });
  }

  /** Forgets what has expired, so that memory stays bounded while the provider runs for days. */
  private sweep(): void {
    const now = this.now();
    for (const [id, request] of this.pending) if (request.expiresAt <= now) this.pending.delete(id);
    // Used codes are kept a while longer: a second use must still find them to revoke the first.
    for (const [code, record] of this.codes) if (record.expiresAt + 600_000 <= now) this.codes.delete(code);
    for (const [token, record] of this.refreshTokens) {
      if (record.expiresAt <= now) this.refreshTokens.delete(token);
    }
    const live = new Set(
      [...this.refreshTokens.values(), ...this.codes.values()].map((record) => record.grantId),
    );
    for (const id of this.grants.keys()) if (!live.has(id)) this.grants.delete(id);
  }
}

function assertPublicClient(client: PublicClient): void {
  if (!CLIENT_ID_PATTERN.test(client.clientId)) {
    throw new Error(`public client id "${client.clientId}": letters, digits, ".", "_" or "-" (at most 128)`);
  }
  if (client.redirectUris.length === 0)
    throw new Error(`public client ${client.clientId} has no redirect URI`);
  for (const uri of [...client.redirectUris, ...client.postLogoutRedirectUris]) {
    let url: URL;
    try {
      url = new URL(uri);
    } catch {
      throw new Error(`public client ${client.clientId}: ${uri} is not an absolute URL`);
    }
    if (!['http:', 'https:'].includes(url.protocol) || url.hash || uri.includes('#')) {
      throw new Error(`public client ${client.clientId}: ${uri} must be http(s) without a fragment`);
    }
  }
}

/** Why the e-mail or the name cannot be used; undefined when both are fine. */
function validateUser(email: string, name: string): string | undefined {
  if (!email) return 'Enter an e-mail address.';
  if (email.length > MAX_EMAIL_LENGTH || !EMAIL.test(email) || (email.split('@')[0]?.length ?? 0) > 64) {
    return 'That is not an e-mail address this provider accepts (like ada@example.com, at most 254 characters).';
  }
  if ([...name].length > MAX_NAME_LENGTH) return `The name may have at most ${MAX_NAME_LENGTH} characters.`;
  if (CONTROL_CHARACTERS.test(name)) return 'The name may not contain control characters.';
  return undefined;
}

/** `max_age` in whole seconds; anything else is ignored, as before sessions existed. */
function maxAgeSeconds(value: string | null): number | undefined {
  return value !== null && /^\d{1,10}$/.test(value) ? Number(value) : undefined;
}

function verifierMatches(verifier: string | undefined, challenge: string): boolean {
  if (!verifier || !CODE_VERIFIER.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

function invalidGrant(description: string): OAuthError {
  return new OAuthError(400, 'invalid_grant', description);
}

/** 256 random bits, base64url. */
function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

function withParameters(uri: string, parameters: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [name, value] of Object.entries(parameters)) {
    if (value !== undefined) url.searchParams.set(name, value);
  }
  return url.toString();
}
