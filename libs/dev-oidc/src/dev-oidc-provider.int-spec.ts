import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashSecret } from '@sts/crypto/secrets';
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { addClientToFile, readClientsFile } from './client-registry';
import { DevOidcProvider, devSubjectForEmail } from './dev-oidc-provider';

const AUDIENCE = 'https://api.security-telemetry.local';
const SECRET = 'a-long-enough-client-secret';

describe('DevOidcProvider over HTTP', () => {
  let dir: string;
  let provider: DevOidcProvider;
  let clientsFile: string;

  const token = (body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    fetch(`${provider.url}/oauth/token`, {
      method: 'POST',
      headers,
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const grant = (extra: Record<string, unknown> = {}) => ({
    client_id: 'svc',
    client_secret: SECRET,
    audience: AUDIENCE,
    grant_type: 'client_credentials',
    ...extra,
  });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dev-oidc-'));
    clientsFile = join(dir, 'clients.json');
    provider = await DevOidcProvider.create({
      audience: AUDIENCE,
      keyFile: join(dir, 'key.json'),
      clientsFile,
    });
    await provider.start();
    provider.registerClient({ clientId: 'svc', clientSecret: SECRET, orgId: 'org_svc' });
  });

  afterAll(async () => {
    await provider.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('serves the discovery document and the JWKS', async () => {
    const discovery = (await (
      await fetch(`${provider.url}/.well-known/openid-configuration`)
    ).json()) as Record<string, unknown>;
    expect(discovery).toMatchObject({
      issuer: provider.url,
      jwks_uri: `${provider.url}/.well-known/jwks.json`,
      token_endpoint: `${provider.url}/oauth/token`,
      id_token_signing_alg_values_supported: ['RS256'],
      grant_types_supported: ['client_credentials', 'authorization_code', 'refresh_token'],
    });
    const jwks = (await (await fetch(`${provider.url}/.well-known/jwks.json`)).json()) as { keys: object[] };
    expect(jwks.keys).toEqual([
      { kty: 'RSA', n: provider.publicJwk.n, e: 'AQAB', kid: provider.kid, alg: 'RS256', use: 'sig' },
    ]);
    expect(JSON.stringify(jwks)).not.toMatch(/"(d|p|q|dp|dq|qi)"/);
    // What it is, for a production gateway to refuse it (@sts/auth/development-provider).
    expect(jwks).toHaveProperty('sts_development_provider', true);
  });

  it('issues a client-credentials token per contract 5.3', async () => {
    const response = await token(grant());
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const body = (await response.json()) as { access_token: string; token_type: string; expires_in: number };
    expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    expect(decodeProtectedHeader(body.access_token)).toMatchObject({ alg: 'RS256', kid: provider.kid });
    const claims = decodeJwt(body.access_token);
    expect(claims).toMatchObject({
      iss: provider.issuer,
      sub: 'svc@clients',
      aud: AUDIENCE,
      gty: 'client-credentials',
      org_id: 'org_svc',
    });
    expect(claims).not.toHaveProperty('role');
    expect((claims.exp ?? 0) - (claims.iat ?? 0)).toBe(3600);
  });

  it('accepts form encoding and HTTP Basic client authentication', async () => {
    const form = new URLSearchParams(grant() as Record<string, string>).toString();
    expect((await token(form, { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(200);
    const basic = Buffer.from(`svc:${SECRET}`).toString('base64');
    const response = await token(
      { grant_type: 'client_credentials', audience: AUDIENCE },
      { 'content-type': 'application/json', authorization: `Basic ${basic}` },
    );
    expect(response.status).toBe(200);
  });

  it.each([
    ['wrong secret', grant({ client_secret: 'wrong-secret-wrong-secret' }), 401, 'invalid_client'],
    ['unknown client', grant({ client_id: 'nobody' }), 401, 'invalid_client'],
    ['no secret', grant({ client_secret: undefined }), 401, 'invalid_client'],
    ['another grant type', grant({ grant_type: 'password' }), 400, 'unsupported_grant_type'],
    ['no grant type', grant({ grant_type: undefined }), 400, 'invalid_request'],
    ['another audience', grant({ audience: 'https://other.example.com' }), 403, 'access_denied'],
    ['invalid JSON', '{"client_id":', 400, 'invalid_request'],
    ['a JSON array', '[]', 400, 'invalid_request'],
  ])('answers %s per RFC 6749', async (_case, body, status, error) => {
    const response = await token(body);
    expect(response.status).toBe(status);
    const answer = (await response.json()) as { error: string; error_description?: string };
    expect(answer.error).toBe(error);
    expect(answer.error_description).toEqual(expect.stringMatching(/./));
  });

  it('refuses other content types', async () => {
    const response = await token('client_id=svc', { 'content-type': 'text/plain' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'invalid_request' });
  });

  it('answers 404 and 405 outside its routes', async () => {
    expect((await fetch(`${provider.url}/nope`)).status).toBe(404);
    const wrongMethod = await fetch(`${provider.url}/oauth/token`);
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('POST');
  });

  it('picks up clients added to the clients file while it runs', async () => {
    const added = await addClientToFile(clientsFile, { orgId: 'org_file', role: 'APP_USER' });
    const response = await token(grant({ client_id: added.clientId, client_secret: added.clientSecret }));
    expect(response.status).toBe(200);
    const { access_token } = (await response.json()) as { access_token: string };
    const jwks = createRemoteJWKSet(new URL(provider.jwksUri));
    const { payload } = await jwtVerify(access_token, jwks, { issuer: provider.issuer, audience: AUDIENCE });
    expect(payload).toMatchObject({ sub: `${added.clientId}@clients`, org_id: 'org_file', role: 'APP_USER' });
    // Only a hash of the secret is stored, with owner-only permissions.
    expect(await readFile(clientsFile, 'utf8')).not.toContain(added.clientSecret);
    expect((await stat(clientsFile)).mode & 0o077).toBe(0);
    await expect(addClientToFile(clientsFile, { orgId: 'x', clientId: added.clientId })).rejects.toThrow(
      /exists/,
    );
  });

  it('accepts hand-written clients with a plain-text secret', async () => {
    const file = join(dir, 'hand.json');
    await writeFile(
      file,
      JSON.stringify({
        clients: [{ clientId: 'hand', clientSecret: 'hand-secret', orgId: 'o' }, { bad: 1 }],
      }),
    );
    expect(await readClientsFile(file)).toEqual([
      { clientId: 'hand', clientSecretSha256: hashSecret('hand-secret'), orgId: 'o' },
    ]);
    expect(await readClientsFile(join(dir, 'missing.json'))).toEqual([]);
  });

  it('reuses the key file, so tokens survive a restart', async () => {
    const again = await DevOidcProvider.create({ audience: AUDIENCE, keyFile: join(dir, 'key.json') });
    expect(again.kid).toBe(provider.kid);
    expect(again.publicJwk).toEqual(provider.publicJwk);
    expect((await stat(join(dir, 'key.json'))).mode & 0o077).toBe(0);
  });

  it('derives a stable subject from the e-mail', async () => {
    const a = decodeJwt(await provider.issueUserToken({ email: 'Ada@Example.com' }));
    const b = decodeJwt(await provider.issueUserToken({ email: 'ada@example.com', expiresIn: 60 }));
    expect(a.sub).toBe(b.sub);
    expect(a.sub).toBe(devSubjectForEmail('ada@example.com'));
    expect((b.exp ?? 0) - (b.iat ?? 0)).toBe(60);
  });
});
