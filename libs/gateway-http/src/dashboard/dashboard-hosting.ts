import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import { escapeHtml } from '@sts/vocabulary/html';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';

/** What the dashboard needs to sign in: the identity provider and its public client for the dashboard. */
export interface DashboardSignIn {
  readonly issuer: string;
  readonly clientId: string;
  /** The API audience: providers such as Auth0 issue API tokens only when the sign-in request names it. */
  readonly audience: string;
}

export interface DashboardHostingOptions {
  /** The dashboard's build (index.html and assets/). */
  readonly directory: string;
  readonly signIn: DashboardSignIn;
}

/** Paths that never serve the app (DESIGN.md 4a): the API, its docs, and the probes. */
const NOT_THE_APP = /^\/(?:api|docs)(?:\/|$)|^\/(?:livez|readyz|metrics)$/;

/**
 * Serves the dashboard on the gateway's origin beside /api (DESIGN.md 4a), so the app needs no CORS and
 * its policy can be strict: hashed assets under /assets/ (cached for a year), and index.html for every
 * page address, with the sign-in settings in a meta tag (no inline script, no extra request).
 */
export class DashboardHosting {
  private readonly page: string;
  private readonly policy: string;

  private constructor(private readonly options: DashboardHostingOptions) {
    const template = readFileSync(join(options.directory, 'index.html'), 'utf8');
    const settings = `<meta name="sts-dashboard" content="${escapeHtml(JSON.stringify(options.signIn))}">`;
    if (!template.includes('<!--sts-dashboard-settings-->'))
      throw new Error(`${options.directory}/index.html has no <!--sts-dashboard-settings--> placeholder`);
    this.page = template.replace('<!--sts-dashboard-settings-->', settings);
    this.policy = contentSecurityPolicy(new URL(options.signIn.issuer).origin);
  }

  /** The hosting of a built dashboard; undefined when `directory` holds no build. */
  static fromBuild(options: DashboardHostingOptions): DashboardHosting | undefined {
    return existsSync(join(options.directory, 'index.html')) ? new DashboardHosting(options) : undefined;
  }

  /** The plugin that serves the assets (register it on the app). */
  readonly assets: FastifyPluginAsync = async (app) => {
    await app.register(fastifyStatic, {
      root: join(this.options.directory, 'assets'),
      prefix: '/assets/',
      // Vite names each asset by its content hash: a new build is a new address.
      immutable: true,
      maxAge: '365d',
      index: false,
      wildcard: true,
      // @fastify/static hands over the reply (its types still say a raw response).
      setHeaders: (reply: unknown) => {
        (reply as FastifyReply).header('x-content-type-options', 'nosniff');
      },
    });
  };

  /** Whether the not-found handler should answer with the app (a page address) instead of a 404. */
  servesPage(request: FastifyRequest): boolean {
    if (request.method !== 'GET' && request.method !== 'HEAD') return false;
    const path = request.url.split('?')[0] ?? '/';
    return !NOT_THE_APP.test(path) && !path.startsWith('/assets/');
  }

  sendPage(reply: FastifyReply): FastifyReply {
    return (
      reply
        .code(200)
        .type('text/html; charset=utf-8')
        .header('cache-control', 'no-cache')
        .header('content-security-policy', this.policy)
        .header('x-content-type-options', 'nosniff')
        .header('x-frame-options', 'DENY')
        // The invitation page's address holds its token: no page sends it on as a referrer.
        .header('referrer-policy', 'no-referrer')
        .send(this.page)
    );
  }
}

/** Scripts and styles from this origin only; the identity provider is the one other origin it talks to. */
function contentSecurityPolicy(issuerOrigin: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src 'self' ${issuerOrigin}`,
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');
}
