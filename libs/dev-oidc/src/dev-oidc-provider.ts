import { createHash, timingSafeEqual } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import {
  calculateJwkThumbprint,
  compactVerify,
  decodeProtectedHeader,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  importJWK,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTHeaderParameters,
  type JWTPayload,
} from 'jose';
import {
  AuthorizationCodeFlow,
  SCOPES_SUPPORTED,
  type AuthorizeOutcome,
  type LogoutOutcome,
  type PublicClient,
  type SignedInUser,
} from './authorization-code-flow';
import {
  readClientsFile,
  toStoredClient,
  type ClientRegistration,
  type StoredClient,
} from './client-registry';
import { OAuthError } from './oauth-error';
import { messagePage, signInPage, type HtmlPage } from './sign-in-page';
import { DEVELOPMENT_PROVIDER_MARKER } from '@sts/vocabulary/development-provider';
import type { Role } from '@sts/vocabulary/roles';

export interface DevOidcProviderOptions {
  /** `iss` of every token. Defaults to the server's own URL, known once `start()` has run. */
  readonly issuer?: string;
  /** The API audience tokens are issued for (`aud`). */
  readonly audience: string;
  /** Private signing key as JWK JSON: reused when the file exists, generated and written (0600) otherwise. */
  readonly keyFile?: string;
  /** JSON file of machine clients (see `client-registry.ts`), read again on every token request. */
  readonly clientsFile?: string;
  /** Lifetime of client-credentials tokens. Default 3600 s. */
  readonly tokenTtlSeconds?: number;
  /** Claim naming the organization in client tokens. Default `org_id`. */
  readonly orgClaim?: string;
  /** Claim naming the role in client tokens. Default `role`. */
  readonly roleClaim?: string;
  /**
   * Browser applications signing users in with the authorization code flow and PKCE. The origins of
   * their redirect URIs may also call discovery, JWKS and the token endpoint cross-origin (CORS).
   */
  readonly publicClients?: readonly PublicClient[];
  /** Lifetime of authorization codes. Default 60 s. */
  readonly authorizationCodeTtlSeconds?: number;
  /** Lifetime of each (rotating) refresh token. Default 8 h. */
  readonly refreshTokenTtlSeconds?: number;
  /**
   * How long the provider's own session (its cookie) signs a browser in again without the form, after a
   * sign-in through the form. Default 8 h.
   */
  readonly sessionTtlSeconds?: number;
  /** The clock of the browser flow's expiries (codes, sign-in forms, sessions, refresh tokens). */
  readonly now?: () => number;
  /**
   * Whether its JWKS says it is the development provider (`sts_development_provider: true`), which makes a
   * production gateway refuse it. Default true; dev-idp never turns it off. Only a test or benchmark that
   * runs a production gateway against it, playing a real provider, does.
   */
  readonly announceDevelopment?: boolean;
}

export interface UserTokenRequest {
  readonly email: string;
  readonly name?: string;
  /** Defaults to {@link devSubjectForEmail}(email). */
  readonly subject?: string;
  /** Default true. */
  readonly emailVerified?: boolean;
  /** Seconds. Default: the provider's token lifetime. */
  readonly expiresIn?: number;
  /** Default: the provider's audience. */
  readonly audience?: string;
  /** Further claims (they win over the defaults). */
  readonly claims?: JWTPayload;
}

export interface ClientTokenRequest {
  readonly clientId: string;
  readonly orgId: string;
  readonly role?: Role;
  readonly expiresIn?: number;
  readonly audience?: string;
  readonly claims?: JWTPayload;
}

export interface TokenResponse {
  readonly access_token: string;
  readonly token_type: 'Bearer';
  readonly expires_in: number;
  /** The authorization code and refresh token grants only. */
  readonly id_token?: string;
  readonly refresh_token?: string;
  readonly scope?: string;
}

/** RSA private key as JWK, with `kid`, `alg` and `use`. */
type PrivateRsaJwk = JWK & { kty: 'RSA'; n: string; e: string; d: string; kid: string };

const ALG = 'RS256';
const MAX_BODY_BYTES = 64 * 1024;
/**
 * The provider session's cookie. No `__Host-` prefix: it requires `Secure`, impossible over http. Cookies
 * do not tell ports apart, so providers on one host share the name: each ignores the others' values.
 */
export const SESSION_COOKIE = 'dev_oidc_session';

/** Stable development subject for an e-mail: `dev|` + the first 24 hex digits of its SHA-256 (lowercased). */
export function devSubjectForEmail(email: string): string {
  return `dev|${createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 24)}`;
}

/**
 * A small, real OpenID provider for local runs and tests: RS256 signing key, discovery document,
 * JWKS, the OAuth 2.0 client credentials grant at `POST /oauth/token` (contract section 5.3), and the
 * browser sign-in of public clients (authorization code with PKCE, refresh tokens, logout; see
 * `authorization-code-flow.ts`). Never meant for production.
 */
export class DevOidcProvider {
  private readonly clients = new Map<string, StoredClient>();
  private readonly browserFlow: AuthorizationCodeFlow;
  private readonly corsOrigins: ReadonlySet<string>;
  private server: Server | undefined;
  private configuredIssuer: string | undefined;
  private baseUrl: string | undefined;

  private constructor(
    private readonly options: DevOidcProviderOptions,
    private readonly privateKey: CryptoKey,
    private readonly publicKey: CryptoKey,
    /** Public part of the signing key, as published in the JWKS. */
    readonly publicJwk: Readonly<JWK>,
    readonly publicKeyPem: string,
  ) {
    this.configuredIssuer = options.issuer;
    this.browserFlow = new AuthorizationCodeFlow(
      options.publicClients ?? [],
      {
        issuer: () => this.issuer,
        audience: options.audience,
        tokenTtlSeconds: this.tokenTtlSeconds,
        issueAccessToken: (user, scope) => this.issueBrowserAccessToken(user, scope),
        issueIdToken: (user, claims) => this.issueIdToken(user, claims),
        verifyIdTokenHint: (token) => this.verifyIdTokenHint(token),
      },
      {
        ...(options.authorizationCodeTtlSeconds !== undefined
          ? { codeTtlSeconds: options.authorizationCodeTtlSeconds }
          : {}),
        ...(options.refreshTokenTtlSeconds !== undefined
          ? { refreshTokenTtlSeconds: options.refreshTokenTtlSeconds }
          : {}),
        ...(options.sessionTtlSeconds !== undefined ? { sessionTtlSeconds: options.sessionTtlSeconds } : {}),
        ...(options.now ? { now: options.now } : {}),
      },
    );
    this.corsOrigins = this.browserFlow.corsOrigins;
  }

  static async create(options: DevOidcProviderOptions): Promise<DevOidcProvider> {
    if (!options.audience) throw new Error('DevOidcProvider: audience is required');
    const privateJwk = await loadOrCreateSigningKey(options.keyFile);
    const publicJwk = {
      kty: 'RSA',
      n: privateJwk.n,
      e: privateJwk.e,
      kid: privateJwk.kid,
      alg: ALG,
      use: 'sig',
    } satisfies JWK;
    const privateKey = await importJWK(privateJwk, ALG);
    const publicKey = await importJWK(publicJwk, ALG);
    const publicKeyPem = await exportSPKI(publicKey);
    return new DevOidcProvider(options, privateKey, publicKey, publicJwk, publicKeyPem);
  }

  /** `iss` of the tokens; without a configured issuer, the server URL (after `start()`). */
  get issuer(): string {
    const issuer = this.configuredIssuer ?? this.baseUrl;
    if (!issuer) throw new Error('DevOidcProvider: no issuer configured and the server has not started');
    return issuer;
  }

  get audience(): string {
    return this.options.audience;
  }

  get kid(): string {
    return this.publicJwk.kid as string;
  }

  /** Where the server listens (after `start()`). */
  get url(): string {
    if (!this.baseUrl) throw new Error('DevOidcProvider: the server has not started');
    return this.baseUrl;
  }

  get jwksUri(): string {
    return `${this.issuer.replace(/\/+$/, '')}/.well-known/jwks.json`;
  }

  get tokenEndpoint(): string {
    return `${this.issuer.replace(/\/+$/, '')}/oauth/token`;
  }

  get authorizationEndpoint(): string {
    return `${this.issuer.replace(/\/+$/, '')}/authorize`;
  }

  get endSessionEndpoint(): string {
    return `${this.issuer.replace(/\/+$/, '')}/oauth/logout`;
  }

  get jwks(): { keys: JWK[] } {
    return { keys: [{ ...this.publicJwk }] };
  }

  get tokenTtlSeconds(): number {
    return this.options.tokenTtlSeconds ?? 3600;
  }

  /** The public key, for tests that need it (e.g. to forge an algorithm-confusion token). */
  getPublicKey(): CryptoKey {
    return this.publicKey;
  }

  discoveryDocument(): Record<string, unknown> {
    return {
      issuer: this.issuer,
      jwks_uri: this.jwksUri,
      token_endpoint: this.tokenEndpoint,
      authorization_endpoint: this.authorizationEndpoint,
      end_session_endpoint: this.endSessionEndpoint,
      grant_types_supported: ['client_credentials', 'authorization_code', 'refresh_token'],
      // 'none': public (browser) clients, which prove themselves with PKCE instead of a secret.
      token_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic', 'none'],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      code_challenge_methods_supported: ['S256'],
      scopes_supported: [...SCOPES_SUPPORTED],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: [ALG],
      token_endpoint_auth_signing_alg_values_supported: [ALG],
      authorization_response_iss_parameter_supported: true,
      claims_supported: [
        'sub',
        'iss',
        'aud',
        'exp',
        'iat',
        'auth_time',
        'nonce',
        'sid',
        'email',
        'email_verified',
        'name',
        'gty',
        this.orgClaim,
      ],
    };
  }

  /** Registers a machine client in memory (besides those of the clients file). */
  registerClient(registration: ClientRegistration): void {
    this.clients.set(registration.clientId, toStoredClient(registration));
  }

  /** Signs exactly the given claims with the provider's key (no defaults added). */
  async signToken(claims: JWTPayload, header: Partial<JWTHeaderParameters> = {}): Promise<string> {
    return new SignJWT(claims)
      .setProtectedHeader({ typ: 'at+jwt', ...header, alg: ALG, kid: this.kid })
      .sign(this.privateKey);
  }

  /** A user (dashboard) access token. */
  async issueUserToken(request: UserTokenRequest): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return this.signToken({
      iss: this.issuer,
      sub: request.subject ?? devSubjectForEmail(request.email),
      aud: request.audience ?? this.audience,
      iat: now,
      exp: now + (request.expiresIn ?? this.tokenTtlSeconds),
      email: request.email,
      email_verified: request.emailVerified ?? true,
      ...(request.name ? { name: request.name } : {}),
      ...request.claims,
    });
  }

  /** The access token of a browser sign-in: a user token, as the CLI prints, with the granted scope. */
  private issueBrowserAccessToken(user: SignedInUser, scope: string): Promise<string> {
    return this.issueUserToken({ email: user.email, name: user.name, claims: { scope } });
  }

  /** An OpenID Connect ID token (Core section 2) for a public client. */
  private async issueIdToken(
    user: SignedInUser,
    claims: { aud: string; auth_time: number; sid: string; nonce?: string },
  ): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return this.signToken(
      {
        iss: this.issuer,
        sub: devSubjectForEmail(user.email),
        iat: now,
        exp: now + this.tokenTtlSeconds,
        email: user.email,
        email_verified: true,
        name: user.name,
        ...claims,
      },
      { typ: 'JWT' },
    );
  }

  /** Claims of an ID token this provider signed; expiry is ignored (logout hints are often old). */
  private async verifyIdTokenHint(token: string): Promise<JWTPayload | undefined> {
    try {
      // Access tokens are `at+jwt`: only ID tokens (`JWT`) may stand for a session.
      if (decodeProtectedHeader(token).typ !== 'JWT') return undefined;
      const { payload } = await compactVerify(token, this.publicKey, { algorithms: [ALG] });
      const claims = JSON.parse(new TextDecoder().decode(payload)) as JWTPayload;
      return claims.iss === this.issuer ? claims : undefined;
    } catch {
      return undefined;
    }
  }

  /** A client-credentials access token, as `POST /oauth/token` issues it, without the HTTP round trip. */
  async issueClientToken(request: ClientTokenRequest): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return this.signToken({
      iss: this.issuer,
      sub: `${request.clientId}@clients`,
      aud: request.audience ?? this.audience,
      iat: now,
      exp: now + (request.expiresIn ?? this.tokenTtlSeconds),
      azp: request.clientId,
      gty: 'client-credentials',
      [this.orgClaim]: request.orgId,
      ...(request.role ? { [this.roleClaim]: request.role } : {}),
      ...request.claims,
    });
  }

  /** Starts the HTTP server; resolves with its URL. */
  async start(port = 0, host = '127.0.0.1'): Promise<string> {
    if (this.server) throw new Error('DevOidcProvider: already started');
    const server = createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (!res.headersSent) sendJson(res, 500, { error: 'server_error' });
        else res.destroy();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    const address = server.address() as AddressInfo;
    const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    this.baseUrl = `http://${urlHost}:${address.port}`;
    return this.baseUrl;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve, reject) => {
      server.close((error) => (error ? reject(error) : resolve()));
      server.closeAllConnections();
    });
  }

  get orgClaim(): string {
    return this.options.orgClaim ?? 'org_id';
  }

  get roleClaim(): string {
    return this.options.roleClaim ?? 'role';
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = ROUTES[url.pathname];
    if (!route) {
      sendJson(res, 404, { error: 'not_found' });
      return;
    }
    if (route.cors && this.answerCors(req, res, route.methods)) return;
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (!route.methods.some((allowed) => allowed === method)) {
      res.setHeader('Allow', route.methods.join(', '));
      sendJson(res, 405, { error: 'method_not_allowed' });
      return;
    }
    switch (route.name) {
      case 'discovery':
        sendJson(res, 200, this.discoveryDocument(), { 'Cache-Control': 'public, max-age=300' });
        return;
      case 'jwks':
        sendJson(
          res,
          200,
          this.options.announceDevelopment === false
            ? this.jwks
            : { ...this.jwks, [DEVELOPMENT_PROVIDER_MARKER]: true },
          { 'Cache-Control': 'public, max-age=300' },
        );
        return;
      case 'token':
        try {
          const response = await this.tokenGrant(req);
          sendJson(res, 200, response, { 'Cache-Control': 'no-store', Pragma: 'no-cache' });
        } catch (error) {
          if (!(error instanceof OAuthError)) throw error;
          const headers: Record<string, string> = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
          if (error.status === 401) headers['WWW-Authenticate'] = 'Basic realm="dev-oidc"';
          sendJson(res, error.status, { error: error.error, error_description: error.description }, headers);
        }
        return;
      case 'authorize': {
        const browserKeys = cookieValues(req.headers.cookie, SESSION_COOKIE);
        if (method === 'GET') {
          this.sendAuthorizeOutcome(res, this.browserFlow.authorize(url.searchParams, browserKeys));
          return;
        }
        try {
          this.sendAuthorizeOutcome(res, this.browserFlow.signIn(await readParameters(req), browserKeys));
        } catch (error) {
          if (!(error instanceof OAuthError)) throw error;
          sendHtml(res, 400, messagePage('Sign-in failed', error.description));
        }
        return;
      }
      case 'logout': {
        let parameters: Record<string, string | undefined>;
        try {
          parameters = method === 'GET' ? Object.fromEntries(url.searchParams) : await readParameters(req);
        } catch (error) {
          if (!(error instanceof OAuthError)) throw error;
          sendHtml(res, 400, messagePage('Sign-out failed', error.description));
          return;
        }
        const browserKeys = cookieValues(req.headers.cookie, SESSION_COOKIE);
        this.sendLogoutOutcome(res, await this.browserFlow.logout(parameters, browserKeys));
        return;
      }
    }
  }

  /**
   * CORS for the browser applications (the origins of registered redirect URIs), none for anyone else.
   * True when it answered the request (a preflight).
   */
  private answerCors(req: IncomingMessage, res: ServerResponse, methods: readonly string[]): boolean {
    // The answer depends on Origin: shared caches must not hand one origin's answer to another.
    res.setHeader('Vary', 'Origin');
    const origin = req.headers.origin;
    const allowed = origin !== undefined && this.corsOrigins.has(origin);
    if (allowed) res.setHeader('Access-Control-Allow-Origin', origin);
    if (req.method !== 'OPTIONS') return false;
    if (allowed) {
      res.setHeader('Access-Control-Allow-Methods', methods.join(', '));
      res.setHeader('Access-Control-Allow-Headers', 'Content-Type');
      res.setHeader('Access-Control-Max-Age', '600');
    }
    res.setHeader('Allow', [...methods, 'OPTIONS'].join(', '));
    res.writeHead(204);
    res.end();
    return true;
  }

  private sendAuthorizeOutcome(res: ServerResponse, outcome: AuthorizeOutcome): void {
    switch (outcome.kind) {
      case 'redirect':
        redirect(
          res,
          outcome.location,
          outcome.session && this.sessionCookie(outcome.session.key, outcome.session.maxAgeSeconds),
        );
        return;
      case 'error-page':
        sendHtml(res, 400, messagePage('Sign-in failed', outcome.message));
        return;
      case 'sign-in':
        sendHtml(res, outcome.error ? 400 : 200, signInPage(outcome));
        return;
    }
  }

  /** A logout that went through ended the browser's session: its cookie goes too. */
  private sendLogoutOutcome(res: ServerResponse, outcome: LogoutOutcome): void {
    const cleared = this.sessionCookie('', 0);
    switch (outcome.kind) {
      case 'redirect':
        redirect(res, outcome.location, cleared);
        return;
      case 'error-page':
        sendHtml(res, 400, messagePage('Sign-out failed', outcome.message));
        return;
      case 'signed-out':
        sendHtml(res, 200, messagePage('Signed out', 'You are signed out. You may close this window.'), {
          'Set-Cookie': cleared,
        });
        return;
    }
  }

  /**
   * The session cookie: out of scripts' reach, sent on top-level navigations from the application (Lax),
   * `Secure` when the issuer is https (a browser would refuse it over http). `Max-Age=0` deletes it.
   */
  private sessionCookie(value: string, maxAgeSeconds: number): string {
    const secure = new URL(this.issuer).protocol === 'https:' ? '; Secure' : '';
    return `${SESSION_COOKIE}=${value}; Max-Age=${maxAgeSeconds}; Path=/; HttpOnly; SameSite=Lax${secure}`;
  }

  /** The token endpoint's grants (RFC 6749), errors per section 5.2. */
  private async tokenGrant(req: IncomingMessage): Promise<TokenResponse> {
    const body = await readParameters(req);
    switch (body['grant_type']) {
      case undefined:
      case '':
        throw new OAuthError(400, 'invalid_request', 'grant_type is required');
      case 'client_credentials':
        return this.clientCredentialsGrant(req, body);
      // Public clients: identified by client_id, no authentication (PKCE binds the code to them).
      case 'authorization_code':
        return this.browserFlow.exchangeCode(body);
      case 'refresh_token':
        return this.browserFlow.refresh(body);
      default:
        throw new OAuthError(
          400,
          'unsupported_grant_type',
          'supported: client_credentials, authorization_code, refresh_token',
        );
    }
  }

  /** OAuth 2.0 client credentials grant (RFC 6749 section 4.4). */
  private async clientCredentialsGrant(
    req: IncomingMessage,
    body: Record<string, string | undefined>,
  ): Promise<TokenResponse> {
    const basic = parseBasicCredentials(req.headers.authorization);
    if (basic && (body['client_id'] ?? basic.clientId) !== basic.clientId) {
      throw new OAuthError(400, 'invalid_request', 'client_id differs from the Basic credentials');
    }
    const clientId = basic?.clientId ?? body['client_id'];
    const clientSecret = basic?.clientSecret ?? body['client_secret'];
    if (!clientId || !clientSecret)
      throw new OAuthError(401, 'invalid_client', 'client authentication is required');

    const client = await this.findClient(clientId);
    // Compare against a dummy when the client is unknown, so timing does not tell which ids exist.
    const expected = Buffer.from(client?.clientSecretSha256 ?? '0'.repeat(64), 'hex');
    const given = createHash('sha256').update(clientSecret, 'utf8').digest();
    if (!timingSafeEqual(expected, given) || !client) {
      throw new OAuthError(401, 'invalid_client', 'unknown client or wrong secret');
    }

    const audience = body['audience'];
    if (audience !== undefined && audience !== this.audience) {
      throw new OAuthError(403, 'access_denied', 'the client is not authorized for this audience');
    }
    const accessToken = await this.issueClientToken({
      clientId: client.clientId,
      orgId: client.orgId,
      ...(client.role ? { role: client.role } : {}),
    });
    return { access_token: accessToken, token_type: 'Bearer', expires_in: this.tokenTtlSeconds };
  }

  private async findClient(clientId: string): Promise<StoredClient | undefined> {
    const registered = this.clients.get(clientId);
    if (registered) return registered;
    if (!this.options.clientsFile) return undefined;
    const fromFile = await readClientsFile(this.options.clientsFile);
    return fromFile.find((client) => client.clientId === clientId);
  }
}

interface Route {
  readonly name: 'discovery' | 'jwks' | 'token' | 'authorize' | 'logout';
  readonly methods: readonly ('GET' | 'POST')[];
  /** Called by browser applications' scripts, cross-origin. */
  readonly cors: boolean;
}

const ROUTES: Record<string, Route> = {
  '/.well-known/openid-configuration': { name: 'discovery', methods: ['GET'], cors: true },
  '/.well-known/jwks.json': { name: 'jwks', methods: ['GET'], cors: true },
  '/oauth/token': { name: 'token', methods: ['POST'], cors: true },
  // Pages the browser navigates to: no CORS.
  '/authorize': { name: 'authorize', methods: ['GET', 'POST'], cors: false },
  '/oauth/logout': { name: 'logout', methods: ['GET', 'POST'], cors: false },
};

/** An HTML page that runs no scripts and may not be framed. */
function sendHtml(
  res: ServerResponse,
  status: number,
  page: HtmlPage,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': Buffer.byteLength(page.html),
    'Content-Security-Policy': page.contentSecurityPolicy,
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
  });
  res.end(page.html);
}

/** 303: the browser follows with a GET, also after the form's POST. */
function redirect(res: ServerResponse, location: string, cookie?: string): void {
  res.writeHead(303, {
    Location: location,
    'Cache-Control': 'no-store',
    'Referrer-Policy': 'no-referrer',
    ...(cookie ? { 'Set-Cookie': cookie } : {}),
  });
  res.end();
}

/** Every value of the named cookie in a `Cookie` header (RFC 6265 section 5.4 allows several). */
function cookieValues(header: string | undefined, name: string): string[] {
  return (header ?? '')
    .split(';')
    .map((pair) => pair.trim())
    .filter((pair) => pair.startsWith(`${name}=`))
    .map((pair) => pair.slice(name.length + 1));
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

/** Body parameters of a token request, from JSON or form encoding; only string values are kept. */
async function readParameters(req: IncomingMessage): Promise<Record<string, string | undefined>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new OAuthError(400, 'invalid_request', 'request body is too large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (contentType === 'application/x-www-form-urlencoded') {
    return Object.fromEntries(new URLSearchParams(text));
  }
  if (contentType === 'application/json') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new OAuthError(400, 'invalid_request', 'body is not valid JSON');
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new OAuthError(400, 'invalid_request', 'body must be a JSON object');
    }
    return Object.fromEntries(
      Object.entries(parsed).map(([key, value]) => [key, typeof value === 'string' ? value : undefined]),
    );
  }
  throw new OAuthError(
    400,
    'invalid_request',
    'Content-Type must be application/json or application/x-www-form-urlencoded',
  );
}

/** `Authorization: Basic` client credentials (RFC 6749 section 2.3.1: each part form-encoded). */
function parseBasicCredentials(
  header: string | undefined,
): { clientId: string; clientSecret: string } | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  try {
    const clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
    const clientSecret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
    return clientId && clientSecret ? { clientId, clientSecret } : undefined;
  } catch {
    throw new OAuthError(400, 'invalid_request', 'malformed Basic credentials');
  }
}

async function loadOrCreateSigningKey(keyFile: string | undefined): Promise<PrivateRsaJwk> {
  if (keyFile) {
    const existing = await readSigningKey(keyFile);
    if (existing) return existing;
  }
  const { privateKey } = await generateKeyPair(ALG, { extractable: true, modulusLength: 2048 });
  const exported = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(exported);
  const jwk = { ...exported, kid, alg: ALG, use: 'sig' } as PrivateRsaJwk;
  if (!keyFile) return jwk;
  await mkdir(dirname(keyFile), { recursive: true });
  try {
    await writeFile(keyFile, `${JSON.stringify(jwk, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    return jwk;
  } catch (error) {
    // Another process (the server, or the CLI) wrote it first: use theirs.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const written = await readSigningKey(keyFile);
    if (!written) throw new Error(`${keyFile}: could not read the signing key`);
    return written;
  }
}

async function readSigningKey(keyFile: string): Promise<PrivateRsaJwk | undefined> {
  let text: string;
  try {
    text = await readFile(keyFile, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const jwk = JSON.parse(text) as Partial<PrivateRsaJwk>;
  if (jwk.kty !== 'RSA' || !jwk.n || !jwk.e || !jwk.d) {
    throw new Error(`${keyFile}: not an RSA private key in JWK form; delete it to generate a new one`);
  }
  const kid = jwk.kid ?? (await calculateJwkThumbprint({ kty: 'RSA', n: jwk.n, e: jwk.e }));
  return { ...jwk, kid, alg: ALG, use: 'sig' } as PrivateRsaJwk;
}
