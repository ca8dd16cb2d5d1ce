import type { Caller } from './caller-context';
import type { memberPayload } from './contract-schemas';
import type { SessionLicense } from './routes/session-routes';
import { TtlCache } from './ttl-cache';
import type { z } from 'zod';

export interface CachedMemberPage {
  orgId: string;
  members: z.infer<typeof memberPayload>[];
  nextCursor: string;
}

/**
 * What the gateway reuses between requests, and how it is invalidated: each entry expires after its
 * TTL, and membership events (member.joined/updated/removed, from any gateway or service) evict the
 * entries of that user and organization at once. A change made through this gateway instance is
 * evicted before the response, so its caller reads their own writes.
 */
export class GatewayCaches {
  readonly callers: TtlCache<Caller>;
  readonly licenses: TtlCache<SessionLicense>;
  readonly memberPages: TtlCache<CachedMemberPage>;

  constructor(config: { CALLER_CACHE_TTL_MS: number; LICENSE_CACHE_TTL_MS: number; MEMBER_LIST_CACHE_TTL_MS: number }) {
    this.callers = new TtlCache(config.CALLER_CACHE_TTL_MS);
    this.licenses = new TtlCache(config.LICENSE_CACHE_TTL_MS);
    this.memberPages = new TtlCache(config.MEMBER_LIST_CACHE_TTL_MS, 1_000);
  }

  /** A membership changed: the user's resolved callers and the organization's member pages are stale. */
  membershipChanged(orgId: string, userId: string | null): void {
    if (userId) this.callers.deleteWhere((caller) => caller.userId === userId);
    else this.callers.deleteWhere((caller) => caller.org.id === orgId);
    this.memberPages.deleteWhere((page) => page.orgId === orgId);
  }
}
