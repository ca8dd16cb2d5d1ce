import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { requireCaller } from '../auth/caller-context';
import { RateLimitExceeded, type Limit, type RateLimiter } from './rate-limiter';

export interface WriteLimits {
  /** Changes per minute per signed-in subject (a user, or a client of client credentials). */
  perSubject: number;
  /** Changes per minute per organization, from all its members and clients together. */
  perOrganization: number;
}

/** Methods that read: never counted. */
const READS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The limit on signed-in changes (every POST, PUT, PATCH and DELETE behind a bearer token), per subject and
 * per organization, on the gateway's shared window counter: 429 with `Retry-After` until the minute ends.
 * Runs after authentication (it needs the caller) and before the body is read. Both counts are charged on
 * every change, so neither a member's script nor many members together can flood one organization's writes
 * (docs/decisions.md, "Signed-in changes are limited").
 */
export function limitWrites(limiter: RateLimiter, limits: WriteLimits): onRequestHookHandler {
  const perSubject: Limit = { scope: 'writes-subject', max: limits.perSubject };
  const perOrganization: Limit = { scope: 'writes-org', max: limits.perOrganization };
  const charge = async (request: FastifyRequest): Promise<void> => {
    const caller = requireCaller(request);
    const [bySubject, byOrganization] = await Promise.all([
      limiter.charge(perSubject, `${caller.kind}:${caller.userId}`),
      limiter.charge(perOrganization, caller.org.id),
    ]);
    const over = [bySubject, byOrganization].filter((verdict) => verdict.over);
    if (over.length === 0) return;
    const resetInMs = Math.max(...over.map((verdict) => verdict.resetInMs));
    throw new RateLimitExceeded(resetInMs, (seconds) =>
      bySubject.over
        ? `Too many changes by this caller (${limits.perSubject} a minute); retry in ${seconds} s`
        : `Too many changes in this organization (${limits.perOrganization} a minute); retry in ${seconds} s`,
    );
  };
  // A callback hook: every signed-in request runs it, and a read must not pay for a promise.
  return (request, _reply, done) => {
    if (READS.has(request.method)) {
      done();
      return;
    }
    charge(request).then(() => done(), done);
  };
}
