import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { runCli } from './cli';
import { loadDevIdpConfig } from './dev-idp-config';

// The CLI writes the same files the dev-idp server reads; both run here against a temporary data dir.

const AUDIENCE = 'https://api.security-telemetry.local';

describe('dev-idp CLI', () => {
  let dir: string;
  let env: Record<string, string>;

  const run = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(argv, env, { out: (line) => out.push(line), err: (line) => err.push(line) });
    return { code, out: out.join('\n'), err: err.join('\n') };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dev-idp-cli-'));
    env = {
      DEV_IDP_DATA_DIR: dir,
      DEV_IDP_PORT: '0',
      DEV_IDP_ISSUER: 'http://127.0.0.1:4499',
      OIDC_AUDIENCE: AUDIENCE,
    };
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('prints help', async () => {
    const { code, out } = await run('--help');
    expect(code).toBe(0);
    expect(out).toContain('client add --org ORG_ID');
    expect((await run()).code).toBe(2);
  });

  it('prints a user token that the dev-idp server (same key file) vouches for', async () => {
    const { code, out } = await run('token', 'ada@example.com', '--name', 'Ada Lovelace');
    expect(code).toBe(0);
    const token = out.trim();
    expect(token.split('.')).toHaveLength(3);

    const config = loadDevIdpConfig(env);
    const server = await DevOidcProvider.create({
      issuer: config.issuer,
      audience: config.audience,
      keyFile: config.keyFile,
      clientsFile: config.clientsFile,
    });
    await server.start();
    try {
      const { payload } = await jwtVerify(
        token,
        createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`)),
        {
          issuer: 'http://127.0.0.1:4499',
          audience: AUDIENCE,
        },
      );
      expect(payload).toMatchObject({ email: 'ada@example.com', name: 'Ada Lovelace', email_verified: true });
      expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(24 * 3600);

      // `client add` while the server runs; the printed credentials work at once.
      const added = await run(
        'client',
        'add',
        '--org',
        'org_cli',
        '--role',
        'ORG_ADMIN',
        '--id',
        'cli-client',
      );
      expect(added.code).toBe(0);
      expect(added.out).toContain('client_id:     cli-client');
      expect(added.out).toContain("curl -sS -X POST 'http://127.0.0.1:4499/oauth/token'");
      const secret = /client_secret: (\S+)/.exec(added.out)?.[1] ?? '';
      const response = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          client_id: 'cli-client',
          client_secret: secret,
          audience: AUDIENCE,
          grant_type: 'client_credentials',
        }),
      });
      expect(response.status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it('accepts an e-mail as the first argument and a custom lifetime', async () => {
    const { code, out } = await run('bob@example.com', '--expires-in', '60', '--unverified');
    expect(code).toBe(0);
    const [, payload] = out.trim().split('.');
    const claims = JSON.parse(Buffer.from(payload ?? '', 'base64url').toString()) as Record<string, unknown>;
    expect(claims).toMatchObject({ email: 'bob@example.com', email_verified: false });
    expect((claims['exp'] as number) - (claims['iat'] as number)).toBe(60);
  });

  it.each([
    [['token'], /one e-mail/],
    [['token', 'not-an-email'], /one e-mail/],
    [['client', 'add'], /--org/],
    [['client', 'add', '--org', 'o', '--role', 'ROOT'], /--role/],
    [['client', 'remove'], /client add/],
    [['frobnicate'], /unknown command/],
    [['token', 'a@b.c', '--bogus'], /bogus/],
  ])('refuses %p with usage', async (argv, message) => {
    const { code, err } = await run(...argv);
    expect(code).toBe(2);
    expect(err).toMatch(message);
  });

  it('refuses to run in production', async () => {
    const out: string[] = [];
    const code = await runCli(
      ['token', 'a@b.c'],
      { ...env, NODE_ENV: 'production' },
      {
        out: (line) => out.push(line),
        err: (line) => out.push(line),
      },
    );
    expect(code).toBe(1);
    expect(out.join('\n')).toMatch(/NODE_ENV=production/);
  });
});
