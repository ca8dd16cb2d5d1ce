import { loadConfig } from '@sts/config/load-config';
import { apiDocsServed, gatewayEnvSchema } from '../gateway-config';
import { startTestGateway, type TestGateway } from '../test/test-gateway';
import { API_DOCS_POLICY } from './api-docs';

/** Every kind of answer under /docs: the page, Swagger UI's script and style, the OpenAPI document. */
const DOCS = [
  '/docs',
  '/docs/',
  '/docs/static/swagger-ui-bundle.js',
  '/docs/static/swagger-ui.css',
  '/docs/json',
];

describe('/docs (Swagger UI on the dashboard’s origin)', () => {
  let gw: TestGateway | undefined;

  afterEach(async () => {
    await gw?.app.close();
    gw = undefined;
  });

  it.each(DOCS)('answers %s with a strict policy, no framing and no sniffing', async (url) => {
    gw = await startTestGateway();
    const answer = await gw.app.inject({ method: 'GET', url });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers).toMatchObject({
      'content-security-policy': API_DOCS_POLICY,
      'x-frame-options': 'DENY',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    });
  });

  it('allows scripts and styles from its own origin only, and no framing', () => {
    const directives = new Map(
      API_DOCS_POLICY.split('; ').map((directive) => {
        const [name, ...sources] = directive.split(' ');
        return [name, sources.join(' ')] as const;
      }),
    );
    expect(Object.fromEntries(directives)).toMatchObject({
      'default-src': "'none'",
      'script-src': "'self'",
      'style-src': "'self'",
      'frame-ancestors': "'none'",
    });
    expect(API_DOCS_POLICY).not.toMatch(/unsafe-|https:|\*/);
  });

  it('loads only what its policy allows: the page names scripts and styles of /docs, none inline', async () => {
    gw = await startTestGateway();
    const page = (await gw.app.inject({ method: 'GET', url: '/docs/' })).body;
    expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\bstyle=|\bon[a-z]+=/i);
    const sources = [...page.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(sources.length).toBeGreaterThan(2);
    for (const source of sources) {
      expect(source).toMatch(/^\.\/static\//);
      const answer = await gw.app.inject({ method: 'GET', url: `/docs/${source.slice(2)}` });
      expect([source, answer.statusCode]).toEqual([source, 200]);
    }
  });

  it.each([
    [{ API_DOCS_ENABLED: false }],
    [{ NODE_ENV: 'production' as const }],
    [{ NODE_ENV: 'production' as const, API_DOCS_ENABLED: false }],
  ])('serves nothing under /docs with %o', async (config) => {
    gw = await startTestGateway(config);
    for (const url of DOCS) {
      const answer = await gw.app.inject({ method: 'GET', url });
      expect([url, answer.statusCode, answer.headers['content-type']]).toEqual([
        url,
        404,
        expect.stringContaining('application/problem+json'),
      ]);
    }
    // The API itself is unaffected.
    expect((await gw.app.inject({ method: 'GET', url: '/api/analytics/health' })).statusCode).toBe(200);
  });

  it('serves /docs in production when API_DOCS_ENABLED says so', async () => {
    gw = await startTestGateway({ NODE_ENV: 'production', API_DOCS_ENABLED: true });
    expect((await gw.app.inject({ method: 'GET', url: '/docs/json' })).statusCode).toBe(200);
  });

  it('reads API_DOCS_ENABLED, on by default outside production only', () => {
    const served = (env: Record<string, string>) =>
      apiDocsServed(loadConfig(gatewayEnvSchema.pick({ API_DOCS_ENABLED: true, NODE_ENV: true }), env));
    expect(served({})).toBe(true);
    expect(served({ NODE_ENV: 'test' })).toBe(true);
    expect(served({ NODE_ENV: 'production' })).toBe(false);
    expect(served({ NODE_ENV: 'production', API_DOCS_ENABLED: 'true' })).toBe(true);
    expect(served({ NODE_ENV: 'production', API_DOCS_ENABLED: ' ' })).toBe(false);
    expect(served({ NODE_ENV: 'development', API_DOCS_ENABLED: 'false' })).toBe(false);
    expect(() => served({ API_DOCS_ENABLED: 'maybe' })).toThrow(/API_DOCS_ENABLED/);
  });
});
