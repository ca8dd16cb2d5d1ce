import type { Caller } from '../auth/caller-context';
import type { licensePayload, memberPayload } from '../contract/contract-schemas';
import { GroupedCache } from './grouped-cache';
import type { z } from 'zod';

interface CachedMemberPage {
  members: z.infer<typeof memberPayload>[];
  nextCursor: string;
}

const userGroup = (userId: string) => `user:${userId}`;
const orgGroup = (orgId: string) => `org:${orgId}`;

/**
 * What the gateway reuses between requests, and how it is invalidated: each entry expires after its
 * TTL, and membership events (member.joined/updated/removed, from any gateway or service) evict the
 * entries of that user and organization at once. A change made through this gateway instance is
 * evicted before the response, so its caller reads their own writes. Callers are grouped by user and
 * by organization, member pages by organization, so an eviction touches only those entries.
 */
export class GatewayCaches {
  readonly callers: GroupedCache<Caller>;
  readonly licenses: GroupedCache<z.infer<typeof licensePayload>>;
  private readonly memberPages: GroupedCache<CachedMemberPage>;
  private readonly analyticsAnswers: GroupedCache<object>;

  constructor(config: {
    CALLER_CACHE_TTL_MS: number;
    LICENSE_CACHE_TTL_MS: number;
    MEMBER_LIST_CACHE_TTL_MS: number;
    ANALYTICS_CACHE_TTL_MS: number;
  }) {
    this.callers = new GroupedCache(config.CALLER_CACHE_TTL_MS, {
      groupsOf: (_key, caller) => [userGroup(caller.userId), orgGroup(caller.org.id)],
    });
    // Keys are org ids.
    this.licenses = new GroupedCache(config.LICENSE_CACHE_TTL_MS, { groupsOf: (orgId) => [orgGroup(orgId)] });
    this.memberPages = new GroupedCache(config.MEMBER_LIST_CACHE_TTL_MS, {
      maxEntries: 1_000,
      // Keys are `<org id>|<limit>|<cursor>` (see memberPage).
      groupsOf: (key) => [orgGroup(key.slice(0, key.indexOf('|')))],
    });
    this.analyticsAnswers = new GroupedCache(config.ANALYTICS_CACHE_TTL_MS, {
      maxEntries: 10_000,
      // Keys are `<org id>|<query>` (see analyticsAnswer).
      groupsOf: (key) => [orgGroup(key.slice(0, key.indexOf('|')))],
    });
  }

  /**
   * An answer of the analytics routes: cached, or loaded (once for concurrent requests). Dashboards
   * poll and every admin of an organization asks the same questions, while ClickHouse answers a few
   * hundred such queries a second (bench/analytics-query.bench.ts).
   */
  analyticsAnswer<Answer extends object>(
    orgId: string,
    query: string,
    load: () => Promise<Answer>,
  ): Promise<Answer> {
    return this.analyticsAnswers.getOrLoad(`${orgId}|${query}`, load) as Promise<Answer>;
  }

  /**
   * Analytics has applied a change of a device of the organization (`subscribeToCacheEvictions`): its
   * figures, organization-wide ones too, are stale, and so are the loads in flight.
   */
  devicesChanged(orgId: string): void {
    this.analyticsAnswers.deleteGroup(orgGroup(orgId));
  }

  /** The organization's license changed (a payment event): the next session read loads it again. */
  licenseChanged(orgId: string): void {
    this.licenses.deleteGroup(orgGroup(orgId));
  }

  /** A page of an organization's members: cached, or loaded (once for concurrent requests). */
  memberPage(
    orgId: string,
    page: { limit?: number | undefined; cursor?: string | undefined },
    load: () => Promise<CachedMemberPage>,
  ): Promise<CachedMemberPage> {
    return this.memberPages.getOrLoad(`${orgId}|${page.limit ?? ''}|${page.cursor ?? ''}`, load);
  }

  /** A membership changed: the user's resolved callers and the organization's member pages are stale. */
  membershipChanged(orgId: string, userId: string | null): void {
    this.callers.deleteGroup(userId ? userGroup(userId) : orgGroup(orgId));
    this.memberPages.deleteGroup(orgGroup(orgId));
  }
}
