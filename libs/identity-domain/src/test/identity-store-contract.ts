import { createHash, randomUUID } from 'node:crypto';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import { failureOf } from '@sts/testing/failure-of';
import type { Role } from '@sts/vocabulary/roles';
import type { Invite, Member, Organization, User } from '../identity-model';
import type { IdentityStore } from '../identity-ports';

/** A store to check, and what the contract must see of it that the ports do not show. */
export interface IdentityStoreUnderTest {
  store: IdentityStore;
  /** How many outbox events (committed) name the organization in their data. */
  outboxEvents(orgId: string): Promise<number>;
  close?(): Promise<void>;
}

/**
 * The behaviour every `IdentityStore` owes its callers, run against the in-memory store
 * (`in-memory-identity-store.spec.ts`) and the PostgreSQL store (identity-infra's
 * `postgres-identity-store.int-spec.ts`) alike. The domain's unit tests trust the in-memory store to
 * behave as PostgreSQL does (unique keys, scoping by organization, invite states, ordering and paging);
 * this suite is what holds the two to one contract, so that a check written for one is never missing
 * from the other. Each check works in organizations and e-mails of its own, so one store serves the
 * whole suite.
 */
export function describeIdentityStoreContract(
  name: string,
  open: () => Promise<IdentityStoreUnderTest>,
): void {
  describe(`IdentityStore contract: ${name}`, () => {
    let subject: IdentityStoreUnderTest;
    let store: IdentityStore;

    beforeAll(async () => {
      subject = await open();
      store = subject.store;
    });

    afterAll(async () => {
      await subject?.close?.();
    });

    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    const at = (iso: string) => new Date(iso);
    const NOW = at('2026-03-01T12:00:00.000Z');
    const LATER = at('2026-03-01T13:00:00.000Z');
    const minutes = (n: number) => new Date(NOW.getTime() + n * 60_000);
    /** An e-mail no other check uses (the accepted-invite reads are not scoped by organization). */
    const uniqueEmail = (local = 'someone') => `${local}-${randomUUID().slice(0, 8)}@example.com`;

    async function organization(name = 'Acme'): Promise<Organization> {
      const org: Organization = { id: randomUUID(), name, domain: null, createdAt: NOW };
      await store.transaction((repos) => repos.insertOrganization(org));
      return org;
    }

    async function user(email = uniqueEmail(), name = 'Ada'): Promise<User> {
      const created: User = {
        id: randomUUID(),
        issuer: 'https://idp.test/',
        subject: `sub|${randomUUID()}`,
        email,
        name,
        createdAt: NOW,
      };
      await store.transaction((repos) => repos.insertUser(created));
      return created;
    }

    type MemberRow = Omit<Member, 'email' | 'name'>;

    async function member(
      org: Organization,
      of: User,
      overrides: Partial<MemberRow> = {},
    ): Promise<MemberRow> {
      const row: MemberRow = {
        id: randomUUID(),
        orgId: org.id,
        userId: of.id,
        role: 'APP_USER',
        dashboardAccess: true,
        joinedAt: NOW,
        ...overrides,
      };
      await store.transaction((repos) => repos.insertMember(row));
      return row;
    }

    const invite = (org: Organization, email: string, overrides: Partial<Invite> = {}): Invite => ({
      id: randomUUID(),
      orgId: org.id,
      email,
      role: 'ANALYST',
      status: 'pending',
      tokenHash: sha256(randomUUID()),
      invitedByMemberId: null,
      createdAt: NOW,
      expiresAt: at('2026-03-08T12:00:00.000Z'),
      acceptedAt: null,
      ...overrides,
    });

    const insertInvite = (row: Invite) => store.transaction((repos) => repos.insertInvite(row));
    const findInvite = (orgId: string, id: string) => store.read((repos) => repos.findInvite(orgId, id));
    const findMember = (orgId: string, id: string) => store.read((repos) => repos.findMember(orgId, id));

    describe('organizations and users', () => {
      it('finds an organization by id only once inserted, and refuses a second one of that id (UniqueConflict)', async () => {
        const org = await organization('Finds Me');
        expect(await store.read((repos) => repos.findOrganization(org.id))).toEqual(org);
        expect(await store.read((repos) => repos.findOrganization(randomUUID()))).toBeNull();
        expect(await store.read((repos) => repos.findOrganization('not-a-uuid'))).toBeNull();
        expect(
          await failureOf(
            store.transaction((repos) => repos.insertOrganization({ ...org, name: 'Impostor' })),
          ),
        ).toBeInstanceOf(UniqueConflict);
        expect(await store.read((repos) => repos.findOrganization(org.id))).toMatchObject({
          name: 'Finds Me',
        });
      });

      it('keeps one user per (issuer, subject): a second is a UniqueConflict and the first is unchanged', async () => {
        const first = await user(uniqueEmail('first'), 'First');
        const twin: User = { ...first, id: randomUUID(), email: uniqueEmail('twin'), name: 'Twin' };
        expect(await failureOf(store.transaction((repos) => repos.insertUser(twin)))).toBeInstanceOf(
          UniqueConflict,
        );
        const snapshot = await store.read((repos) =>
          repos.findUserSnapshot(first.issuer, first.subject, NOW),
        );
        expect(snapshot).toEqual({ user: first, memberships: [], acceptedInviteCount: 0 });
        expect(
          await store.read((repos) => repos.findUserSnapshot(first.issuer, `sub|${randomUUID()}`, NOW)),
        ).toBeNull();
      });

      it("reads a user's memberships newest first with their organizations; members carry the user's current e-mail and name", async () => {
        const someone = await user(uniqueEmail('snap'), 'Before');
        const [older, newer] = [await organization('Older'), await organization('Newer')];
        const oldMembership = await member(older, someone, { role: 'ORG_ADMIN', joinedAt: NOW });
        const newMembership = await member(newer, someone, { dashboardAccess: false, joinedAt: LATER });
        const email = uniqueEmail('after');
        await store.transaction((repos) => repos.updateUserProfile(someone.id, email, 'After'));

        const snapshot = await store.read((repos) =>
          repos.findUserSnapshot(someone.issuer, someone.subject, NOW),
        );
        expect(snapshot).toEqual({
          user: { ...someone, email, name: 'After' },
          memberships: [
            { member: { ...newMembership, email, name: 'After' }, org: newer },
            { member: { ...oldMembership, email, name: 'After' }, org: older },
          ],
          acceptedInviteCount: 0,
        });
        expect(await findMember(older.id, oldMembership.id)).toEqual({
          ...oldMembership,
          email,
          name: 'After',
        });
      });
    });

    describe('members', () => {
      it('are found, changed and deleted only within their organization', async () => {
        const [org, stranger] = [await organization(), await organization('Stranger')];
        const row = await member(org, await user());
        await store.transaction(async (repos) => {
          await repos.updateMember(stranger.id, row.id, { role: 'ORG_ADMIN', dashboardAccess: false });
          await repos.deleteMember(stranger.id, row.id);
        });
        expect(await findMember(stranger.id, row.id)).toBeNull();
        expect(await findMember(org.id, row.id)).toMatchObject({ role: 'APP_USER', dashboardAccess: true });

        await store.transaction((repos) =>
          repos.updateMember(org.id, row.id, { role: 'ANALYST', dashboardAccess: false }),
        );
        expect(await findMember(org.id, row.id)).toMatchObject({
          id: row.id,
          role: 'ANALYST',
          dashboardAccess: false,
          joinedAt: NOW,
        });
        await store.transaction((repos) => repos.deleteMember(org.id, row.id));
        expect(await findMember(org.id, row.id)).toBeNull();
        expect(await findMember(org.id, 'not-a-uuid')).toBeNull();
      });

      it('are one per (organization, user): a second is a UniqueConflict, while another organization may add the user', async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const someone = await user();
        const first = await member(org, someone);
        expect(await failureOf(member(org, someone, { role: 'ORG_ADMIN' }))).toBeInstanceOf(UniqueConflict);
        const elsewhere = await member(other, someone);
        const list = await store.read((repos) => repos.listMembers(org.id, { limit: 10, after: null }));
        expect(list.map((m) => [m.id, m.role])).toEqual([[first.id, 'APP_USER']]);
        expect(await findMember(other.id, elsewhere.id)).toMatchObject({ userId: someone.id });
      });

      it("are found by their user's e-mail lower-cased, within the organization only", async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const local = `Mixed.Case-${randomUUID().slice(0, 8)}`;
        const someone = await user(`${local}@Example.COM`);
        const row = await member(org, someone);
        const lower = `${local.toLowerCase()}@example.com`;
        expect(await store.read((repos) => repos.findMemberByEmail(org.id, lower))).toEqual({
          ...row,
          email: someone.email,
          name: someone.name,
        });
        expect(await store.read((repos) => repos.findMemberByEmail(other.id, lower))).toBeNull();
        expect(
          await store.read((repos) => repos.findMemberByEmail(org.id, uniqueEmail('nobody'))),
        ).toBeNull();
      });

      it('are listed in joining order (ties by id), paged by cursor with one row more than the limit', async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const rows: MemberRow[] = [];
        // Two members joining at the same instant: their ids order them.
        for (const joinedAt of [minutes(2), minutes(1), minutes(1), minutes(3)]) {
          rows.push(await member(org, await user(), { joinedAt }));
        }
        await member(other, await user(), { joinedAt: minutes(0) });
        const [tieA, tieB] = [rows[1]!, rows[2]!].sort((a, b) => (a.id < b.id ? -1 : 1));
        const expected = [tieA!, tieB!, rows[0]!, rows[3]!].map((m) => m.id);
        const list = (limit: number, after: MemberRow | null) =>
          store.read((repos) =>
            repos.listMembers(org.id, {
              limit,
              after: after && { at: after.joinedAt.toISOString(), id: after.id },
            }),
          );
        expect((await list(10, null)).map((m) => m.id)).toEqual(expected);
        expect((await list(2, null)).map((m) => m.id)).toEqual(expected.slice(0, 3));
        expect((await list(2, tieA!)).map((m) => m.id)).toEqual(expected.slice(1));
        expect((await list(2, rows[3]!)).map((m) => m.id)).toEqual([]);
        expect(
          await store.read((repos) => repos.listMembers(randomUUID(), { limit: 10, after: null })),
        ).toEqual([]);
      });

      it('lock as admins only the organization’s ORG_ADMINs with dashboard access, in id order', async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const admins = [
          await member(org, await user(), { role: 'ORG_ADMIN' }),
          await member(org, await user(), { role: 'ORG_ADMIN' }),
        ];
        await member(org, await user(), { role: 'ORG_ADMIN', dashboardAccess: false });
        await member(org, await user(), { role: 'ANALYST' });
        await member(other, await user(), { role: 'ORG_ADMIN' });
        const locked = await store.transaction((repos) => repos.lockAdminIds(org.id));
        expect(locked).toEqual(admins.map((m) => m.id).sort());
      });
    });

    describe('invites', () => {
      it('are inserted pending (whatever the object says), one pending per e-mail and organization; found only in their organization', async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const email = uniqueEmail('invitee');
        const first = invite(org, email, { status: 'accepted', acceptedAt: NOW, role: 'ORG_ADMIN' });
        expect(await insertInvite(first)).toBe(true);
        expect(await findInvite(org.id, first.id)).toEqual({ ...first, status: 'pending', acceptedAt: null });
        expect(await findInvite(other.id, first.id)).toBeNull();
        expect(await findInvite(org.id, 'not-a-uuid')).toBeNull();

        const second = invite(org, email);
        expect(await insertInvite(second)).toBe(false);
        expect(await findInvite(org.id, second.id)).toBeNull();
        const elsewhere = invite(other, email);
        expect(await insertInvite(elsewhere)).toBe(true);
        expect(await findInvite(other.id, elsewhere.id)).toMatchObject({ status: 'pending' });
      });

      it('refuse a token hash in use, in any organization (UniqueConflict), leaving nothing behind', async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const first = invite(org, uniqueEmail());
        await insertInvite(first);
        const clash = invite(other, uniqueEmail(), { tokenHash: first.tokenHash });
        expect(await failureOf(insertInvite(clash))).toBeInstanceOf(UniqueConflict);
        expect(await findInvite(other.id, clash.id)).toBeNull();
      });

      it('are accepted once by token while pending and live, then counted for the e-mail and locked oldest first', async () => {
        const org = await organization();
        const email = uniqueEmail('accepts');
        const invitee = await user(email);
        const [early, late, expired] = [invite(org, email), invite(org, email), invite(org, email)];
        const otherOrg = await organization('Other');
        const lateElsewhere = { ...late, orgId: otherOrg.id };
        await insertInvite(early);
        await insertInvite({ ...expired, orgId: (await organization('Third')).id, expiresAt: NOW });
        await insertInvite(lateElsewhere);

        const accept = (tokenHash: string, now: Date) =>
          store.transaction((repos) => repos.acceptInviteByTokenHash(tokenHash, now));
        // Found as an accept would take it, and left as it was; not once accepted, expired or unknown.
        const find = (tokenHash: string, now: Date) =>
          store.read((repos) => repos.findPendingInviteByTokenHash(tokenHash, now));
        expect(await find(early.tokenHash, NOW)).toEqual({ ...early, status: 'pending', acceptedAt: null });
        expect(await find(early.tokenHash, NOW)).toEqual({ ...early, status: 'pending', acceptedAt: null });
        expect(await find(expired.tokenHash, NOW)).toBeNull();
        expect(await find(sha256('no such token'), NOW)).toBeNull();
        expect(await accept(expired.tokenHash, NOW)).toBeNull();
        expect(await accept(sha256('no such token'), NOW)).toBeNull();
        expect(await accept(early.tokenHash, NOW)).toEqual({ ...early, status: 'accepted', acceptedAt: NOW });
        expect(await accept(early.tokenHash, NOW)).toBeNull();
        expect(await find(early.tokenHash, NOW)).toBeNull();
        expect(await accept(late.tokenHash, LATER)).toEqual({
          ...lateElsewhere,
          status: 'accepted',
          acceptedAt: LATER,
        });

        const snapshot = await store.read((repos) =>
          repos.findUserSnapshot(invitee.issuer, invitee.subject, NOW),
        );
        expect(snapshot?.acceptedInviteCount).toBe(2);
        const locked = await store.transaction((repos) => repos.lockAcceptedInvites(email, NOW));
        expect(locked.map((i) => i.id)).toEqual([early.id, late.id]);
        // Past their deadline to join (the invites' expires_at), accepted invites are neither counted nor taken.
        const deadline = early.expiresAt;
        expect(
          (await store.read((repos) => repos.findUserSnapshot(invitee.issuer, invitee.subject, deadline)))
            ?.acceptedInviteCount,
        ).toBe(0);
        expect(await store.transaction((repos) => repos.lockAcceptedInvites(email, deadline))).toEqual([]);

        await store.transaction((repos) => repos.markInviteJoined(early.id));
        expect(await findInvite(org.id, early.id)).toMatchObject({ status: 'joined' });
        expect(
          (await store.transaction((repos) => repos.lockAcceptedInvites(email, NOW))).map((i) => i.id),
        ).toEqual([late.id]);
        expect(
          (await store.read((repos) => repos.findUserSnapshot(invitee.issuer, invitee.subject, NOW)))
            ?.acceptedInviteCount,
        ).toBe(1);
      });

      it('are listed while pending and live, in creation order (ties by id), paged, and accepted ones apart; a revoked one is gone', async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const rows = [
          invite(org, uniqueEmail(), { createdAt: minutes(2) }),
          invite(org, uniqueEmail(), { createdAt: minutes(1) }),
          invite(org, uniqueEmail(), { createdAt: minutes(1) }),
          invite(org, uniqueEmail(), { createdAt: minutes(3) }),
        ];
        const lapsed = invite(org, uniqueEmail(), { createdAt: minutes(0), expiresAt: LATER });
        const accepted = invite(org, uniqueEmail(), { createdAt: minutes(0) });
        const revoked = invite(org, uniqueEmail(), { createdAt: minutes(0) });
        for (const row of [...rows, lapsed, accepted, revoked, invite(other, uniqueEmail())]) {
          expect(await insertInvite(row)).toBe(true);
        }
        await store.transaction((repos) => repos.acceptInviteByTokenHash(accepted.tokenHash, NOW));
        await store.transaction((repos) => repos.deleteInvite(other.id, revoked.id));
        expect(await findInvite(org.id, revoked.id)).not.toBeNull();
        await store.transaction((repos) => repos.deleteInvite(org.id, revoked.id));
        expect(await findInvite(org.id, revoked.id)).toBeNull();

        const [tieA, tieB] = [rows[1]!, rows[2]!].sort((a, b) => (a.id < b.id ? -1 : 1));
        const expected = [tieA!, tieB!, rows[0]!, rows[3]!].map((i) => i.id);
        const list = (limit: number, after: Invite | null) =>
          store.read((repos) =>
            repos.listInvites(org.id, 'pending', LATER, {
              limit,
              after: after && { at: after.createdAt.toISOString(), id: after.id },
            }),
          );
        expect((await list(10, null)).map((i) => i.id)).toEqual(expected);
        expect((await list(2, null)).map((i) => i.id)).toEqual(expected.slice(0, 3));
        expect((await list(2, tieA!)).map((i) => i.id)).toEqual(expected.slice(1));
        // Before its lifetime ran out, the lapsed invite was listed first.
        const earlier = await store.read((repos) =>
          repos.listInvites(org.id, 'pending', NOW, { limit: 10, after: null }),
        );
        expect(earlier.map((i) => i.id)).toEqual([lapsed.id, ...expected]);
        // Accepted ones are listed apart, until their deadline to join.
        const acceptedList = (now: Date) =>
          store.read((repos) => repos.listInvites(org.id, 'accepted', now, { limit: 10, after: null }));
        expect(await acceptedList(LATER)).toEqual([{ ...accepted, status: 'accepted', acceptedAt: NOW }]);
        expect(await acceptedList(accepted.expiresAt)).toEqual([]);
      });

      it('retire, for one e-mail and organization, the accepted ones and the lapsed pending one, making room for a new invite', async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const email = uniqueEmail('again');
        const accepted = invite(org, email);
        await insertInvite(accepted);
        await store.transaction((repos) => repos.acceptInviteByTokenHash(accepted.tokenHash, NOW));
        const lapsed = invite(org, email, { expiresAt: LATER });
        await insertInvite(lapsed);
        const otherEmail = invite(org, uniqueEmail('other'), { expiresAt: LATER });
        await insertInvite(otherEmail);
        const otherOrgs = invite(other, email, { expiresAt: LATER });
        await insertInvite(otherOrgs);

        // While the pending invite is live, nothing pending is retired and no new one fits.
        await store.transaction((repos) => repos.retireSupersededInvites(org.id, email, NOW));
        expect(await findInvite(org.id, accepted.id)).toMatchObject({ status: 'expired' });
        expect(await findInvite(org.id, lapsed.id)).toMatchObject({ status: 'pending' });
        expect(await insertInvite(invite(org, email))).toBe(false);

        await store.transaction((repos) => repos.retireSupersededInvites(org.id, email, LATER));
        expect(await findInvite(org.id, lapsed.id)).toMatchObject({ status: 'expired' });
        expect(await findInvite(org.id, otherEmail.id)).toMatchObject({ status: 'pending' });
        expect(await findInvite(other.id, otherOrgs.id)).toMatchObject({ status: 'pending' });
        const replacement = invite(org, email);
        expect(await insertInvite(replacement)).toBe(true);
        expect(await findInvite(org.id, replacement.id)).toMatchObject({ status: 'pending' });
      });
    });

    describe('outbound e-mails', () => {
      it("count the day's e-mails per organization and recipient, forget the organization's older days, and are deleted by organization, id and kind", async () => {
        const [org, other] = [await organization(), await organization('Other')];
        const [recipient, someoneElse] = [sha256(randomUUID()), sha256(randomUUID())];
        const email = (
          orgId: string,
          day: string,
          recipientHash: string,
          kind: 'invite' | 'enrollment_code' = 'invite',
        ) => ({ id: randomUUID(), orgId, day, recipientHash, kind, createdAt: NOW });
        const yesterday = email(org.id, '2026-02-28', recipient);
        const othersYesterday = email(other.id, '2026-02-28', recipient);
        const reservation = email(org.id, '2026-03-01', recipient, 'enrollment_code');
        await store.transaction(async (repos) => {
          for (const row of [
            yesterday,
            othersYesterday,
            reservation,
            email(org.id, '2026-03-01', someoneElse),
            email(other.id, '2026-03-01', recipient),
          ]) {
            await repos.insertOutboundEmail(row);
          }
        });
        const lock = (orgId: string, day = '2026-03-01') =>
          store.transaction((repos) => repos.lockOutboundEmailsOfDay(orgId, day, recipient));
        expect(await lock(org.id)).toEqual({ ofOrg: 2, toRecipient: 1, toRecipientAllOrgs: 2 });
        // The organization's e-mail of yesterday is forgotten; the other organization's is not.
        expect(await lock(org.id, '2026-02-28')).toEqual({ ofOrg: 0, toRecipient: 0, toRecipientAllOrgs: 1 });

        const release = (orgId: string, id: string, kind: 'invite' | 'enrollment_code') =>
          store.transaction((repos) => repos.deleteOutboundEmail(orgId, id, kind));
        expect(await release(other.id, reservation.id, 'enrollment_code')).toBe(false);
        expect(await release(org.id, reservation.id, 'invite')).toBe(false);
        expect(await release(org.id, reservation.id, 'enrollment_code')).toBe(true);
        expect(await release(org.id, reservation.id, 'enrollment_code')).toBe(false);
        expect(await lock(org.id)).toEqual({ ofOrg: 1, toRecipient: 0, toRecipientAllOrgs: 1 });
      });
    });

    describe('transactions', () => {
      it('leave no rows and no events behind when the work throws, and publish the events of one that commits', async () => {
        const org: Organization = { id: randomUUID(), name: 'Undone', domain: null, createdAt: NOW };
        const someone = await user();
        const role: Role = 'ORG_ADMIN';
        const work = (fail: boolean) =>
          store.transaction(async (repos) => {
            await repos.insertOrganization(org);
            await repos.insertMember({
              id: randomUUID(),
              orgId: org.id,
              userId: someone.id,
              role,
              dashboardAccess: true,
              joinedAt: NOW,
            });
            await repos.emit('org.created', {
              org_id: org.id,
              name: org.name,
              domain: null,
              created_at: NOW.toISOString(),
            });
            if (fail) throw new Error('changed my mind');
          });
        expect(((await failureOf(work(true))) as Error).message).toBe('changed my mind');
        expect(await store.read((repos) => repos.findOrganization(org.id))).toBeNull();
        expect(
          (await store.read((repos) => repos.findUserSnapshot(someone.issuer, someone.subject, NOW)))
            ?.memberships,
        ).toEqual([]);
        expect(await subject.outboxEvents(org.id)).toBe(0);

        await work(false);
        expect(await store.read((repos) => repos.findOrganization(org.id))).toEqual(org);
        expect(await subject.outboxEvents(org.id)).toBe(1);
      });
    });
  });
}
