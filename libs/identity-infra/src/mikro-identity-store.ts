import {
  LockMode,
  UniqueConstraintViolationException,
  type EntityManager,
  type MikroORM,
} from '@mikro-orm/postgresql';
import { sqlRunner, type SqlRunner } from '@sts/db/sql-runner';
import { isUuid } from '@sts/vocabulary/identifiers';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import type { Role } from '@sts/vocabulary/roles';
import type {
  Invite,
  Member,
  Organization,
  OutboundEmail,
  OutboundEmailKind,
} from '@sts/identity-domain/identity-model';
import {
  UniqueConflict,
  type IdentityRepositories,
  type IdentityStore,
  type UserSnapshot,
} from '@sts/identity-domain/identity-ports';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import { enqueueEvent } from '@sts/outbox/outbox';
import {
  InviteEntity,
  MemberEntity,
  OrganizationEntity,
  UserEntity,
  type InviteRow,
} from './identity-entities';

interface SnapshotRow {
  id: string;
  issuer: string;
  subject: string;
  email: string;
  name: string;
  created_at: Date;
  accepted_invites: string;
  memberships: {
    member_id: string;
    role: Role;
    dashboard_access: boolean;
    joined_at: string;
    org_id: string;
    org_name: string;
    org_domain: string | null;
    org_created_at: string;
  }[];
}

interface MemberViewRow {
  id: string;
  org_id: string;
  user_id: string;
  role: Role;
  dashboard_access: boolean;
  joined_at: Date;
  email: string;
  name: string;
}

// Raw: a member joined with its user in one statement, read by the member page (bench/gateway-session.bench.ts).
const MEMBER_VIEW = `select m.id, m.org_id, m.user_id, m.role, m.dashboard_access, m.joined_at, u.email, u.name
  from identity.members m join identity.users u on u.id = m.user_id`;

/** What the advisory lock of a recipient's e-mail count hashes, before the recipient's hash: its own key space. */
const RECIPIENT_LOCK_PREFIX = 'identity.outbound_emails.recipient:';

/** IdentityStore over PostgreSQL. `onCommitWithEvents` lets the outbox relay publish at once. */
export class MikroIdentityStore implements IdentityStore {
  constructor(
    private readonly orm: MikroORM,
    private readonly onCommitWithEvents: () => void = () => undefined,
  ) {}

  async transaction<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T> {
    const repositories = { emitted: 0 };
    try {
      const result = await this.orm.em
        .fork()
        .transactional((tx) => work(new IdentityRepositoriesSql(tx, repositories)));
      if (repositories.emitted > 0) this.onCommitWithEvents();
      return result;
    } catch (error) {
      if (error instanceof UniqueConstraintViolationException) throw new UniqueConflict(error);
      throw error;
    }
  }

  read<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T> {
    return work(new IdentityRepositoriesSql(this.orm.em.fork(), { emitted: 0 }));
  }
}

class IdentityRepositoriesSql implements IdentityRepositories {
  private readonly sql: SqlRunner;

  constructor(
    private readonly em: EntityManager,
    private readonly counters: { emitted: number },
  ) {
    this.sql = sqlRunner(em);
  }

  async findUserSnapshot(issuer: string, subject: string): Promise<UserSnapshot | null> {
    // Raw: user, memberships and org in one round trip on every login (bench/gateway-session.bench.ts).
    const row = await this.sql.one<SnapshotRow>(
      `select u.id, u.issuer, u.subject, u.email, u.name, u.created_at,
         (select count(*) from identity.invites i where i.status = 'accepted' and i.email = lower(u.email)) as accepted_invites,
         coalesce(json_agg(json_build_object(
             'member_id', m.id, 'role', m.role, 'dashboard_access', m.dashboard_access, 'joined_at', m.joined_at,
             'org_id', o.id, 'org_name', o.name, 'org_domain', o.domain, 'org_created_at', o.created_at)
           order by m.joined_at desc, m.id) filter (where m.id is not null), '[]') as memberships
       from identity.users u
       left join identity.members m on m.user_id = u.id
       left join identity.organizations o on o.id = m.org_id
       where u.issuer = ? and u.subject = ?
       group by u.id`,
      [issuer, subject],
    );
    if (!row) return null;
    const user = {
      id: row.id,
      issuer: row.issuer,
      subject: row.subject,
      email: row.email,
      name: row.name,
      createdAt: new Date(row.created_at),
    };
    return {
      user,
      acceptedInviteCount: Number(row.accepted_invites),
      memberships: row.memberships.map((m) => ({
        member: {
          id: m.member_id,
          orgId: m.org_id,
          userId: row.id,
          email: row.email,
          name: row.name,
          role: m.role,
          dashboardAccess: m.dashboard_access,
          joinedAt: new Date(m.joined_at),
        },
        org: { id: m.org_id, name: m.org_name, domain: m.org_domain, createdAt: new Date(m.org_created_at) },
      })),
    };
  }

  async insertUser(user: UserSnapshot['user']): Promise<void> {
    await this.em.insert(UserEntity, user);
  }

  async updateUserProfile(userId: string, email: string, name: string): Promise<void> {
    await this.em.nativeUpdate(UserEntity, { id: userId }, { email, name });
  }

  async findOrganization(orgId: string): Promise<Organization | null> {
    if (!isUuid(orgId)) return null;
    const row = await this.em.findOne(OrganizationEntity, { id: orgId }, { disableIdentityMap: true });
    return row ? { id: row.id, name: row.name, domain: row.domain, createdAt: row.createdAt } : null;
  }

  async insertOrganization(org: Organization): Promise<void> {
    await this.em.insert(OrganizationEntity, org);
  }

  async findMember(orgId: string, memberId: string): Promise<Member | null> {
    if (!isUuid(orgId) || !isUuid(memberId)) return null;
    const row = await this.sql.one<MemberViewRow>(`${MEMBER_VIEW} where m.org_id = ? and m.id = ?`, [
      orgId,
      memberId,
    ]);
    return row ? toMember(row) : null;
  }

  async findMemberByEmail(orgId: string, email: string): Promise<Member | null> {
    const row = await this.sql.one<MemberViewRow>(
      `${MEMBER_VIEW} where m.org_id = ? and lower(u.email) = ?`,
      [orgId, email],
    );
    return row ? toMember(row) : null;
  }

  async listMembers(orgId: string, page: PageRequest): Promise<Member[]> {
    if (!isUuid(orgId)) return [];
    const after = page.after && isUuid(page.after.id) ? page.after : null;
    const rows = await this.sql.all<MemberViewRow>(
      `${MEMBER_VIEW} where m.org_id = ? ${after ? 'and (m.joined_at, m.id) > (?, ?)' : ''}
       order by m.joined_at, m.id limit ?`,
      after ? [orgId, after.at, after.id, page.limit + 1] : [orgId, page.limit + 1],
    );
    return rows.map(toMember);
  }

  async insertMember(member: Omit<Member, 'email' | 'name'>): Promise<void> {
    await this.em.insert(MemberEntity, member);
  }

  async updateMember(
    orgId: string,
    memberId: string,
    patch: { role: Role; dashboardAccess: boolean },
  ): Promise<void> {
    await this.em.nativeUpdate(MemberEntity, { id: memberId, orgId }, patch);
  }

  async deleteMember(orgId: string, memberId: string): Promise<void> {
    await this.em.nativeDelete(MemberEntity, { id: memberId, orgId });
  }

  async lockAdminIds(orgId: string): Promise<string[]> {
    // Raw: `for update` in a stable order, so concurrent demotions of the last admins queue instead of deadlocking.
    const rows = await this.sql.all<{ id: string }>(
      `select id from identity.members where org_id = ? and role = 'ORG_ADMIN' and dashboard_access order by id for update`,
      [orgId],
    );
    return rows.map((r) => r.id);
  }

  async findInvite(orgId: string, inviteId: string): Promise<Invite | null> {
    if (!isUuid(orgId) || !isUuid(inviteId)) return null;
    const row = await this.em.findOne(InviteEntity, { id: inviteId, orgId }, { disableIdentityMap: true });
    return row ? toInvite(row) : null;
  }

  async listPendingInvites(orgId: string, now: Date, page: PageRequest): Promise<Invite[]> {
    if (!isUuid(orgId)) return [];
    const after = page.after && isUuid(page.after.id) ? page.after : null;
    const rows = await this.em.find(
      InviteEntity,
      {
        orgId,
        status: 'pending',
        expiresAt: { $gt: now },
        ...(after
          ? {
              $or: [
                { createdAt: { $gt: new Date(after.at) } },
                { createdAt: new Date(after.at), id: { $gt: after.id } },
              ],
            }
          : {}),
      },
      { orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.limit + 1, disableIdentityMap: true },
    );
    return rows.map(toInvite);
  }

  async insertInvite(invite: Invite): Promise<boolean> {
    // Raw: `on conflict … do nothing` against the partial unique index of pending invites.
    const inserted = await this.sql.run(
      `insert into identity.invites (id, org_id, email, role, status, token_hash, invited_by_member_id, created_at, expires_at)
       values (?, ?, ?, ?, 'pending', ?, ?, ?, ?) on conflict (org_id, email) where status = 'pending' do nothing`,
      [
        invite.id,
        invite.orgId,
        invite.email,
        invite.role,
        invite.tokenHash,
        invite.invitedByMemberId,
        invite.createdAt,
        invite.expiresAt,
      ],
    );
    return inserted === 1;
  }

  async lockOutboundEmailsOfDay(
    orgId: string,
    day: string,
    recipientHash: string,
  ): Promise<{ ofOrg: number; toRecipient: number; toRecipientAllOrgs: number }> {
    // Raw: a row lock the ORM does not express (`for no key update`: members and invites referencing the
    // organization are not blocked). Statements of their own, before the count: in READ COMMITTED the
    // count's snapshot is then taken after the locks, so it sees what the previous holders committed.
    await this.sql.run(`select 1 from identity.organizations where id = ? for no key update`, [orgId]);
    // Raw: a transaction-level advisory lock per recipient, which the ORM does not express: senders to one
    // recipient from any organization queue here. Always taken after the organization's lock, never
    // before it, so two senders never wait on each other in opposite orders (a deadlock).
    await this.sql.run(`select pg_advisory_xact_lock(hashtextextended(?, 0))`, [
      `${RECIPIENT_LOCK_PREFIX}${recipientHash}`,
    ]);
    // Raw: forgetting past days and counting this one in one round trip (a data-modifying CTE).
    const row = await this.sql.one<{ of_org: number; to_recipient: number; to_recipient_all_orgs: number }>(
      `with purged as (delete from identity.outbound_emails where org_id = ? and day < ?::date)
       select count(*)::int as of_org, (count(*) filter (where recipient_hash = ?))::int as to_recipient,
              (select count(*)::int from identity.outbound_emails where day = ?::date and recipient_hash = ?)
                as to_recipient_all_orgs
       from identity.outbound_emails where org_id = ? and day = ?::date`,
      [orgId, day, recipientHash, day, recipientHash, orgId, day],
    );
    return {
      ofOrg: row?.of_org ?? 0,
      toRecipient: row?.to_recipient ?? 0,
      toRecipientAllOrgs: row?.to_recipient_all_orgs ?? 0,
    };
  }

  async insertOutboundEmail(email: OutboundEmail): Promise<void> {
    await this.sql.run(
      `insert into identity.outbound_emails (id, org_id, day, recipient_hash, kind, created_at)
       values (?, ?, ?::date, ?, ?, ?)`,
      [email.id, email.orgId, email.day, email.recipientHash, email.kind, email.createdAt],
    );
  }

  async deleteOutboundEmail(orgId: string, id: string, kind: OutboundEmailKind): Promise<boolean> {
    if (!isUuid(orgId) || !isUuid(id)) return false;
    return (
      (await this.sql.run(`delete from identity.outbound_emails where org_id = ? and id = ? and kind = ?`, [
        orgId,
        id,
        kind,
      ])) > 0
    );
  }

  async retireSupersededInvites(orgId: string, email: string, now: Date): Promise<void> {
    // Raw: a conditional bulk update (an `or` of states) the ORM would load rows for.
    await this.sql.run(
      `update identity.invites set status = 'expired'
       where org_id = ? and email = ? and (status = 'accepted' or (status = 'pending' and expires_at <= ?))`,
      [orgId, email, now],
    );
  }

  async deleteInvite(orgId: string, inviteId: string): Promise<void> {
    await this.em.nativeDelete(InviteEntity, { id: inviteId, orgId });
  }

  async acceptInviteByTokenHash(tokenHash: string, now: Date): Promise<Invite | null> {
    // Raw: check-and-take in one conditional update, so a token is accepted once under concurrency.
    const rows = await this.sql.all<Record<string, unknown>>(
      `update identity.invites set status = 'accepted', accepted_at = ?
       where token_hash = ? and status = 'pending' and expires_at > ? returning id, org_id`,
      [now, tokenHash, now],
    );
    const row = rows[0];
    return row ? this.findInvite(String(row.org_id), String(row.id)) : null;
  }

  async lockAcceptedInvites(email: string): Promise<Invite[]> {
    const rows = await this.em.find(
      InviteEntity,
      { email, status: 'accepted' },
      { orderBy: { acceptedAt: 'asc' }, lockMode: LockMode.PESSIMISTIC_WRITE, disableIdentityMap: true },
    );
    return rows.map(toInvite);
  }

  async markInviteJoined(inviteId: string): Promise<void> {
    await this.em.nativeUpdate(InviteEntity, { id: inviteId }, { status: 'joined' });
  }

  async emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void> {
    await enqueueEvent(this.em, type, data);
    this.counters.emitted += 1;
  }
}

function toMember(row: MemberViewRow): Member {
  return {
    id: row.id,
    orgId: row.org_id,
    userId: row.user_id,
    email: row.email,
    name: row.name,
    role: row.role,
    dashboardAccess: row.dashboard_access,
    joinedAt: new Date(row.joined_at),
  };
}

function toInvite(row: InviteRow): Invite {
  return { ...row };
}
