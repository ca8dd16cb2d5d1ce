import { createHash, timingSafeEqual } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import {
  calculateJwkThumbprint,
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
  readClientsFile,
  toStoredClient,
  type ClientRegistration,
  type StoredClient,
} from './client-registry';
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
}

/** RSA private key as JWK, with `kid`, `alg` and `use`. */
type PrivateRsaJwk = JWK & { kty: 'RSA'; n: string; e: string; d: string; kid: string };

const ALG = 'RS256';
const MAX_BODY_BYTES = 64 * 1024;

/** Stable development subject for an e-mail: `dev|` + the first 24 hex digits of its SHA-256 (lowercased). */
export function devSubjectForEmail(email: string): string {
  return `dev|${createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 24)}`;
}

class OAuthError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly description: string,
  ) {
    super(description);
  }
}

/**
 * A small, real OpenID provider for local runs and tests: RS256 signing key, discovery document,
 * JWKS, and the OAuth 2.0 client credentials grant at `POST /oauth/token` (contract section 5.3).
 * Never meant for production.
 */
export class DevOidcProvider {
  private readonly clients = new Map<string, StoredClient>();
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
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic'],
      response_types_supported: ['token'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: [ALG],
      token_endpoint_auth_signing_alg_values_supported: [ALG],
      claims_supported: [
        'sub',
        'iss',
        'aud',
        'exp',
        'iat',
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
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const route = ROUTES[path];
    if (!route) {
      sendJson(res, 404, { error: 'not_found' });
      return;
    }
    if (req.method !== route.method && !(route.method === 'GET' && req.method === 'HEAD')) {
      res.setHeader('Allow', route.method);
      sendJson(res, 405, { error: 'method_not_allowed' });
      return;
    }
    switch (route.name) {
      case 'discovery':
        sendJson(res, 200, this.discoveryDocument(), { 'Cache-Control': 'public, max-age=300' });
        return;
      case 'jwks':
        sendJson(res, 200, this.jwks, { 'Cache-Control': 'public, max-age=300' });
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
    }
  }

  /** OAuth 2.0 client credentials grant (RFC 6749 section 4.4), errors per section 5.2. */
  private async tokenGrant(req: IncomingMessage): Promise<TokenResponse> {
    const body = await readParameters(req);
    const basic = parseBasicCredentials(req.headers.authorization);
    const grantType = body['grant_type'];
    if (!grantType) throw new OAuthError(400, 'invalid_request', 'grant_type is required');
    if (grantType !== 'client_credentials') {
      throw new OAuthError(400, 'unsupported_grant_type', 'only client_credentials is supported');
    }
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

const ROUTES: Record<string, { method: 'GET' | 'POST'; name: 'discovery' | 'jwks' | 'token' }> = {
  '/.well-known/openid-configuration': { method: 'GET', name: 'discovery' },
  '/.well-known/jwks.json': { method: 'GET', name: 'jwks' },
  '/oauth/token': { method: 'POST', name: 'token' },
};

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
