import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestGateway, type TestGateway } from '../test/test-gateway';
import { DashboardHosting } from './dashboard-hosting';

const signIn = {
  issuer: 'https://idp.example.com/tenant',
  clientId: 'sts-dashboard',
  audience: 'https://api.example.com',
};

describe('the dashboard on the gateway origin', () => {
  let directory: string;
  let gateway: TestGateway;

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), 'dashboard-'));
    mkdirSync(join(directory, 'assets'));
    writeFileSync(
      join(directory, 'index.html'),
      '<!doctype html><html lang="en"><head><!--sts-dashboard-settings--><script type="module" src="/assets/app-1a2b.js"></script></head><body></body></html>',
    );
    writeFileSync(join(directory, 'assets', 'app-1a2b.js'), 'console.log("app")');
    const dashboard = DashboardHosting.fromBuild({ directory, signIn });
    gateway = await startTestGateway({}, {}, { dashboard: dashboard! });
  });

  afterAll(async () => {
    await gateway.app.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it.each([
    '/',
    '/devices',
    '/devices/7f1c2b8e',
    '/billing?checkout=success',
    '/invites/accept?token=x',
    '/auth/callback',
  ])('serves the app at %s with the sign-in settings and a strict policy', async (url) => {
    const answer = await gateway.app.inject({ method: 'GET', url });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(answer.headers['cache-control']).toBe('no-cache');
    expect(answer.headers['referrer-policy']).toBe('no-referrer');
    const policy = String(answer.headers['content-security-policy']);
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).toContain("connect-src 'self' https://idp.example.com");
    expect(policy).not.toContain('unsafe');
    const meta = /<meta name="sts-dashboard" content="([^"]+)">/.exec(answer.body)?.[1];
    expect(JSON.parse(meta!.replaceAll('&quot;', '"'))).toEqual(signIn);
  });

  it('serves hashed assets for a year, and a missing asset is a 404, not the app', async () => {
    const asset = await gateway.app.inject({ method: 'GET', url: '/assets/app-1a2b.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(asset.headers['x-content-type-options']).toBe('nosniff');
    const missing = await gateway.app.inject({ method: 'GET', url: '/assets/gone-0000.js' });
    expect(missing.statusCode).toBe(404);
    expect(missing.body).not.toContain('sts-dashboard');
  });

  it.each([
    ['GET', '/api/nothing-here'],
    ['GET', '/docs/nothing-here'],
    ['POST', '/devices'],
  ])('keeps problem+json 404s for %s %s', async (method, url) => {
    const answer = await gateway.app.inject({ method: method as 'GET' | 'POST', url });
    expect(answer.statusCode).toBe(404);
    expect(answer.headers['content-type']).toContain('application/problem+json');
  });

  it('is not served without a build', () => {
    expect(DashboardHosting.fromBuild({ directory: join(directory, 'nowhere'), signIn })).toBeUndefined();
  });

  describe('Strict-Transport-Security (HSTS_MAX_AGE_SECONDS)', () => {
    const HSTS = 'max-age=31536000; includeSubDomains';
    let behindProxy: TestGateway;

    beforeAll(async () => {
      behindProxy = await startTestGateway(
        { HSTS_MAX_AGE_SECONDS: 31_536_000, TRUST_PROXY: 1 },
        {},
        { dashboard: DashboardHosting.fromBuild({ directory, signIn })! },
      );
    });

    afterAll(async () => {
      await behindProxy.app.close();
    });

    it.each([
      ['GET', '/'],
      ['GET', '/invites/accept'],
      ['GET', '/assets/app-1a2b.js'],
      ['GET', '/api/nothing-here'],
      ['GET', '/livez'],
      ['POST', '/api/invites/accept'],
    ])('goes on every answer to %s %s that came over HTTPS', async (method, url) => {
      const answer = await behindProxy.app.inject({
        method: method as 'GET' | 'POST',
        url,
        headers: { 'x-forwarded-proto': 'https' },
      });
      expect(answer.headers['strict-transport-security']).toBe(HSTS);
    });

    it('is never sent over plain HTTP (RFC 6797 7.2)', async () => {
      for (const headers of [{}, { 'x-forwarded-proto': 'http' }]) {
        const answer = await behindProxy.app.inject({ method: 'GET', url: '/', headers });
        expect(answer.statusCode).toBe(200);
        expect(answer.headers['strict-transport-security']).toBeUndefined();
      }
    });

    it('is off by default', async () => {
      const answer = await gateway.app.inject({
        method: 'GET',
        url: '/',
        headers: { 'x-forwarded-proto': 'https' },
      });
      expect(answer.headers['strict-transport-security']).toBeUndefined();
    });

    it('believes X-Forwarded-Proto only from a proxy TRUST_PROXY names, and says at start that it cannot', async () => {
      const direct = await startTestGateway({ HSTS_MAX_AGE_SECONDS: 31_536_000 });
      try {
        const answer = await direct.app.inject({
          method: 'GET',
          url: '/livez',
          headers: { 'x-forwarded-proto': 'https' },
        });
        expect(answer.statusCode).toBe(200);
        expect(answer.headers['strict-transport-security']).toBeUndefined();
        expect(direct.logs).toContainEqual(
          expect.objectContaining({ level: 40, msg: expect.stringContaining('TRUST_PROXY is false') }),
        );
      } finally {
        await direct.app.close();
      }
    });
  });

  it('escapes the settings it writes into the page', async () => {
    const hostile = DashboardHosting.fromBuild({
      directory,
      signIn: { ...signIn, clientId: '"><script>alert(1)</script>' },
    });
    const other = await startTestGateway({}, {}, { dashboard: hostile! });
    try {
      const answer = await other.app.inject({ method: 'GET', url: '/' });
      expect(answer.body).not.toContain('<script>alert');
      expect(answer.body).toContain('&quot;&gt;&lt;script&gt;');
    } finally {
      await other.app.close();
    }
  });
});
