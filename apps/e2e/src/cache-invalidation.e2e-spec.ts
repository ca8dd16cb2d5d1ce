import { eventually, startSystem, type SystemUnderTest } from './system-under-test';

interface Member {
  id: string;
  email: string;
  role: string;
}

/**
 * The gateway reuses resolved callers and member pages (here for a minute); membership events must
 * make every change visible long before that.
 */
describe('gateway caches are invalidated by membership events', () => {
  let system: SystemUnderTest;

  beforeAll(async () => {
    system = await startSystem({
      gatewayEnv: {
        CALLER_CACHE_TTL_MS: '60000',
        LICENSE_CACHE_TTL_MS: '60000',
        MEMBER_LIST_CACHE_TTL_MS: '60000',
      },
    });
  });

  afterAll(async () => {
    await system?.stop();
  });

  it('shows a new member, a role change and a removal within a second, with 60 s caches', async () => {
    const admin = await system.tokenFor('owner@cache.test', { name: 'Owner' });
    expect((await system.api<Member[]>('GET', '/api/members', { token: admin })).body).toHaveLength(1);

    await system.api('POST', '/api/invites', {
      token: admin,
      body: { email: 'new@cache.test', role: 'ANALYST' },
    });
    const mail = await system.mail.waitFor((m) => m.to.includes('new@cache.test'), 10_000);
    const token = /sts_inv_[A-Za-z0-9_-]{43}/.exec(mail.text ?? '')![0];
    await system.api('POST', '/api/invites/accept', { body: { token } });
    const newcomer = await system.tokenFor('new@cache.test', { name: 'New' });
    expect((await system.api('GET', '/api/members', { token: newcomer })).status).toBe(200);

    const started = Date.now();
    const members = await eventually(async () => {
      const list = (await system.api<Member[]>('GET', '/api/members', { token: admin })).body;
      return list.length === 2 ? list : undefined;
    }, 1_000);
    expect(Date.now() - started).toBeLessThan(1_000);

    // A change made through the gateway is visible to its own caller at once...
    const newcomerId = members.find((m) => m.email === 'new@cache.test')!.id;
    const demoted = await system.api<Member>('PATCH', `/api/members/${newcomerId}`, {
      token: admin,
      body: { role: 'APP_USER' },
    });
    expect(demoted.body.role).toBe('APP_USER');
    expect(
      (await system.api<Member[]>('GET', '/api/members', { token: admin })).body.find(
        (m) => m.id === newcomerId,
      )?.role,
    ).toBe('APP_USER');
    // ...and to the member whose cached role it changed.
    expect((await system.api('GET', '/api/members', { token: newcomer })).status).toBe(403);

    expect((await system.api('DELETE', `/api/members/${newcomerId}`, { token: admin })).status).toBe(204);
    expect((await system.api<Member[]>('GET', '/api/members', { token: admin })).body).toHaveLength(1);
    // The removed member no longer acts in the organization (they fall back to a personal one).
    const after = await system.api<{ org: { name: string } }>('GET', '/api/session', { token: newcomer });
    expect(after.body.org.name).toBe("New's organization");
  });
});
