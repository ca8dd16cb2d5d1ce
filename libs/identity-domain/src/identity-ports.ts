import type { PageRequest } from '@sts/pagination/keyset-cursor';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import type { Role } from '@sts/vocabulary/roles';
import type {
  Invite,
  Member,
  OpenInviteStatus,
  Organization,
  OutboundEmail,
  OutboundEmailKind,
  User,
} from './identity-model';

/** Everything a user's login needs, read in one round trip on the hot path. */
export interface UserSnapshot {
  user: User;
  /** Newest membership first. */
  memberships: { member: Member; org: Organization }[];
  /** Invites for the user's e-mail that were accepted but have not become memberships yet. */
  acceptedInviteCount: number;
}

export interface IdentityRepositories {
  /** `now`: accepted invites past their deadline to join (`expiresAt`) are not counted. */
  findUserSnapshot(issuer: string, subject: string, now: Date): Promise<UserSnapshot | null>;
  insertUser(user: User): Promise<void>;
  updateUserProfile(userId: string, email: string, name: string): Promise<void>;

  findOrganization(orgId: string): Promise<Organization | null>;
  insertOrganization(org: Organization): Promise<void>;

  /** Scoped by organization: an id of another organization is simply not found. */
  findMember(orgId: string, memberId: string): Promise<Member | null>;
  findMemberByEmail(orgId: string, email: string): Promise<Member | null>;
  listMembers(orgId: string, page: PageRequest): Promise<Member[]>;
  insertMember(member: Omit<Member, 'email' | 'name'>): Promise<void>;
  updateMember(
    orgId: string,
    memberId: string,
    patch: { role: Role; dashboardAccess: boolean },
  ): Promise<void>;
  deleteMember(orgId: string, memberId: string): Promise<void>;
  /**
   * Locks the organization's effective admins (ORG_ADMIN with dashboard access) until the
   * transaction ends and returns their member ids.
   */
  lockAdminIds(orgId: string): Promise<string[]>;

  findInvite(orgId: string, inviteId: string): Promise<Invite | null>;
  /** The organization's invites of this status that are live at `now`, by creation (ties by id). */
  listInvites(orgId: string, status: OpenInviteStatus, now: Date, page: PageRequest): Promise<Invite[]>;
  /** Returns false when another pending invite for the same e-mail and organization exists. */
  insertInvite(invite: Invite): Promise<boolean>;
  /**
   * Retires what a new invite for this e-mail replaces: pending invites past their lifetime, and
   * accepted invites that have not become a membership yet (the newest invite's role must win).
   */
  retireSupersededInvites(orgId: string, email: string, now: Date): Promise<void>;
  /**
   * Locks the organization's e-mail quota and then the recipient's count, always in that order, until the
   * transaction ends (concurrent senders of one organization, or to one recipient, on any replica, queue
   * here), forgets the organization's e-mails of days before `day`, and counts the e-mails of `day`: the
   * organization's, the organization's to this recipient, and all organizations' to this recipient.
   */
  lockOutboundEmailsOfDay(
    orgId: string,
    day: string,
    recipientHash: string,
  ): Promise<{ ofOrg: number; toRecipient: number; toRecipientAllOrgs: number }>;
  insertOutboundEmail(email: OutboundEmail): Promise<void>;
  /** Deletes the organization's e-mail of this id and kind; false when there was none. */
  deleteOutboundEmail(orgId: string, id: string, kind: OutboundEmailKind): Promise<boolean>;
  deleteInvite(orgId: string, inviteId: string): Promise<void>;
  /** The live pending invite with this token hash (what an accept would take), unchanged; null if none. */
  findPendingInviteByTokenHash(tokenHash: string, now: Date): Promise<Invite | null>;
  /** Atomically moves a live pending invite with this token hash to accepted; null if none. */
  acceptInviteByTokenHash(tokenHash: string, now: Date): Promise<Invite | null>;
  /** Locks and returns accepted invites for the e-mail that may still be joined at `now`, oldest first. */
  lockAcceptedInvites(email: string, now: Date): Promise<Invite[]>;
  markInviteJoined(inviteId: string): Promise<void>;

  /** Writes an event to the outbox of this transaction. */
  emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void>;
}

export interface IdentityStore {
  /** Runs work in one transaction; events emitted inside are published only if it commits. */
  transaction<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T>;
  /** Runs reads without a transaction. */
  read<T>(work: (repositories: IdentityRepositories) => Promise<T>): Promise<T>;
}

export interface Clock {
  now(): Date;
}

export interface IdGenerator {
  newId(): string;
}
