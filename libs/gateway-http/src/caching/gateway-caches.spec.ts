import type { Caller } from '../auth/caller-context';
import { GatewayCaches } from './gateway-caches';

const caller = (userId: string, orgId: string): Caller => ({
  kind: 'user',
  userId,
  email: `${userId}@example.com`,
  name: userId,
  memberId: `member:${userId}`,
  role: 'ANALYST',
  dashboardAccess: true,
  org: { id: orgId, name: orgId, domain: null },
});

const page = (email: string) => ({
  members: [
    {
      id: 'm-1',
      email,
      name: 'Ada',
      role: 'ORG_ADMIN' as const,
      dashboard_access: true,
      joined_at: '2026-03-01T12:00:00.000Z',
    },
  ],
  nextCursor: '',
});

describe('GatewayCaches', () => {
  const ttl = {
    CALLER_CACHE_TTL_MS: 60_000,
    LICENSE_CACHE_TTL_MS: 60_000,
    MEMBER_LIST_CACHE_TTL_MS: 60_000,
    ANALYTICS_CACHE_TTL_MS: 60_000,
  };

  it("evicts a user's callers in every organization, or every caller of an organization", () => {
    const caches = new GatewayCaches(ttl);
    caches.callers.set('ada@acme', caller('ada', 'acme'));
    caches.callers.set('ada@beta', caller('ada', 'beta'));
    caches.callers.set('bob@acme', caller('bob', 'acme'));
    caches.callers.set('cy@beta', caller('cy', 'beta'));

    caches.membershipChanged('acme', 'ada');
    expect(
      ['ada@acme', 'ada@beta', 'bob@acme', 'cy@beta'].map((key) => caches.callers.get(key) !== undefined),
    ).toEqual([false, false, true, true]);
    caches.membershipChanged('acme', null);
    expect([caches.callers.get('bob@acme'), caches.callers.get('cy@beta')?.userId]).toEqual([
      undefined,
      'cy',
    ]);
  });

  it("evicts an organization's member pages, and only those", async () => {
    const caches = new GatewayCaches(ttl);
    const load = jest.fn(async () => page('ada@example.com'));
    await caches.memberPage('acme', {}, load);
    await caches.memberPage('acme', { limit: 1, cursor: 'c' }, load);
    await caches.memberPage('beta', {}, load);
    expect(load).toHaveBeenCalledTimes(3);
    await caches.memberPage('acme', { limit: 1, cursor: 'c' }, load);
    expect(load).toHaveBeenCalledTimes(3);

    caches.membershipChanged('acme', 'ada');
    await caches.memberPage('beta', {}, load);
    expect(load).toHaveBeenCalledTimes(3);
    await caches.memberPage('acme', {}, load);
    await caches.memberPage('acme', { limit: 1, cursor: 'c' }, load);
    expect(load).toHaveBeenCalledTimes(5);
  });

  it("reuses an organization's analytics answers per query, and a device change evicts only that organization's", async () => {
    const caches = new GatewayCaches(ttl);
    let loads = 0;
    const load = jest.fn(async () => ({ total_analyzed: ++loads }));
    expect(await caches.analyticsAnswer('acme', 'summary|24h|', load)).toEqual({ total_analyzed: 1 });
    expect(await caches.analyticsAnswer('acme', 'summary|24h|', load)).toEqual({ total_analyzed: 1 });
    await caches.analyticsAnswer('acme', 'summary|30d|', load);
    await caches.analyticsAnswer('beta', 'summary|24h|', load);
    expect(load).toHaveBeenCalledTimes(3);

    caches.devicesChanged('acme');
    expect(await caches.analyticsAnswer('acme', 'summary|24h|', load)).toEqual({ total_analyzed: 4 });
    await caches.analyticsAnswer('beta', 'summary|24h|', load);
    expect(load).toHaveBeenCalledTimes(4);
  });

  it('does not keep a member page loaded before a membership change that happened while it was in flight', async () => {
    const caches = new GatewayCaches(ttl);
    let answer!: (value: ReturnType<typeof page>) => void;
    const before = caches.memberPage('acme', {}, () => new Promise((resolve) => (answer = resolve)));
    caches.membershipChanged('acme', 'grace');
    answer(page('before@example.com'));
    expect((await before).members[0]?.email).toBe('before@example.com');
    const after = await caches.memberPage('acme', {}, async () => page('after@example.com'));
    expect(after.members[0]?.email).toBe('after@example.com');
  });
});
