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
