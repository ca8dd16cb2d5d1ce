import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * URLs of peers a process trusts (the identity provider's issuer and keys, Stripe's API) must be https
 * with NODE_ENV=production: over http anyone on the path could hand the gateway keys of their own, or read
 * billing's secret key. The one exception is a peer on this host (loopback: 127.0.0.0/8, ::1, `localhost`),
 * and only with `ALLOW_LOOPBACK_HTTP=true` (a sidecar, the production-mode tests and benchmarks).
 * Fragments mark such variables with `httpsInProduction`; `loadConfig` checks them (docs/decisions.md,
 * "Production refuses http peers and the development identity provider").
 */
export const LOOPBACK_HTTP_VARIABLE = 'ALLOW_LOOPBACK_HTTP';

const marked = new WeakSet<z.ZodType>();

/** Marks a URL variable's schema as one that NODE_ENV=production requires to be https. */
export function httpsInProduction<Schema extends z.ZodType>(schema: Schema): Schema {
  marked.add(schema);
  return schema;
}

/** The variable that allows loopback http, in the fragments that have a marked variable. */
export const loopbackHttpEnv = {
  /** With NODE_ENV=production: http for a loopback host (127.0.0.0/8, ::1, localhost); no effect otherwise. */
  ALLOW_LOOPBACK_HTTP: z.stringbool().default(false),
};

/** Whether `hostname` (as `URL.hostname` writes it: IPv6 in brackets) is 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === 'localhost') return true;
  if (host === '[::1]') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

/** Whether the schema (through optional and default wrappers) is marked. */
function isMarked(schema: z.ZodType): boolean {
  let current: z.ZodType | undefined = schema;
  while (current) {
    if (marked.has(current)) return true;
    current =
      current instanceof z.ZodOptional ||
      current instanceof z.ZodDefault ||
      current instanceof z.ZodPrefault ||
      current instanceof z.ZodNullable
        ? (current.unwrap() as z.ZodType)
        : undefined;
  }
  return false;
}

/**
 * With NODE_ENV=production, one line per marked variable of `shape` whose parsed value is not https (and not
 * loopback http allowed by ALLOW_LOOPBACK_HTTP=true), each naming the variable; none otherwise.
 */
export function productionUrlIssues(shape: z.ZodRawShape, data: Record<string, unknown>): string[] {
  if (data['NODE_ENV'] !== 'production') return [];
  const loopbackAllowed = data[LOOPBACK_HTTP_VARIABLE] === true;
  const issues: string[] = [];
  for (const [name, schema] of Object.entries(shape)) {
    const value = data[name];
    if (typeof value !== 'string' || !isMarked(schema as z.ZodType)) continue;
    const url = new URL(value); // the schema took it as a URL
    if (url.protocol === 'https:') continue;
    if (!isLoopbackHost(url.hostname)) {
      issues.push(
        `${name}: must be an https URL with NODE_ENV=production (http only for a loopback host, 127.0.0.0/8, ::1 or localhost, with ${LOOPBACK_HTTP_VARIABLE}=true)`,
      );
    } else if (!loopbackAllowed) {
      issues.push(
        `${name}: http is refused with NODE_ENV=production; for a loopback host as this one set ${LOOPBACK_HTTP_VARIABLE}=true`,
      );
    }
  }
  return issues;
}
