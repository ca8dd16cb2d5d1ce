import type { Role } from '@sts/vocabulary/roles';

export interface User {
  id: string;
  issuer: string;
  subject: string;
  email: string;
  name: string;
  createdAt: Date;
}

export interface Organization {
  id: string;
  name: string;
  /** E-mail domain of a company organization; null for personal organizations. */
  domain: string | null;
  createdAt: Date;
}

export interface Member {
  id: string;
  orgId: string;
  userId: string;
  email: string;
  name: string;
  role: Role;
  dashboardAccess: boolean;
  joinedAt: Date;
}

/**
 * pending: waiting for the invitee; accepted: the token was presented, membership is created at the
 * invitee's next login; joined: membership exists; expired: replaced by a newer invite after its
 * lifetime ran out. Revoked invites are deleted.
 */
export type InviteStatus = 'pending' | 'accepted' | 'joined' | 'expired';

/**
 * The invites an admin can list and revoke, while they can still bring someone in: pending ones until
 * `expiresAt` (the deadline to accept), and accepted ones until the same `expiresAt` (the deadline to join).
 */
export type OpenInviteStatus = Extract<InviteStatus, 'pending' | 'accepted'>;

export interface Invite {
  id: string;
  orgId: string;
  /** Lower-cased; invites bind to the e-mail address, not to an account. */
  email: string;
  role: Role;
  status: InviteStatus;
  tokenHash: string;
  invitedByMemberId: string | null;
  createdAt: Date;
  expiresAt: Date;
  acceptedAt: Date | null;
}

/** Who a verified access token says the caller is. */
export type Principal =
  | { kind: 'user'; issuer: string; subject: string; email: string; emailVerified: boolean; name: string }
  | { kind: 'client'; issuer: string; subject: string; orgId: string; role: Role };

/** The identity a request acts with: user, organization and the membership's role. */
export interface Caller {
  user: { id: string; email: string; name: string };
  org: Organization;
  /** Null for client-credentials callers. */
  memberId: string | null;
  role: Role;
  dashboardAccess: boolean;
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** What e-mails someone outside the organization in its name: both count against one daily quota. */
export type OutboundEmailKind = 'invite' | 'enrollment_code';

/**
 * One e-mail an organization had us send (or reserved to send) to an outsider, as its quotas count it:
 * per organization and UTC day, per recipient within that, and per recipient across all organizations.
 * The recipient is kept as a SHA-256 of the lower-cased address; the row is forgotten once its day is
 * over.
 */
export interface OutboundEmail {
  id: string;
  orgId: string;
  /** UTC day, `YYYY-MM-DD`. */
  day: string;
  recipientHash: string;
  kind: OutboundEmailKind;
  createdAt: Date;
}
