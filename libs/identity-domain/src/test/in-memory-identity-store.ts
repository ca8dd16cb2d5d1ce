import { UniqueConflict } from '@sts/errors/unique-conflict';
import { parseEventData, type EventData, type EventType } from '@sts/events/event-catalogue';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import type { Role } from '@sts/vocabulary/roles';
import type { Invite, Member, OpenInviteStatus, Organization, OutboundEmail, User } from '../identity-model';
import type { IdentityRepositories, IdentityStore, UserSnapshot } from '../identity-ports';

/** A member row as stored: e-mail and name come from the user, as in the SQL view. */
export type MemberRow = Omit<Member, 'email' | 'name'>;

export interface RecordedEvent<Type extends EventType = EventType> {
  type: Type;
  data: EventData<Type>;
}

export interface IdentityState {
  users: Map<string, User>;
  orgs: Map<string, Organization>;
  members: Map<string, MemberRow>;
  invites: Map<string, Invite>;
  /** E-mails to outsiders, by id (the quotas' rows). */
  outboundEmails: Map<string, OutboundEmail>;
  /** The outbox: events of committed transactions, in order. */
  events: RecordedEvent[];
}

type Table = 'users' | 'orgs' | 'members' | 'invites' | 'outboundEmails';
const TABLES: Table[] = ['users', 'orgs', 'members', 'invites', 'outboundEmails'];

const emptyState = (): IdentityState => ({
  users: new Map(),
  orgs: new Map(),
  members: new Map(),
  invites: new Map(),
  outboundEmails: new Map(),
  events: [],
});

/**
 * The identity ports in memory, with the rules of the PostgreSQL store (`PostgresIdentityStore`):
 * - every lookup is scoped by organization; unique keys as in the schema: users (issuer, subject),
 *   members (org, user), invites token hash, one pending invite per (org, e-mail);
 * - a transaction works on a copy of the state and commits only when its work succeeds, so a throwing
 *   transaction leaves nothing behind (rows or events). Transactions run one at a time (the row locks
 *   of the real store serialise the transactions that matter here); a unique key broken at commit is
 *   a {@link UniqueConflict}, as the real store reports PostgreSQL's unique violation;
 * - `read` works on the committed state directly; rows handed out are copies.
 */
export class InMemoryIdentityStore implements IdentityStore {
  state: IdentityState = emptyState();
  /** How many transactions committed / rolled back. */
  commits = 0;
  rollbacks = 0;

  private queue: Promise<unknown> = Promise.resolve();
  private beforeCommitHooks: ((committed: IdentityRepositories) => Promise<void>)[] = [];

  /** Committed events of one type. */
  eventsOf<Type extends EventType>(type: Type): EventData<Type>[] {
    return this.state.events
      .filter((event): event is RecordedEvent<Type> => event.type === type)
      .map((event) => event.data);
  }

  /**
   * Simulates a concurrent transaction that commits just before the next transaction of this store
   * does: `write` runs against the committed state at that moment. The next commit is then checked
   * against it (unique keys), as PostgreSQL would.
   */
  interleaveBeforeNextCommit(write: (committed: IdentityRepositories) => Promise<void>): void {
    this.beforeCommitHooks.push(write);
  }

  transaction<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T> {
    const run = this.queue.then(() => this.runTransaction(work));
    this.queue = run.catch(() => undefined);
    return run;
  }

  read<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T> {
    return work(repositoriesOver(() => this.state));
  }

  private async runTransaction<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T> {
    const base = structuredClone(this.state);
    const working = structuredClone(this.state);
    let result: T;
    try {
      result = await work(repositoriesOver(() => working));
    } catch (error) {
      this.rollbacks += 1;
      throw error;
    }
    const hook = this.beforeCommitHooks.shift();
    if (hook) await hook(repositoriesOver(() => this.state));
    const merged = mergeChanges(this.state, base, working);
    const conflict = uniqueViolation(merged);
    if (conflict) {
      this.rollbacks += 1;
      throw new UniqueConflict(new Error(`duplicate key ${conflict}`));
    }
    this.state = merged;
    this.commits += 1;
    return result;
  }
}

/** Applies the changes a transaction made (relative to `base`) onto the committed state. */
function mergeChanges(committed: IdentityState, base: IdentityState, working: IdentityState): IdentityState {
  const merged = structuredClone(committed);
  for (const table of TABLES) {
    const before = base[table] as Map<string, unknown>;
    const after = working[table] as Map<string, unknown>;
    const target = merged[table] as Map<string, unknown>;
    for (const [id, row] of after) {
      if (!before.has(id) || !sameRow(before.get(id), row)) target.set(id, structuredClone(row));
    }
    for (const id of before.keys()) if (!after.has(id)) target.delete(id);
  }
  merged.events.push(...structuredClone(working.events.slice(base.events.length)));
  return merged;
}

function sameRow(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function uniqueViolation(state: IdentityState): string | null {
  const keys: [string, Iterable<string>][] = [
    ['users_issuer_subject_key', [...state.users.values()].map((u) => `${u.issuer}|${u.subject}`)],
    ['members_org_user_key', [...state.members.values()].map((m) => `${m.orgId}|${m.userId}`)],
    ['invites_token_hash_key', [...state.invites.values()].map((i) => i.tokenHash)],
    [
      'invites_one_pending_idx',
      [...state.invites.values()].filter((i) => i.status === 'pending').map((i) => `${i.orgId}|${i.email}`),
    ],
  ];
  for (const [name, values] of keys) {
    const seen = new Set<string>();
    for (const value of values) {
      if (seen.has(value)) return name;
      seen.add(value);
    }
  }
  return null;
}

const byJoinedThenId = (a: MemberRow, b: MemberRow) =>
  a.joinedAt.getTime() - b.joinedAt.getTime() || compare(a.id, b.id);
const byCreatedThenId = (a: Invite, b: Invite) =>
  a.createdAt.getTime() - b.createdAt.getTime() || compare(a.id, b.id);

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Keyset filter: rows strictly after (at, id) in ascending order. */
function after<Row>(page: PageRequest, at: (row: Row) => Date, id: (row: Row) => string) {
  return (row: Row): boolean => {
    if (!page.after) return true;
    const position = new Date(page.after.at).getTime();
    const t = at(row).getTime();
    return t > position || (t === position && id(row) > page.after.id);
  };
}

function repositoriesOver(current: () => IdentityState): IdentityRepositories {
  const s = current;
  const copy = <Row>(row: Row): Row => structuredClone(row);

  const memberView = (row: MemberRow): Member => {
    const user = s().users.get(row.userId);
    if (!user) throw new Error(`member ${row.id} references missing user ${row.userId}`);
    return { ...copy(row), email: user.email, name: user.name };
  };

  const snapshotOf = (user: User, now: Date): UserSnapshot => {
    const memberships = [...s().members.values()]
      .filter((m) => m.userId === user.id)
      // Newest first, ties by id (as `order by m.joined_at desc, m.id`).
      .sort((a, b) => b.joinedAt.getTime() - a.joinedAt.getTime() || compare(a.id, b.id))
      .map((m) => {
        const org = s().orgs.get(m.orgId);
        if (!org) throw new Error(`member ${m.id} references missing organization ${m.orgId}`);
        return { member: memberView(m), org: copy(org) };
      });
    const email = user.email.toLowerCase();
    const acceptedInviteCount = [...s().invites.values()].filter(
      (i) => i.status === 'accepted' && i.email === email && i.expiresAt.getTime() > now.getTime(),
    ).length;
    return { user: copy(user), memberships, acceptedInviteCount };
  };

  const livePendingInvite = (tokenHash: string, now: Date) =>
    [...s().invites.values()].find(
      (i) => i.tokenHash === tokenHash && i.status === 'pending' && i.expiresAt.getTime() > now.getTime(),
    );

  return {
    findUserSnapshot: async (issuer, subject, now) => {
      const user = [...s().users.values()].find((u) => u.issuer === issuer && u.subject === subject);
      return user ? snapshotOf(user, now) : null;
    },
    insertUser: async (user) => {
      if (s().users.has(user.id)) throw new UniqueConflict(new Error('users_pkey'));
      if ([...s().users.values()].some((u) => u.issuer === user.issuer && u.subject === user.subject)) {
        throw new UniqueConflict(new Error('users_issuer_subject_key'));
      }
      s().users.set(user.id, copy(user));
    },
    updateUserProfile: async (userId, email, name) => {
      const user = s().users.get(userId);
      if (user) s().users.set(userId, { ...user, email, name });
    },

    findOrganization: async (orgId) => {
      const org = s().orgs.get(orgId);
      return org ? copy(org) : null;
    },
    insertOrganization: async (org) => {
      if (s().orgs.has(org.id)) throw new UniqueConflict(new Error('organizations_pkey'));
      s().orgs.set(org.id, copy(org));
    },

    findMember: async (orgId, memberId) => {
      const row = s().members.get(memberId);
      return row && row.orgId === orgId ? memberView(row) : null;
    },
    findMemberByEmail: async (orgId, email) => {
      const row = [...s().members.values()].find(
        (m) => m.orgId === orgId && s().users.get(m.userId)?.email.toLowerCase() === email,
      );
      return row ? memberView(row) : null;
    },
    listMembers: async (orgId, page) =>
      [...s().members.values()]
        .filter((m) => m.orgId === orgId)
        .sort(byJoinedThenId)
        .filter(
          after<MemberRow>(
            page,
            (m) => m.joinedAt,
            (m) => m.id,
          ),
        )
        .slice(0, page.limit + 1)
        .map(memberView),
    insertMember: async (member) => {
      if (!s().orgs.has(member.orgId)) throw new Error(`foreign key: organization ${member.orgId}`);
      if (!s().users.has(member.userId)) throw new Error(`foreign key: user ${member.userId}`);
      if (s().members.has(member.id)) throw new UniqueConflict(new Error('members_pkey'));
      if ([...s().members.values()].some((m) => m.orgId === member.orgId && m.userId === member.userId)) {
        throw new UniqueConflict(new Error('members_org_user_key'));
      }
      s().members.set(member.id, copy(member));
    },
    updateMember: async (orgId, memberId, patch: { role: Role; dashboardAccess: boolean }) => {
      const row = s().members.get(memberId);
      if (row && row.orgId === orgId)
        s().members.set(memberId, { ...row, role: patch.role, dashboardAccess: patch.dashboardAccess });
    },
    deleteMember: async (orgId, memberId) => {
      const row = s().members.get(memberId);
      if (row && row.orgId === orgId) s().members.delete(memberId);
    },
    lockAdminIds: async (orgId) =>
      [...s().members.values()]
        .filter((m) => m.orgId === orgId && m.role === 'ORG_ADMIN' && m.dashboardAccess)
        .map((m) => m.id)
        .sort(compare),

    findInvite: async (orgId, inviteId) => {
      const invite = s().invites.get(inviteId);
      return invite && invite.orgId === orgId ? copy(invite) : null;
    },
    listInvites: async (orgId, status: OpenInviteStatus, now, page) =>
      [...s().invites.values()]
        .filter((i) => i.orgId === orgId && i.status === status && i.expiresAt.getTime() > now.getTime())
        .sort(byCreatedThenId)
        .filter(
          after<Invite>(
            page,
            (i) => i.createdAt,
            (i) => i.id,
          ),
        )
        .slice(0, page.limit + 1)
        .map(copy),
    insertInvite: async (invite) => {
      // `on conflict (org_id, email) where status = 'pending' do nothing`
      if (
        [...s().invites.values()].some(
          (i) => i.status === 'pending' && i.orgId === invite.orgId && i.email === invite.email,
        )
      ) {
        return false;
      }
      if (!s().orgs.has(invite.orgId)) throw new Error(`foreign key: organization ${invite.orgId}`);
      if (s().invites.has(invite.id)) throw new UniqueConflict(new Error('invites_pkey'));
      if ([...s().invites.values()].some((i) => i.tokenHash === invite.tokenHash)) {
        throw new UniqueConflict(new Error('invites_token_hash_key'));
      }
      // The SQL insert writes status 'pending' and no accepted_at, whatever the object says.
      s().invites.set(invite.id, { ...copy(invite), status: 'pending', acceptedAt: null });
      return true;
    },
    lockOutboundEmailsOfDay: async (orgId, day, recipientHash) => {
      // Transactions run one at a time here: the locks of the organization and the recipient are implied.
      if (!s().orgs.has(orgId)) throw new Error(`foreign key: organization ${orgId}`);
      let ofOrg = 0;
      let toRecipient = 0;
      let toRecipientAllOrgs = 0;
      for (const [id, email] of s().outboundEmails) {
        if (email.orgId === orgId && email.day < day) {
          s().outboundEmails.delete(id);
        } else if (email.day === day) {
          const toThem = email.recipientHash === recipientHash;
          if (toThem) toRecipientAllOrgs += 1;
          if (email.orgId !== orgId) continue;
          ofOrg += 1;
          if (toThem) toRecipient += 1;
        }
      }
      return { ofOrg, toRecipient, toRecipientAllOrgs };
    },
    insertOutboundEmail: async (email) => {
      if (s().outboundEmails.has(email.id)) throw new UniqueConflict(new Error('outbound_emails_pkey'));
      s().outboundEmails.set(email.id, copy(email));
    },
    deleteOutboundEmail: async (orgId, id, kind) => {
      const email = s().outboundEmails.get(id);
      if (!email || email.orgId !== orgId || email.kind !== kind) return false;
      return s().outboundEmails.delete(id);
    },
    retireSupersededInvites: async (orgId, email, now) => {
      for (const invite of s().invites.values()) {
        if (
          invite.orgId === orgId &&
          invite.email === email &&
          (invite.status === 'accepted' ||
            (invite.status === 'pending' && invite.expiresAt.getTime() <= now.getTime()))
        ) {
          invite.status = 'expired';
        }
      }
    },
    deleteInvite: async (orgId, inviteId) => {
      const invite = s().invites.get(inviteId);
      if (invite && invite.orgId === orgId) s().invites.delete(inviteId);
    },
    findPendingInviteByTokenHash: async (tokenHash, now) => {
      const invite = livePendingInvite(tokenHash, now);
      return invite ? copy(invite) : null;
    },
    acceptInviteByTokenHash: async (tokenHash, now) => {
      const invite = livePendingInvite(tokenHash, now);
      if (!invite) return null;
      invite.status = 'accepted';
      invite.acceptedAt = new Date(now);
      return copy(invite);
    },
    lockAcceptedInvites: async (email, now) =>
      [...s().invites.values()]
        .filter((i) => i.email === email && i.status === 'accepted' && i.expiresAt.getTime() > now.getTime())
        .sort((a, b) => (a.acceptedAt?.getTime() ?? 0) - (b.acceptedAt?.getTime() ?? 0))
        .map(copy),
    markInviteJoined: async (inviteId) => {
      const invite = s().invites.get(inviteId);
      if (invite) invite.status = 'joined';
    },

    emit: async <Type extends EventType>(type: Type, data: EventData<Type>) => {
      // The outbox validates against the event catalogue before writing, so must we.
      s().events.push({ type, data: copy(parseEventData(type, data)) });
    },
  };
}

export { ManualClock, RecordingIds } from '@sts/testing/test-clock';
