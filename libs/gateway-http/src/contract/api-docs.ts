import swaggerUi from '@fastify/swagger-ui';
import type { FastifyPluginAsync } from 'fastify';

/** Where Swagger UI and the OpenAPI document (`/docs/json`, `/docs/yaml`) are served. */
export const API_DOCS_PREFIX = '/docs';

/**
 * The policy of every answer under /docs, as strict as the dashboard's: Swagger UI's own scripts and
 * styles from this origin (it has no inline ones; @fastify/swagger-ui's `staticCSP` would allow `https:`
 * styles and framing by this origin), its logo and icons as `data:` images, "Try it out" calls to this
 * origin only, and no framing at all.
 */
export const API_DOCS_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/**
 * Swagger UI at /docs with the dashboard's security headers: it shares the dashboard's origin, so a page
 * of it framed or sniffed elsewhere would be the dashboard's problem. The headers go on every answer of
 * the docs' scope (the page, its static files, the OpenAPI document), set when the request comes in.
 */
export const apiDocs: FastifyPluginAsync = async (app) => {
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers({
      'content-security-policy': API_DOCS_POLICY,
      'x-frame-options': 'DENY',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    });
    done();
  });
  await app.register(swaggerUi, { routePrefix: API_DOCS_PREFIX });
};
