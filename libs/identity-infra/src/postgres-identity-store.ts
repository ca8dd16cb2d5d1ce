import { LockMode, raw, type MikroORM } from '@mikro-orm/postgresql';
import { UnitOfWork, type WorkScope } from '@sts/db/unit-of-work';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import type {
  Invite,
  Member,
  OpenInviteStatus,
  Organization,
  OutboundEmail,
  OutboundEmailKind,
  User,
} from '@sts/identity-domain/identity-model';
import type { IdentityRepositories, IdentityStore, UserSnapshot } from '@sts/identity-domain/identity-ports';
import { enqueueEvent } from '@sts/outbox/outbox';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import { isUuid } from '@sts/vocabulary/identifiers';
import type { Role } from '@sts/vocabulary/roles';
import {
  InviteEntity,
  MemberEntity,
  OrganizationEntity,
  OutboundEmailEntity,
  UserEntity,
  type MemberRow,
} from './identity-entities';

/** What the sign-in read returns: node-postgres hands MikroORM's timestamps over as text. */
interface SnapshotRow {
  id: string;
  issuer: string;
  subject: string;
  email: string;
  name: string;
  created_at: string;
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

/** A member joined with its user (the e-mail and name of a member are its user's). */
type MemberViewRow = MemberRow & Pick<User, 'email' | 'name'>;

/** What the advisory lock of a recipient's e-mail count hashes, before the recipient's hash: its own key space. */
const RECIPIENT_LOCK_PREFIX = 'identity.outbound_emails.recipient:';

/** IdentityStore over PostgreSQL (schema `identity`). `onCommitWithEvents` lets the outbox relay publish at once. */
export class PostgresIdentityStore implements IdentityStore {
  private readonly unit: UnitOfWork;

  constructor(orm: MikroORM, onCommitWithEvents?: () => void) {
    this.unit = new UnitOfWork(orm, { outbox: enqueueEvent, onCommitWithEvents });
  }

  transaction<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T> {
    return this.unit.transaction((scope) => work(new PostgresIdentityRepositories(scope)));
  }

  read<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T> {
    return this.unit.autocommit((scope) => work(new PostgresIdentityRepositories(scope)));
  }
}

class PostgresIdentityRepositories implements IdentityRepositories {
  constructor(private readonly scope: WorkScope) {}

  async findUserSnapshot(issuer: string, subject: string, now: Date): Promise<UserSnapshot | null> {
    // Raw: user, memberships with their organizations and the count of accepted invites in one round trip
    // on every sign-in (json_agg, which the ORM does not express; bench/gateway-session.bench.ts).
    const row = await this.scope.sql.one<SnapshotRow>(
      `select u.id, u.issuer, u.subject, u.email, u.name, u.created_at,
         (select count(*) from identity.invites i
           where i.status = 'accepted' and i.email = lower(u.email) and i.expires_at > ?) as accepted_invites,
         coalesce(json_agg(json_build_object(
             'member_id', m.id, 'role', m.role, 'dashboard_access', m.dashboard_access, 'joined_at', m.joined_at,
             'org_id', o.id, 'org_name', o.name, 'org_domain', o.domain, 'org_created_at', o.created_at)
           order by m.joined_at desc, m.id) filter (where m.id is not null), '[]') as memberships
       from identity.users u
       left join identity.members m on m.user_id = u.id
       left join identity.organizations o on o.id = m.org_id
       where u.issuer = ? and u.subject = ?
       group by u.id`,
      [now, issuer, subject],
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

  async insertUser(user: User): Promise<void> {
    await this.scope.em.insert(UserEntity, user);
  }

  async updateUserProfile(userId: string, email: string, name: string): Promise<void> {
    await this.scope.em.nativeUpdate(UserEntity, { id: userId }, { email, name });
  }

  async findOrganization(orgId: string): Promise<Organization | null> {
    if (!isUuid(orgId)) return null;
    const row = await this.scope.em.findOne(OrganizationEntity, { id: orgId });
    return row ? { id: row.id, name: row.name, domain: row.domain, createdAt: row.createdAt } : null;
  }

  async insertOrganization(org: Organization): Promise<void> {
    await this.scope.em.insert(OrganizationEntity, org);
  }

  async findMember(orgId: string, memberId: string): Promise<Member | null> {
    if (!isUuid(orgId) || !isUuid(memberId)) return null;
    const [row] = await this.members().where({ orgId, id: memberId }).execute<MemberViewRow[]>('all');
    return row ? toMember(row) : null;
  }

  async findMemberByEmail(orgId: string, email: string): Promise<Member | null> {
    const [row] = await this.members()
      .where({ orgId })
      .andWhere('lower(u.email) = ?', [email])
      .execute<MemberViewRow[]>('all');
    return row ? toMember(row) : null;
  }

  async listMembers(orgId: string, page: PageRequest): Promise<Member[]> {
    if (!isUuid(orgId)) return [];
    const after = page.after && isUuid(page.after.id) ? page.after : null;
    const query = this.members().where({ orgId });
    // A row comparison: one range of the index on (org_id, joined_at, id).
    if (after) query.andWhere('(m.joined_at, m.id) > (?, ?)', [after.at, after.id]);
    const rows = await query
      .orderBy({ joinedAt: 'asc', id: 'asc' })
      .limit(page.limit + 1)
      .execute<MemberViewRow[]>('all');
    return rows.map(toMember);
  }

  async insertMember(member: MemberRow): Promise<void> {
    await this.scope.em.insert(MemberEntity, member);
  }

  async updateMember(
    orgId: string,
    memberId: string,
    patch: { role: Role; dashboardAccess: boolean },
  ): Promise<void> {
    await this.scope.em.nativeUpdate(
      MemberEntity,
      { id: memberId, orgId },
      { role: patch.role, dashboardAccess: patch.dashboardAccess },
    );
  }

  async deleteMember(orgId: string, memberId: string): Promise<void> {
    await this.scope.em.nativeDelete(MemberEntity, { id: memberId, orgId });
  }

  async lockAdminIds(orgId: string): Promise<string[]> {
    // Locked in a stable order, so concurrent demotions of the last admins queue instead of deadlocking.
    const rows = await this.scope.em.find(
      MemberEntity,
      { orgId, role: 'ORG_ADMIN', dashboardAccess: true },
      { fields: ['id'], orderBy: { id: 'asc' }, lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    return rows.map((row) => row.id);
  }

  async findInvite(orgId: string, inviteId: string): Promise<Invite | null> {
    if (!isUuid(orgId) || !isUuid(inviteId)) return null;
    const row = await this.scope.em.findOne(InviteEntity, { id: inviteId, orgId });
    return row ? toInvite(row) : null;
  }

  async listInvites(
    orgId: string,
    status: OpenInviteStatus,
    now: Date,
    page: PageRequest,
  ): Promise<Invite[]> {
    if (!isUuid(orgId)) return [];
    const after = page.after && isUuid(page.after.id) ? page.after : null;
    const rows = await this.scope.em.find(
      InviteEntity,
      after
        ? {
            orgId,
            status,
            expiresAt: { $gt: now },
            $or: [
              { createdAt: { $gt: new Date(after.at) } },
              { createdAt: new Date(after.at), id: { $gt: after.id } },
            ],
          }
        : { orgId, status, expiresAt: { $gt: now } },
      { orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.limit + 1 },
    );
    return rows.map(toInvite);
  }

  async insertInvite(invite: Invite): Promise<boolean> {
    const inserted = await this.scope.em
      .createQueryBuilder(InviteEntity)
      .insert({
        id: invite.id,
        orgId: invite.orgId,
        email: invite.email,
        role: invite.role,
        status: 'pending',
        tokenHash: invite.tokenHash,
        invitedByMemberId: invite.invitedByMemberId,
        createdAt: invite.createdAt,
        expiresAt: invite.expiresAt,
        acceptedAt: null,
      })
      // The conflict target is the partial unique index of pending invites (invites_one_pending_idx).
      .onConflict(raw(`(org_id, email) where status = 'pending'`))
      .ignore()
      .execute<{ affectedRows: number }>('run');
    return inserted.affectedRows === 1;
  }

  async lockOutboundEmailsOfDay(
    orgId: string,
    day: string,
    recipientHash: string,
  ): Promise<{ ofOrg: number; toRecipient: number; toRecipientAllOrgs: number }> {
    // Raw: a row lock the ORM does not express (`for no key update`: members and invites referencing the
    // organization are not blocked). Statements of their own, before the counts: in READ COMMITTED each
    // count's snapshot is then taken after the locks, so it sees what the previous holders committed.
    await this.scope.sql.run(`select 1 from identity.organizations where id = ? for no key update`, [orgId]);
    // Raw: a transaction-level advisory lock per recipient, which the ORM does not express: senders to one
    // recipient from any organization queue here. Always taken after the organization's lock, never
    // before it, so two senders never wait on each other in opposite orders (a deadlock).
    await this.scope.sql.run(`select pg_advisory_xact_lock(hashtextextended(?, 0))`, [
      `${RECIPIENT_LOCK_PREFIX}${recipientHash}`,
    ]);
    const em = this.scope.em;
    await em.nativeDelete(OutboundEmailEntity, { orgId, day: { $lt: day } });
    return {
      ofOrg: await em.count(OutboundEmailEntity, { orgId, day }),
      toRecipient: await em.count(OutboundEmailEntity, { orgId, day, recipientHash }),
      toRecipientAllOrgs: await em.count(OutboundEmailEntity, { day, recipientHash }),
    };
  }

  async insertOutboundEmail(email: OutboundEmail): Promise<void> {
    await this.scope.em.insert(OutboundEmailEntity, {
      id: email.id,
      orgId: email.orgId,
      day: email.day,
      recipientHash: email.recipientHash,
      kind: email.kind,
      createdAt: email.createdAt,
    });
  }

  async deleteOutboundEmail(orgId: string, id: string, kind: OutboundEmailKind): Promise<boolean> {
    if (!isUuid(orgId) || !isUuid(id)) return false;
    return (await this.scope.em.nativeDelete(OutboundEmailEntity, { orgId, id, kind })) > 0;
  }

  async retireSupersededInvites(orgId: string, email: string, now: Date): Promise<void> {
    await this.scope.em.nativeUpdate(
      InviteEntity,
      {
        orgId,
        email,
        $or: [{ status: 'accepted' }, { status: 'pending', expiresAt: { $lte: now } }],
      },
      { status: 'expired' },
    );
  }

  async deleteInvite(orgId: string, inviteId: string): Promise<void> {
    await this.scope.em.nativeDelete(InviteEntity, { id: inviteId, orgId });
  }

  async findPendingInviteByTokenHash(tokenHash: string, now: Date): Promise<Invite | null> {
    const row = await this.scope.em.findOne(InviteEntity, livePendingInvite(tokenHash, now), {
      fields: INVITE_FIELDS,
    });
    return row ? toInvite(row) : null;
  }

  async acceptInviteByTokenHash(tokenHash: string, now: Date): Promise<Invite | null> {
    // Check and take in one conditional update, so a token is accepted once under concurrency.
    const [row] = await this.scope.em
      .createQueryBuilder(InviteEntity)
      .update({ status: 'accepted', acceptedAt: now })
      .where(livePendingInvite(tokenHash, now))
      .returning(INVITE_FIELDS)
      .execute<Invite[]>('all');
    return row ? toInvite(row) : null;
  }

  async lockAcceptedInvites(email: string, now: Date): Promise<Invite[]> {
    const rows = await this.scope.em.find(
      InviteEntity,
      { email, status: 'accepted', expiresAt: { $gt: now } },
      { orderBy: { acceptedAt: 'asc' }, lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    return rows.map(toInvite);
  }

  async markInviteJoined(inviteId: string): Promise<void> {
    await this.scope.em.nativeUpdate(InviteEntity, { id: inviteId }, { status: 'joined' });
  }

  emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void> {
    return this.scope.emit(type, data);
  }

  /** Members of the organization joined with their users (`m` and `u`); add the conditions. */
  private members() {
    return this.scope.em
      .createQueryBuilder(MemberEntity, 'm')
      .select(['m.*', 'u.email', 'u.name'])
      .join('m.userId', 'u');
  }
}

/** The invite a token names while it can still be accepted: pending and not expired. */
function livePendingInvite(tokenHash: string, now: Date) {
  return { tokenHash, status: 'pending' as const, expiresAt: { $gt: now } };
}

const INVITE_FIELDS: (keyof Invite)[] = [
  'id',
  'orgId',
  'email',
  'role',
  'status',
  'tokenHash',
  'invitedByMemberId',
  'createdAt',
  'expiresAt',
  'acceptedAt',
];

function toMember(row: MemberViewRow): Member {
  return {
    id: row.id,
    orgId: row.orgId,
    userId: row.userId,
    email: row.email,
    name: row.name,
    role: row.role,
    dashboardAccess: row.dashboardAccess,
    joinedAt: new Date(row.joinedAt),
  };
}

function toInvite(row: Invite): Invite {
  return {
    id: row.id,
    orgId: row.orgId,
    email: row.email,
    role: row.role,
    status: row.status,
    tokenHash: row.tokenHash,
    invitedByMemberId: row.invitedByMemberId,
    createdAt: new Date(row.createdAt),
    expiresAt: new Date(row.expiresAt),
    acceptedAt: row.acceptedAt === null ? null : new Date(row.acceptedAt),
  };
}
