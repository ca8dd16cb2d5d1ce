import { UniqueConflict } from '@sts/errors/unique-conflict';
import { randomBytes, randomUUID } from 'node:crypto';
import { SEALING_CONTEXTS } from '@sts/events/event-catalogue';
import { hashSecret, openSealedSecret } from '@sts/crypto/secrets';
import { AppError } from '@sts/errors/app-error';
import type { ErrorCode } from '@sts/errors/error-code';
import { DEFAULT_PAGE_SIZE } from '@sts/pagination/keyset-cursor';
import type { Role } from '@sts/vocabulary/roles';
import type { Caller, Principal } from './identity-model';
import type { IdentityStore } from './identity-ports';
import { IdentityService } from './identity-service';
import { InMemoryIdentityStore, ManualClock, RecordingIds } from './test/in-memory-identity-store';

const ISSUER = 'https://idp.test/';
const TTL_HOURS = 168;
const EMAILS_PER_DAY = 5;
const EMAILS_PER_RECIPIENT = 2;
const EMAILS_PER_RECIPIENT_ALL_ORGS = 3;
const HOUR = 3_600_000;
const sealingKey = randomBytes(32);
const settings = {
  inviteTtlHours: TTL_HOURS,
  emailsPerOrgPerDay: EMAILS_PER_DAY,
  emailsPerRecipientPerDay: EMAILS_PER_RECIPIENT,
  emailsPerRecipientAllOrgsPerDay: EMAILS_PER_RECIPIENT_ALL_ORGS,
  sealingKey,
};
const firstPage = { limit: DEFAULT_PAGE_SIZE, after: null };

type UserPrincipal = Extract<Principal, { kind: 'user' }>;

const userPrincipal = (email: string, overrides: Partial<UserPrincipal> = {}): UserPrincipal => ({
  kind: 'user',
  issuer: ISSUER,
  subject: `sub|${email.toLowerCase()}`,
  email,
  emailVerified: true,
  name: email.split('@')[0] ?? email,
  ...overrides,
});

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected an AppError');
}

async function expectCode(promise: Promise<unknown>, code: ErrorCode): Promise<void> {
  expect((await failure(promise)).code).toBe(code);
}

describe('IdentityService', () => {
  let store: InMemoryIdentityStore;
  let clock: ManualClock;
  let ids: RecordingIds;
  let service: IdentityService;

  beforeEach(() => {
    store = new InMemoryIdentityStore();
    clock = new ManualClock();
    ids = new RecordingIds();
    service = new IdentityService(store, settings, clock, ids);
  });

  const login = (principal: Principal, orgId: string | null = null) =>
    service.resolveCaller(principal, orgId);

  /** The plain token of an invite, as the notifier would open it from the outbox event. */
  const tokenOf = (inviteId: string): string => {
    const event = store.eventsOf('invite.created').find((data) => data.invite_id === inviteId);
    if (!event) throw new Error(`no invite.created event for ${inviteId}`);
    return openSealedSecret(event.token_sealed, sealingKey, SEALING_CONTEXTS.inviteToken(event));
  };

  /** Invite, accept and log in: the invitee's caller in the organization. */
  const join = async (admin: Caller, email: string, role: Role): Promise<Caller> => {
    const invite = await service.createInvite(admin.org.id, email, role, admin.memberId);
    clock.advance(1_000);
    await service.acceptInvite(tokenOf(invite.id));
    clock.advance(1_000);
    return login(userPrincipal(email), admin.org.id);
  };

  describe('first login and provisioning', () => {
    it('stores the display name as one capped line of plain text', async () => {
      const forged = 'Mallory\r\n\r\nPlease also send your password to evil@example.com\u202e';
      const caller = await login(userPrincipal('mallory@example.com', { name: forged + 'x'.repeat(500) }));
      expect(caller.user.name).not.toMatch(/[\r\n\u202e]/);
      expect(Array.from(caller.user.name).length).toBeLessThanOrEqual(200);
      expect(caller.user.name.startsWith('Mallory Please also send')).toBe(true);
      expect(caller.org.name.startsWith('Mallory Please')).toBe(true);
      const blank = await login(userPrincipal('blank.name@example.com', { name: '\u200b\n' }));
      expect(blank.user.name).toBe('blank.name');
    });

    it('calls a user "User" when neither the token’s name nor the e-mail’s local part is printable', async () => {
      const caller = await login(userPrincipal('\u202e\u200b@example.com', { name: '\r\n' }));

      expect(caller.user.name).toBe('User');
      expect(caller.org.name).toBe("User's organization");
    });

    it('creates a personal organization with the user as ORG_ADMIN and emits org.created', async () => {
      const caller = await login(userPrincipal('ada@example.com', { name: 'Ada Lovelace' }));

      expect(caller).toEqual({
        user: { id: expect.any(String), email: 'ada@example.com', name: 'Ada Lovelace' },
        org: {
          id: expect.any(String),
          name: "Ada Lovelace's organization",
          domain: null,
          createdAt: clock.now(),
        },
        memberId: expect.any(String),
        role: 'ORG_ADMIN',
        dashboardAccess: true,
      });
      expect(store.state.users.size).toBe(1);
      expect(store.state.orgs.size).toBe(1);
      expect([...store.state.members.values()]).toEqual([
        {
          id: caller.memberId,
          orgId: caller.org.id,
          userId: caller.user.id,
          role: 'ORG_ADMIN',
          dashboardAccess: true,
          joinedAt: clock.now(),
        },
      ]);
      expect(store.state.events).toEqual([
        {
          type: 'org.created',
          data: {
            org_id: caller.org.id,
            name: "Ada Lovelace's organization",
            domain: null,
            created_at: clock.now().toISOString(),
          },
        },
      ]);
    });

    it('reuses the user and organization at the next login, without writing', async () => {
      const first = await login(userPrincipal('ada@example.com'));
      const commits = store.commits;
      clock.advance(HOUR);

      const second = await login(userPrincipal('ada@example.com'));

      expect(second).toEqual(first);
      expect(store.commits).toBe(commits);
      expect(store.state.users.size).toBe(1);
      expect(store.state.orgs.size).toBe(1);
      expect(store.eventsOf('org.created')).toHaveLength(1);
    });

    it('refreshes e-mail and name from the token', async () => {
      const first = await login(userPrincipal('ada@example.com', { name: 'Ada' }));

      const second = await login(
        userPrincipal('ada@example.com', { email: 'ada.lovelace@example.com', name: 'Ada Lovelace' }),
      );

      expect(second.user).toEqual({
        id: first.user.id,
        email: 'ada.lovelace@example.com',
        name: 'Ada Lovelace',
      });
      expect(second.org.id).toBe(first.org.id);
      expect(store.state.users.get(first.user.id)).toMatchObject({
        email: 'ada.lovelace@example.com',
        name: 'Ada Lovelace',
      });
      const [member] = await service.listMembers(first.org.id, firstPage);
      expect(member).toMatchObject({ email: 'ada.lovelace@example.com', name: 'Ada Lovelace' });
      expect(store.state.orgs.size).toBe(1);
    });

    it('refreshes a changed e-mail when the name is unchanged', async () => {
      const first = await login(userPrincipal('ada@example.com', { name: 'Ada' }));

      const second = await login(
        userPrincipal('ada@example.com', { email: 'ada.lovelace@example.com', name: 'Ada' }),
      );

      expect(second.user).toEqual({ id: first.user.id, email: 'ada.lovelace@example.com', name: 'Ada' });
      expect(store.state.users.get(first.user.id)?.email).toBe('ada.lovelace@example.com');
    });

    it('refreshes a changed name when the e-mail is unchanged', async () => {
      const first = await login(userPrincipal('ada@example.com', { name: 'Ada' }));

      const second = await login(userPrincipal('ada@example.com', { name: 'Ada Lovelace' }));

      expect(second.user).toEqual({ id: first.user.id, email: 'ada@example.com', name: 'Ada Lovelace' });
      expect(store.state.users.get(first.user.id)?.name).toBe('Ada Lovelace');
    });

    it('tells users apart by issuer and subject, not by e-mail', async () => {
      const a = await login(userPrincipal('ada@example.com'));
      const b = await login(userPrincipal('ada@example.com', { issuer: 'https://other-idp.test/' }));

      expect(b.user.id).not.toBe(a.user.id);
      expect(b.org.id).not.toBe(a.org.id);
    });

    it('creates one user and one organization for concurrent first requests', async () => {
      const principal = userPrincipal('ada@example.com');

      const callers = await Promise.all([login(principal), login(principal), login(principal)]);

      expect(new Set(callers.map((c) => c.org.id)).size).toBe(1);
      expect(new Set(callers.map((c) => c.user.id)).size).toBe(1);
      expect(store.state.users.size).toBe(1);
      expect(store.state.orgs.size).toBe(1);
      expect(store.eventsOf('org.created')).toHaveLength(1);
    });

    it('retries after a UniqueConflict and then uses the rows the other request created', async () => {
      const principal = userPrincipal('ada@example.com');
      const racer = { userId: randomUUID(), orgId: randomUUID(), memberId: randomUUID() };
      // The other first request of the same user commits while ours is in flight.
      store.interleaveBeforeNextCommit(async (committed) => {
        const at = clock.now();
        await committed.insertUser({
          id: racer.userId,
          issuer: ISSUER,
          subject: principal.subject,
          email: principal.email,
          name: principal.name,
          createdAt: at,
        });
        await committed.insertOrganization({
          id: racer.orgId,
          name: "ada's organization",
          domain: null,
          createdAt: at,
        });
        await committed.insertMember({
          id: racer.memberId,
          orgId: racer.orgId,
          userId: racer.userId,
          role: 'ORG_ADMIN',
          dashboardAccess: true,
          joinedAt: at,
        });
        await committed.emit('org.created', {
          org_id: racer.orgId,
          name: "ada's organization",
          domain: null,
          created_at: at.toISOString(),
        });
      });

      const caller = await login(principal);

      expect(caller).toMatchObject({
        user: { id: racer.userId },
        org: { id: racer.orgId },
        memberId: racer.memberId,
        role: 'ORG_ADMIN',
      });
      expect(store.rollbacks).toBe(1);
      // Our first attempt left nothing behind: one user, one organization, one org.created (the other's).
      expect(store.state.users.size).toBe(1);
      expect(store.state.orgs.size).toBe(1);
      expect(store.state.members.size).toBe(1);
      expect(store.eventsOf('org.created')).toEqual([expect.objectContaining({ org_id: racer.orgId })]);
    });

    it('retries a UniqueConflict once only, and does not retry other errors', async () => {
      let attempts = 0;
      const conflicting: IdentityStore = {
        read: (work) => store.read(work),
        transaction: async () => {
          attempts += 1;
          throw new UniqueConflict();
        },
      };
      const flaky = new IdentityService(conflicting, settings, clock, ids);
      await expect(flaky.resolveCaller(userPrincipal('ada@example.com'), null)).rejects.toBeInstanceOf(
        UniqueConflict,
      );
      expect(attempts).toBe(2);

      attempts = 0;
      const broken: IdentityStore = {
        read: (work) => store.read(work),
        transaction: async () => {
          attempts += 1;
          throw new Error('connection reset');
        },
      };
      const failing = new IdentityService(broken, settings, clock, ids);
      await expect(failing.resolveCaller(userPrincipal('ada@example.com'), null)).rejects.toThrow(
        'connection reset',
      );
      expect(attempts).toBe(1);
    });

    it('gives a member removed from every organization a new personal organization at the next login', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const grace = await join(admin, 'grace@example.com', 'ANALYST');
      // Grace joined by invite at her first login, so she has no personal organization.
      expect(store.state.orgs.size).toBe(1);
      await service.removeMember(admin.org.id, grace.memberId!);

      const again = await login(userPrincipal('grace@example.com'));

      expect(again.org.id).not.toBe(admin.org.id);
      expect(again.org.name).toBe("grace's organization");
      expect(again.role).toBe('ORG_ADMIN');
      expect(store.eventsOf('org.created')).toHaveLength(2);
    });
  });

  describe('joining through an accepted invite', () => {
    it('makes an existing user a member at the next login, emits member.joined and marks the invite joined', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada' }));
      const grace = await login(userPrincipal('grace@example.com', { name: 'Grace' }));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);
      clock.advance(1_000);
      await service.acceptInvite(tokenOf(invite.id));
      clock.advance(1_000);

      const joined = await login(userPrincipal('grace@example.com', { name: 'Grace' }));

      // The most recently joined organization is the default.
      expect(joined).toMatchObject({
        user: { id: grace.user.id },
        org: { id: admin.org.id },
        role: 'ANALYST',
        dashboardAccess: true,
      });
      expect(joined.memberId).not.toBe(grace.memberId);
      expect(store.state.invites.get(invite.id)?.status).toBe('joined');
      expect(store.eventsOf('member.joined')).toEqual([
        {
          org_id: admin.org.id,
          member_id: joined.memberId,
          user_id: grace.user.id,
          email: 'grace@example.com',
          name: 'Grace',
          role: 'ANALYST',
          joined_at: clock.now().toISOString(),
        },
      ]);
      // She keeps her personal organization and can pick it.
      expect(await login(userPrincipal('grace@example.com', { name: 'Grace' }), grace.org.id)).toMatchObject({
        org: { id: grace.org.id },
        role: 'ORG_ADMIN',
      });
      // No further writes: the invite is consumed.
      const commits = store.commits;
      await login(userPrincipal('grace@example.com', { name: 'Grace' }));
      expect(store.commits).toBe(commits);
      expect(store.eventsOf('member.joined')).toHaveLength(1);
    });

    it('lets a newer invite replace an accepted one that has not become a membership yet', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada' }));
      const first = await service.createInvite(admin.org.id, 'grace@example.com', 'APP_USER', admin.memberId);
      clock.advance(1_000);
      await service.acceptInvite(tokenOf(first.id));
      clock.advance(1_000);
      const corrected = await service.createInvite(
        admin.org.id,
        'grace@example.com',
        'ORG_ADMIN',
        admin.memberId,
      );
      expect(store.state.invites.get(first.id)?.status).toBe('expired');
      clock.advance(1_000);
      await service.acceptInvite(tokenOf(corrected.id));
      clock.advance(1_000);

      const grace = await login(userPrincipal('grace@example.com', { name: 'Grace' }));
      expect(grace).toMatchObject({ org: { id: admin.org.id }, role: 'ORG_ADMIN' });
      expect(store.eventsOf('member.joined')).toHaveLength(1);
    });

    it('announces role, access and removal changes (member.updated, member.removed), and nothing for a no-op', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada' }));
      const grace = await join(admin, 'grace@example.com', 'ANALYST');
      await service.updateMember(admin.org.id, grace.memberId!, { role: 'ANALYST' });
      expect(store.eventsOf('member.updated')).toEqual([]);
      await service.updateMember(admin.org.id, grace.memberId!, { dashboardAccess: false });
      expect(store.eventsOf('member.updated')).toEqual([
        expect.objectContaining({
          org_id: admin.org.id,
          member_id: grace.memberId,
          user_id: grace.user.id,
          role: 'ANALYST',
          dashboard_access: false,
        }),
      ]);
      await service.removeMember(admin.org.id, grace.memberId!);
      expect(store.eventsOf('member.removed')).toEqual([
        expect.objectContaining({ org_id: admin.org.id, member_id: grace.memberId, user_id: grace.user.id }),
      ]);
    });

    it('announces a change of role alone (member.updated with the new role)', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada' }));
      const grace = await join(admin, 'grace@example.com', 'ANALYST');

      await service.updateMember(admin.org.id, grace.memberId!, { role: 'APP_USER' });

      expect(store.eventsOf('member.updated')).toEqual([
        expect.objectContaining({
          org_id: admin.org.id,
          member_id: grace.memberId,
          role: 'APP_USER',
          dashboard_access: true,
        }),
      ]);
    });

    it('gives a new user who accepted an invite only the inviting organization', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(
        admin.org.id,
        'grace@example.com',
        'APP_USER',
        admin.memberId,
      );
      await service.acceptInvite(tokenOf(invite.id));

      const grace = await login(userPrincipal('grace@example.com'));

      expect(grace).toMatchObject({ org: { id: admin.org.id }, role: 'APP_USER' });
      expect(store.state.orgs.size).toBe(1);
      expect(store.eventsOf('org.created')).toHaveLength(1);
      expect(store.eventsOf('member.joined')).toHaveLength(1);
    });

    it('binds the invite to the e-mail address case-insensitively', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(admin.org.id, 'Grace@Example.COM', 'ANALYST', admin.memberId);
      await service.acceptInvite(tokenOf(invite.id));

      const grace = await login(userPrincipal('GRACE@example.com', { subject: 'sub|grace' }));

      expect(grace).toMatchObject({ org: { id: admin.org.id }, role: 'ANALYST' });
    });

    it('does not let an unverified e-mail address unlock the invite', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(
        admin.org.id,
        'grace@example.com',
        'ORG_ADMIN',
        admin.memberId,
      );
      await service.acceptInvite(tokenOf(invite.id));

      const unverified = await login(userPrincipal('grace@example.com', { emailVerified: false }));

      expect(unverified.org.id).not.toBe(admin.org.id);
      expect(unverified.role).toBe('ORG_ADMIN');
      expect(
        await failure(login(userPrincipal('grace@example.com', { emailVerified: false }), admin.org.id)),
      ).toMatchObject({ code: 'ORGANIZATION_NOT_FOUND' });
      expect(store.state.invites.get(invite.id)?.status).toBe('accepted');
      expect(store.eventsOf('member.joined')).toHaveLength(0);

      // Once the provider says the address is verified, the invite applies.
      clock.advance(1_000);
      const verified = await login(userPrincipal('grace@example.com'));
      expect(verified).toMatchObject({ org: { id: admin.org.id }, role: 'ORG_ADMIN' });
      expect(store.state.invites.get(invite.id)?.status).toBe('joined');
    });

    it('does not join on a pending (not yet accepted) invite', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);

      const grace = await login(userPrincipal('grace@example.com'));

      expect(grace.org.id).not.toBe(admin.org.id);
      expect(store.state.invites.get(invite.id)?.status).toBe('pending');
    });

    it('consumes an accepted invite for an address that is already a member, keeping the membership as it was', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada' }));
      const grace = await join(admin, 'grace@example.com', 'ANALYST');
      const invite = await service.createInvite(
        admin.org.id,
        'grace.hopper@example.com',
        'ORG_ADMIN',
        admin.memberId,
      );
      await service.acceptInvite(tokenOf(invite.id));
      clock.advance(1_000);

      // Grace's provider now gives her the invited address: she is the member the invite is for.
      const again = await login(
        userPrincipal('grace.hopper@example.com', { subject: userPrincipal('grace@example.com').subject }),
      );

      expect(again).toMatchObject({
        user: { id: grace.user.id },
        org: { id: admin.org.id },
        memberId: grace.memberId,
        role: 'ANALYST',
      });
      expect(store.state.invites.get(invite.id)?.status).toBe('joined');
      expect([...store.state.members.values()].filter((m) => m.userId === grace.user.id)).toHaveLength(1);
      expect(store.eventsOf('member.joined')).toHaveLength(1);
    });
  });

  describe('choosing the organization', () => {
    it('acts in the requested organization when the user belongs to it', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const grace = await login(userPrincipal('grace@example.com'));
      await join(admin, 'grace@example.com', 'APP_USER');

      expect(await login(userPrincipal('grace@example.com'), grace.org.id)).toMatchObject({
        org: { id: grace.org.id },
        role: 'ORG_ADMIN',
      });
      expect(await login(userPrincipal('grace@example.com'), admin.org.id)).toMatchObject({
        org: { id: admin.org.id },
        role: 'APP_USER',
      });
    });

    it('answers ORGANIZATION_NOT_FOUND for an unknown organization and for one the user is not in', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      await login(userPrincipal('grace@example.com'));

      await expectCode(login(userPrincipal('grace@example.com'), randomUUID()), 'ORGANIZATION_NOT_FOUND');
      await expectCode(login(userPrincipal('grace@example.com'), admin.org.id), 'ORGANIZATION_NOT_FOUND');
      await expectCode(login(userPrincipal('grace@example.com'), 'not-a-uuid'), 'ORGANIZATION_NOT_FOUND');
    });
  });

  describe('client-credentials callers', () => {
    it('act in the organization named by the token, with its role, as no member', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const commits = store.commits;

      const caller = await login({
        kind: 'client',
        issuer: ISSUER,
        subject: 'integration-1',
        orgId: admin.org.id,
        role: 'ANALYST',
      });

      expect(caller).toEqual({
        user: { id: 'client:integration-1', email: '', name: 'integration-1' },
        org: admin.org,
        memberId: null,
        role: 'ANALYST',
        dashboardAccess: true,
      });
      expect(store.commits).toBe(commits);
      expect(store.state.users.size).toBe(1);
    });

    it('are UNAUTHENTICATED when the token names an unknown organization', async () => {
      await expectCode(
        login({
          kind: 'client',
          issuer: ISSUER,
          subject: 'integration-1',
          orgId: randomUUID(),
          role: 'ORG_ADMIN',
        }),
        'UNAUTHENTICATED',
      );
      expect(store.state.orgs.size).toBe(0);
      expect(store.state.users.size).toBe(0);
    });
  });

  describe('members and the last-admin rule', () => {
    it('lists the members of one organization in join order', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const grace = await join(admin, 'grace@example.com', 'ANALYST');
      await login(userPrincipal('other@example.com'));

      const members = await service.listMembers(admin.org.id, firstPage);

      expect(members.map((m) => [m.id, m.email, m.role])).toEqual([
        [admin.memberId, 'ada@example.com', 'ORG_ADMIN'],
        [grace.memberId, 'grace@example.com', 'ANALYST'],
      ]);
    });

    it('refuses to demote, disable or remove the last effective admin', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const orgId = admin.org.id;
      const memberId = admin.memberId!;

      await expectCode(service.updateMember(orgId, memberId, { role: 'ANALYST' }), 'LAST_ADMIN');
      await expectCode(service.updateMember(orgId, memberId, { dashboardAccess: false }), 'LAST_ADMIN');
      await expectCode(
        service.updateMember(orgId, memberId, { role: 'APP_USER', dashboardAccess: false }),
        'LAST_ADMIN',
      );
      await expectCode(service.removeMember(orgId, memberId), 'LAST_ADMIN');

      expect(store.state.members.get(memberId)).toMatchObject({ role: 'ORG_ADMIN', dashboardAccess: true });
      // A no-op change is fine.
      expect(
        await service.updateMember(orgId, memberId, { role: 'ORG_ADMIN', dashboardAccess: true }),
      ).toMatchObject({ role: 'ORG_ADMIN' });
    });

    it('allows it when a second effective admin remains, and then protects that one', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const grace = await join(admin, 'grace@example.com', 'ORG_ADMIN');
      const orgId = admin.org.id;

      const demoted = await service.updateMember(orgId, admin.memberId!, { role: 'ANALYST' });

      expect(demoted).toMatchObject({
        id: admin.memberId,
        email: 'ada@example.com',
        role: 'ANALYST',
        dashboardAccess: true,
      });
      expect(store.state.members.get(admin.memberId!)).toMatchObject({
        role: 'ANALYST',
        dashboardAccess: true,
      });
      await expectCode(
        service.updateMember(orgId, grace.memberId!, { dashboardAccess: false }),
        'LAST_ADMIN',
      );
      await expectCode(service.removeMember(orgId, grace.memberId!), 'LAST_ADMIN');

      // With two effective admins again, one of them may be removed or disabled.
      await service.updateMember(orgId, admin.memberId!, { role: 'ORG_ADMIN' });
      await service.updateMember(orgId, grace.memberId!, { dashboardAccess: false });
      expect(store.state.members.get(grace.memberId!)).toMatchObject({
        role: 'ORG_ADMIN',
        dashboardAccess: false,
      });
    });

    it('does not count an ORG_ADMIN without dashboard access, who may be changed or removed freely', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const grace = await join(admin, 'grace@example.com', 'ORG_ADMIN');
      const orgId = admin.org.id;
      await service.updateMember(orgId, grace.memberId!, { dashboardAccess: false });

      // Grace is ORG_ADMIN without dashboard access: Ada is the only effective admin.
      await expectCode(service.updateMember(orgId, admin.memberId!, { role: 'ANALYST' }), 'LAST_ADMIN');
      await expectCode(service.removeMember(orgId, admin.memberId!), 'LAST_ADMIN');

      expect(await service.updateMember(orgId, grace.memberId!, { role: 'APP_USER' })).toMatchObject({
        role: 'APP_USER',
        dashboardAccess: false,
      });
      await service.removeMember(orgId, grace.memberId!);
      expect(store.state.members.has(grace.memberId!)).toBe(false);
    });

    it('keeps the other field when only one is patched', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const grace = await join(admin, 'grace@example.com', 'ANALYST');

      expect(
        await service.updateMember(admin.org.id, grace.memberId!, { dashboardAccess: false }),
      ).toMatchObject({ role: 'ANALYST', dashboardAccess: false });
      expect(await service.updateMember(admin.org.id, grace.memberId!, { role: 'APP_USER' })).toMatchObject({
        role: 'APP_USER',
        dashboardAccess: false,
      });
    });

    it('answers MEMBER_NOT_FOUND for unknown members and for members of another organization', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const other = await login(userPrincipal('other@example.com'));

      await expectCode(
        service.updateMember(admin.org.id, randomUUID(), { role: 'ANALYST' }),
        'MEMBER_NOT_FOUND',
      );
      await expectCode(
        service.updateMember(admin.org.id, other.memberId!, { role: 'ANALYST' }),
        'MEMBER_NOT_FOUND',
      );
      await expectCode(service.removeMember(admin.org.id, other.memberId!), 'MEMBER_NOT_FOUND');
      await expectCode(service.removeMember(admin.org.id, 'not-a-uuid'), 'MEMBER_NOT_FOUND');
      expect(store.state.members.get(other.memberId!)).toMatchObject({ role: 'ORG_ADMIN' });
    });
  });

  describe('creating invites', () => {
    it('lets an organization send a bounded number of invites per UTC day; refused ones do not count', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada Lovelace' }));
      const invite = (n: number) =>
        service.createInvite(admin.org.id, `guest${n}@example.com`, 'ANALYST', admin.memberId);
      // Refused for another reason (already a member): not counted.
      await expectCode(
        service.createInvite(admin.org.id, 'ada@example.com', 'ANALYST', admin.memberId),
        'ALREADY_MEMBER',
      );
      await invite(0);
      await expectCode(invite(0), 'INVITE_ALREADY_PENDING');
      for (let n = 1; n < EMAILS_PER_DAY; n += 1) await invite(n);
      // Revoking does not give the quota back (invite and revoke in a loop would send unlimited e-mail).
      const [first] = [...store.state.invites.values()];
      await service.revokeInvite(admin.org.id, first!.id);
      const refused = await failure(invite(100));
      expect([refused.code, refused.httpStatus]).toEqual(['RATE_LIMITED', 429]);
      expect(store.eventsOf('invite.created')).toHaveLength(EMAILS_PER_DAY);
      expect([...store.state.invites.values()].some((i) => i.email === 'guest100@example.com')).toBe(false);
      // Another organization has its own quota; the next UTC day starts afresh.
      const other = await login(userPrincipal('bob@example.org'));
      await service.createInvite(other.org.id, 'x@example.org', 'ANALYST', other.memberId);
      clock.advance(24 * HOUR);
      await expect(invite(101)).resolves.toMatchObject({ email: 'guest101@example.com' });
      // Past days are forgotten as the organization sends again.
      expect([...store.state.outboundEmails.values()].filter((e) => e.orgId === admin.org.id)).toHaveLength(
        1,
      );
    });

    it('shares one daily quota between invites and e-mailed enrollment codes (issue 26)', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const orgId = admin.org.id;
      await service.createInvite(orgId, 'a@example.com', 'ANALYST', admin.memberId);
      await service.createInvite(orgId, 'b@example.com', 'ANALYST', admin.memberId);
      const reservations = [];
      for (const to of ['c@example.com', 'd@example.com', 'e@example.com'])
        reservations.push(await service.reserveOutboundEmail(orgId, to));
      expect(new Set(reservations.map((r) => r.reservationId)).size).toBe(3);
      // Five taken: neither kind gets another.
      await expectCode(service.reserveOutboundEmail(orgId, 'f@example.com'), 'RATE_LIMITED');
      await expectCode(
        service.createInvite(orgId, 'f@example.com', 'ANALYST', admin.memberId),
        'RATE_LIMITED',
      );
      expect(store.eventsOf('invite.created')).toHaveLength(2);
      // A reservation whose e-mail was refused is given back, once; invites are never given back.
      await service.releaseOutboundEmail(orgId, reservations[0]!.reservationId);
      await service.releaseOutboundEmail(orgId, reservations[0]!.reservationId);
      const inviteId = [...store.state.invites.values()][0]!.id;
      await service.releaseOutboundEmail(orgId, inviteId);
      await service.releaseOutboundEmail(orgId, 'not-a-reservation');
      await service.createInvite(orgId, 'f@example.com', 'ANALYST', admin.memberId);
      await expectCode(service.reserveOutboundEmail(orgId, 'g@example.com'), 'RATE_LIMITED');
      // Of another organization, a reservation is not found.
      const other = await login(userPrincipal('bob@example.org'));
      const theirs = await service.reserveOutboundEmail(other.org.id, 'x@example.org');
      await service.releaseOutboundEmail(orgId, theirs.reservationId);
      expect(store.state.outboundEmails.has(theirs.reservationId)).toBe(true);
      await expectCode(service.reserveOutboundEmail(randomUUID(), 'x@example.org'), 'ORGANIZATION_NOT_FOUND');
    });

    it('limits what one recipient gets per day, whatever the kind and however the address is spelt', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const orgId = admin.org.id;
      const invite = await service.createInvite(orgId, 'Grace@Example.com', 'ANALYST', admin.memberId);
      await service.reserveOutboundEmail(orgId, ' grace@example.COM ');
      await expectCode(service.reserveOutboundEmail(orgId, 'grace@example.com'), 'RATE_LIMITED');
      await service.revokeInvite(orgId, invite.id);
      await expectCode(
        service.createInvite(orgId, 'grace@example.com', 'ANALYST', admin.memberId),
        'RATE_LIMITED',
      );
      // Others still may be e-mailed, and the recipient's address is not stored in plain text.
      await service.reserveOutboundEmail(orgId, 'alan@example.com');
      const stored = [...store.state.outboundEmails.values()];
      expect(stored.map((e) => e.recipientHash)).toContain(hashSecret('grace@example.com'));
      expect(JSON.stringify(stored)).not.toContain('grace');
      // Another organization may still write to her.
      const other = await login(userPrincipal('bob@example.org'));
      await service.reserveOutboundEmail(other.org.id, 'grace@example.com');
      clock.advance(24 * HOUR);
      await service.reserveOutboundEmail(orgId, 'grace@example.com');
    });

    it('limits what one recipient gets per day from all organizations together (issue 26 review)', async () => {
      // Anyone who signs in gets an organization: each account's organization may write to the victim twice.
      const callers = [];
      for (const who of ['a@example.org', 'b@example.org', 'c@example.org'])
        callers.push(await login(userPrincipal(who)));
      const [a, b, c] = callers.map((caller) => caller.org.id) as [string, string, string];
      await service.reserveOutboundEmail(a, 'victim@example.com');
      const { reservationId } = await service.reserveOutboundEmail(a, 'Victim@Example.com');
      await service.reserveOutboundEmail(b, 'victim@example.com');
      // Three in all: B's second and C's first are refused, though neither used its own limit.
      const refused = await failure(service.reserveOutboundEmail(b, 'victim@example.com'));
      expect([refused.code, refused.httpStatus]).toEqual(['RATE_LIMITED', 429]);
      // The answer does not tell who else wrote to the address, nor how often.
      expect(refused.message).not.toMatch(/organization|3|three/);
      await expectCode(service.reserveOutboundEmail(c, ' VICTIM@example.com'), 'RATE_LIMITED');
      await expectCode(
        service.createInvite(c, 'victim@example.com', 'ANALYST', callers[2]!.memberId),
        'RATE_LIMITED',
      );
      expect(store.eventsOf('invite.created')).toHaveLength(0);
      expect(
        [...store.state.outboundEmails.values()].filter(
          (e) => e.recipientHash === hashSecret('victim@example.com'),
        ),
      ).toHaveLength(EMAILS_PER_RECIPIENT_ALL_ORGS);
      // The refusals took nothing of the organizations' quotas; others may still be e-mailed.
      await service.reserveOutboundEmail(c, 'someone@example.com');
      // A reservation given back frees its place for any organization; the next UTC day starts afresh.
      await service.releaseOutboundEmail(a, reservationId);
      await service.reserveOutboundEmail(c, 'victim@example.com');
      await expectCode(service.reserveOutboundEmail(b, 'victim@example.com'), 'RATE_LIMITED');
      clock.advance(24 * HOUR);
      await service.reserveOutboundEmail(b, 'victim@example.com');
    });

    it('counts all e-mails of a UTC day, whenever in the day they were sent, and starts afresh at midnight UTC', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      // The clock starts at noon UTC: one e-mail an hour until the quota is used up.
      for (let n = 0; n < EMAILS_PER_DAY; n += 1) {
        await service.reserveOutboundEmail(admin.org.id, `guest${n}@example.com`);
        clock.advance(HOUR);
      }
      const midnight = Date.parse('2026-03-02T00:00:00.000Z');
      clock.advance(midnight - clock.now().getTime() - 1);
      await expectCode(service.reserveOutboundEmail(admin.org.id, 'late@example.com'), 'RATE_LIMITED');

      clock.advance(1);
      await service.reserveOutboundEmail(admin.org.id, 'late@example.com');
    });

    it('tells a refused sender which daily limit was reached and that it lasts for the UTC day', async () => {
      const callers = [];
      for (const who of ['a@example.org', 'b@example.org']) callers.push(await login(userPrincipal(who)));
      const [a, b] = callers.map((caller) => caller.org.id) as [string, string];
      for (let n = 0; n < EMAILS_PER_DAY; n += 1)
        await service.reserveOutboundEmail(a, `guest${n}@example.com`);
      for (let n = 0; n < EMAILS_PER_RECIPIENT; n += 1)
        await service.reserveOutboundEmail(b, 'grace@example.com');

      const ofOrg = await failure(service.reserveOutboundEmail(a, 'someone@example.com'));
      expect(ofOrg.message).toContain(`this organization has sent its ${EMAILS_PER_DAY} e-mails`);
      expect(ofOrg.message).toContain('today (UTC)');
      const toRecipient = await failure(service.reserveOutboundEmail(b, 'Grace@example.com'));
      expect(toRecipient.message).toContain(
        `this organization has sent ${EMAILS_PER_RECIPIENT} e-mails to grace@example.com`,
      );
      expect(toRecipient.message).toContain('today (UTC); try again tomorrow');
      // The third organization to write to Grace today hits the limit across all organizations.
      const third = await login(userPrincipal('c@example.org'));
      await service.reserveOutboundEmail(third.org.id, 'grace@example.com');
      const allOrgs = await failure(service.reserveOutboundEmail(third.org.id, 'grace@example.com'));
      expect(allOrgs.message).toContain('grace@example.com has been sent as many e-mails');
      expect(allOrgs.message).toContain('today (UTC); try again tomorrow');
    });

    it('stores a lower-cased pending invite that expires after the TTL and seals its token in invite.created', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada Lovelace' }));
      const now = clock.now();

      const invite = await service.createInvite(
        admin.org.id,
        '  Grace@Example.COM ',
        'ANALYST',
        admin.memberId,
      );

      expect(invite).toEqual({
        id: expect.any(String),
        orgId: admin.org.id,
        email: 'grace@example.com',
        role: 'ANALYST',
        status: 'pending',
        tokenHash: expect.stringMatching(/^[0-9a-f]{64}$/),
        invitedByMemberId: admin.memberId,
        createdAt: now,
        expiresAt: new Date(now.getTime() + TTL_HOURS * HOUR),
        acceptedAt: null,
      });
      expect(store.state.invites.get(invite.id)).toEqual(invite);

      const [event] = store.eventsOf('invite.created');
      expect(event).toEqual({
        org_id: admin.org.id,
        org_name: "Ada Lovelace's organization",
        invite_id: invite.id,
        email: 'grace@example.com',
        role: 'ANALYST',
        invited_by_name: 'Ada Lovelace',
        expires_at: invite.expiresAt.toISOString(),
        token_sealed: expect.any(String),
      });
      const token = openSealedSecret(event!.token_sealed, sealingKey, SEALING_CONTEXTS.inviteToken(event!));
      expect(token).toMatch(/^sts_inv_[A-Za-z0-9_-]{43}$/);
      expect(hashSecret(token)).toBe(invite.tokenHash);
      // The token is never plain text in the outbox, and the seal is bound to its event type.
      expect(JSON.stringify(store.state.events)).not.toContain(token);
      expect(() => openSealedSecret(event!.token_sealed, sealingKey, 'member.joined')).toThrow();
      // ...and to its recipient and organization: replayed with another e-mail or org, it does not open.
      for (const altered of [
        { ...event!, email: 'attacker@evil.test' },
        { ...event!, org_id: 'another-org' },
      ]) {
        expect(() =>
          openSealedSecret(event!.token_sealed, sealingKey, SEALING_CONTEXTS.inviteToken(altered)),
        ).toThrow();
      }
    });

    it('names the organization as inviter when there is no inviting member', async () => {
      const admin = await login(userPrincipal('ada@example.com', { name: 'Ada' }));

      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'APP_USER', null);

      expect(invite.invitedByMemberId).toBeNull();
      expect(store.eventsOf('invite.created')[0]?.invited_by_name).toBe("Ada's organization");
    });

    it('refuses to invite a member (ALREADY_MEMBER), comparing e-mail case-insensitively', async () => {
      const admin = await login(userPrincipal('Ada@Example.com'));

      await expectCode(
        service.createInvite(admin.org.id, 'ada@EXAMPLE.com', 'ANALYST', admin.memberId),
        'ALREADY_MEMBER',
      );
      expect(store.state.invites.size).toBe(0);
      expect(store.eventsOf('invite.created')).toHaveLength(0);
    });

    it('keeps one pending invite per e-mail and organization (INVITE_ALREADY_PENDING)', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const other = await login(userPrincipal('other@example.com'));
      await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);

      await expectCode(
        service.createInvite(admin.org.id, 'GRACE@example.com', 'APP_USER', admin.memberId),
        'INVITE_ALREADY_PENDING',
      );
      expect(store.state.invites.size).toBe(1);
      expect(store.eventsOf('invite.created')).toHaveLength(1);

      // Another organization may invite the same address.
      await service.createInvite(other.org.id, 'grace@example.com', 'ANALYST', other.memberId);
      expect(store.state.invites.size).toBe(2);
    });

    it('replaces a pending invite whose lifetime ran out', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const old = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);
      clock.advance(TTL_HOURS * HOUR);

      const fresh = await service.createInvite(admin.org.id, 'grace@example.com', 'APP_USER', admin.memberId);

      expect(store.state.invites.get(old.id)?.status).toBe('expired');
      expect(store.state.invites.get(fresh.id)?.status).toBe('pending');
      expect((await service.listInvites(admin.org.id, 'pending', firstPage)).map((i) => i.id)).toEqual([
        fresh.id,
      ]);
    });

    it('answers ORGANIZATION_NOT_FOUND for an unknown organization', async () => {
      await expectCode(
        service.createInvite(randomUUID(), 'grace@example.com', 'ANALYST', null),
        'ORGANIZATION_NOT_FOUND',
      );
    });

    it('lists pending, unexpired invites of one organization, oldest first', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const other = await login(userPrincipal('other@example.com'));
      const a = await service.createInvite(admin.org.id, 'a@example.com', 'ANALYST', admin.memberId);
      clock.advance(1_000);
      const b = await service.createInvite(admin.org.id, 'b@example.com', 'ANALYST', admin.memberId);
      const accepted = await service.createInvite(admin.org.id, 'c@example.com', 'ANALYST', admin.memberId);
      await service.acceptInvite(tokenOf(accepted.id));
      await service.createInvite(other.org.id, 'd@example.com', 'ANALYST', other.memberId);

      expect((await service.listInvites(admin.org.id, 'pending', firstPage)).map((i) => i.id)).toEqual([
        a.id,
        b.id,
      ]);
      clock.advance(TTL_HOURS * HOUR - 500);
      expect((await service.listInvites(admin.org.id, 'pending', firstPage)).map((i) => i.id)).toEqual([
        b.id,
      ]);
    });
  });

  describe('revoking invites', () => {
    it('deletes a pending invite once', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);

      await service.revokeInvite(admin.org.id, invite.id);

      expect(store.state.invites.has(invite.id)).toBe(false);
      await expectCode(service.revokeInvite(admin.org.id, invite.id), 'INVITE_NOT_FOUND');
      await expectCode(service.acceptInvite(tokenOf(invite.id)), 'INVITE_TOKEN_INVALID');
    });

    it('answers INVITE_NOT_FOUND for another organization’s invite and leaves it alone', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const other = await login(userPrincipal('other@example.com'));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);

      await expectCode(service.revokeInvite(other.org.id, invite.id), 'INVITE_NOT_FOUND');
      await expectCode(service.revokeInvite(admin.org.id, randomUUID()), 'INVITE_NOT_FOUND');
      await expectCode(service.revokeInvite(admin.org.id, 'not-a-uuid'), 'INVITE_NOT_FOUND');
      expect(store.state.invites.get(invite.id)?.status).toBe('pending');
    });

    it('revokes an accepted invite until its invitee joins: the next sign-in joins nothing (issue 41)', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(
        admin.org.id,
        'grace@example.com',
        'ORG_ADMIN',
        admin.memberId,
      );
      await service.acceptInvite(tokenOf(invite.id));
      const listed = await service.listInvites(admin.org.id, 'accepted', firstPage);
      expect(listed.map((i) => [i.id, i.status])).toEqual([[invite.id, 'accepted']]);
      expect(await service.listInvites(admin.org.id, 'pending', firstPage)).toEqual([]);

      await service.revokeInvite(admin.org.id, invite.id);

      expect(store.state.invites.has(invite.id)).toBe(false);
      const grace = await login(userPrincipal('grace@example.com'));
      expect(grace.org.id).not.toBe(admin.org.id);
      expect(await service.listInvites(admin.org.id, 'accepted', firstPage)).toEqual([]);
    });

    it('cannot revoke an invite once its invitee joined', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);
      await service.acceptInvite(tokenOf(invite.id));
      expect((await login(userPrincipal('grace@example.com'))).org.id).toBe(admin.org.id);

      await expectCode(service.revokeInvite(admin.org.id, invite.id), 'INVITE_NOT_FOUND');
      expect(store.state.invites.get(invite.id)?.status).toBe('joined');
    });

    it('lets an accepted invite be joined only until its expires_at (issue 41)', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(
        admin.org.id,
        'grace@example.com',
        'ORG_ADMIN',
        admin.memberId,
      );
      await service.acceptInvite(tokenOf(invite.id));
      clock.advance(TTL_HOURS * HOUR);

      const grace = await login(userPrincipal('grace@example.com'));

      expect(grace.org.id).not.toBe(admin.org.id);
      expect(store.state.invites.get(invite.id)?.status).toBe('accepted');
      expect(await service.listInvites(admin.org.id, 'accepted', firstPage)).toEqual([]);
    });
  });

  describe('accepting invites', () => {
    it('accepts a live token once and returns the invite and organization', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(
        admin.org.id,
        'grace@example.com',
        'APP_USER',
        admin.memberId,
      );
      clock.advance(HOUR);

      const accepted = await service.acceptInvite(tokenOf(invite.id));

      expect(accepted.org).toEqual(admin.org);
      expect(accepted.invite).toMatchObject({
        id: invite.id,
        email: 'grace@example.com',
        role: 'APP_USER',
        status: 'accepted',
        acceptedAt: clock.now(),
      });
      expect(store.state.invites.get(invite.id)).toMatchObject({
        status: 'accepted',
        acceptedAt: clock.now(),
      });

      await expectCode(service.acceptInvite(tokenOf(invite.id)), 'INVITE_TOKEN_INVALID');
    });

    it('refuses an expired token (valid until just before expires_at)', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const live = await service.createInvite(admin.org.id, 'a@example.com', 'ANALYST', admin.memberId);
      const late = await service.createInvite(admin.org.id, 'b@example.com', 'ANALYST', admin.memberId);
      clock.advance(TTL_HOURS * HOUR - 1);

      await service.acceptInvite(tokenOf(live.id));
      clock.advance(1);
      await expectCode(service.acceptInvite(tokenOf(late.id)), 'INVITE_TOKEN_INVALID');
      expect(store.state.invites.get(late.id)?.status).toBe('pending');
    });

    it('refuses unknown tokens and tokens without the sts_inv_ prefix without a transaction', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);
      const token = tokenOf(invite.id);
      const transactions = store.commits + store.rollbacks;

      await expectCode(service.acceptInvite(token.replace('sts_inv_', 'sts_xyz_')), 'INVITE_TOKEN_INVALID');
      await expectCode(service.acceptInvite(token.slice('sts_inv_'.length)), 'INVITE_TOKEN_INVALID');
      await expectCode(service.acceptInvite(''), 'INVITE_TOKEN_INVALID');
      expect(store.commits + store.rollbacks).toBe(transactions);

      await expectCode(service.acceptInvite(`sts_inv_${'A'.repeat(43)}`), 'INVITE_TOKEN_INVALID');
      await expectCode(service.acceptInvite(`${token}x`), 'INVITE_TOKEN_INVALID');
      expect(store.state.invites.get(invite.id)?.status).toBe('pending');
    });
  });

  describe('previewing invites', () => {
    it('shows what an accept would take, changing nothing, and refuses every token an accept refuses', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);
      const late = await service.createInvite(admin.org.id, 'late@example.com', 'ANALYST', admin.memberId);
      const token = tokenOf(invite.id);
      const before = structuredClone(store.state.invites.get(invite.id));
      const commits = store.commits;

      const previewed = await service.previewInvite(token);
      expect(previewed.org).toEqual(admin.org);
      expect(previewed.invite).toMatchObject({
        id: invite.id,
        email: 'grace@example.com',
        role: 'ANALYST',
        status: 'pending',
        expiresAt: invite.expiresAt,
      });
      // Read, not written: the invite as it was, and no transaction committed.
      expect(store.state.invites.get(invite.id)).toEqual(before);
      expect(store.commits).toBe(commits);

      for (const refused of ['', token.slice('sts_inv_'.length), `sts_inv_${'A'.repeat(43)}`, `${token}x`])
        await expectCode(service.previewInvite(refused), 'INVITE_TOKEN_INVALID');
      clock.advance(TTL_HOURS * HOUR);
      await expectCode(service.previewInvite(tokenOf(late.id)), 'INVITE_TOKEN_INVALID');
    });

    it('refuses an accepted token', async () => {
      const admin = await login(userPrincipal('ada@example.com'));
      const invite = await service.createInvite(admin.org.id, 'grace@example.com', 'ANALYST', admin.memberId);
      await service.previewInvite(tokenOf(invite.id));
      await service.acceptInvite(tokenOf(invite.id));
      await expectCode(service.previewInvite(tokenOf(invite.id)), 'INVITE_TOKEN_INVALID');
    });
  });
});

describe('InMemoryIdentityStore', () => {
  const org = (name: string) => ({
    id: randomUUID(),
    name,
    domain: null,
    createdAt: new Date('2026-03-01T00:00:00Z'),
  });

  it('commits a transaction’s rows and events only when its work succeeds', async () => {
    const store = new InMemoryIdentityStore();
    const kept = org('kept');
    await store.transaction(async (repos) => {
      await repos.insertOrganization(kept);
      await repos.emit('org.created', {
        org_id: kept.id,
        name: kept.name,
        domain: null,
        created_at: kept.createdAt.toISOString(),
      });
    });

    const lost = org('lost');
    await expect(
      store.transaction(async (repos) => {
        await repos.insertOrganization(lost);
        await repos.emit('org.created', {
          org_id: lost.id,
          name: lost.name,
          domain: null,
          created_at: lost.createdAt.toISOString(),
        });
        await repos.updateUserProfile('nobody', 'x@example.com', 'x');
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');

    expect([...store.state.orgs.keys()]).toEqual([kept.id]);
    expect(store.eventsOf('org.created').map((e) => e.org_id)).toEqual([kept.id]);
    expect(store.commits).toBe(1);
    expect(store.rollbacks).toBe(1);
  });

  it('does not show uncommitted writes to reads', async () => {
    const store = new InMemoryIdentityStore();
    const pending = org('pending');
    let seenInside: unknown = 'unset';
    await store.transaction(async (repos) => {
      await repos.insertOrganization(pending);
      seenInside = await store.read((outside) => outside.findOrganization(pending.id));
    });
    expect(seenInside).toBeNull();
    expect(await store.read((repos) => repos.findOrganization(pending.id))).toEqual(pending);
  });

  it('reports a unique key broken by a concurrent commit as UniqueConflict and keeps the other commit', async () => {
    const store = new InMemoryIdentityStore();
    const user = (id: string) => ({
      id,
      issuer: ISSUER,
      subject: 'same',
      email: 'a@example.com',
      name: 'a',
      createdAt: new Date(),
    });
    const theirs = randomUUID();
    store.interleaveBeforeNextCommit((committed) => committed.insertUser(user(theirs)));

    await expect(store.transaction((repos) => repos.insertUser(user(randomUUID())))).rejects.toBeInstanceOf(
      UniqueConflict,
    );

    expect([...store.state.users.keys()]).toEqual([theirs]);
  });

  it('enforces one pending invite per organization and e-mail, as `on conflict do nothing`', async () => {
    const store = new InMemoryIdentityStore();
    const acme = org('acme');
    const invite = (id: string, tokenHash: string) => ({
      id,
      orgId: acme.id,
      email: 'grace@example.com',
      role: 'ANALYST' as const,
      status: 'pending' as const,
      tokenHash,
      invitedByMemberId: null,
      createdAt: new Date('2026-03-01T00:00:00Z'),
      expiresAt: new Date('2026-03-08T00:00:00Z'),
      acceptedAt: null,
    });
    const results = await store.transaction(async (repos) => {
      await repos.insertOrganization(acme);
      return [
        await repos.insertInvite(invite(randomUUID(), 'h1')),
        await repos.insertInvite(invite(randomUUID(), 'h2')),
      ];
    });
    expect(results).toEqual([true, false]);
    expect(store.state.invites.size).toBe(1);
  });
});
