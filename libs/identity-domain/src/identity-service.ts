import { AppError } from '@sts/errors/app-error';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import { generateSecret, hashSecret, sealSecret } from '@sts/crypto/secrets';
import { SEALING_CONTEXTS } from '@sts/events/event-catalogue';
import { NAME_MAX_LENGTH, plainTextLine } from '@sts/vocabulary/plain-text';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import {
  normalizeEmail,
  type Caller,
  type Invite,
  type Member,
  type OpenInviteStatus,
  type Organization,
  type OutboundEmailKind,
  type Principal,
} from './identity-model';
import type { Role } from '@sts/vocabulary/roles';
import type { Clock, IdGenerator, IdentityRepositories, IdentityStore, UserSnapshot } from './identity-ports';

export interface IdentitySettings {
  inviteTtlHours: number;
  /**
   * E-mails to outsiders (invites and e-mailed enrollment codes together) an organization may have us
   * send per UTC day: bounds what anyone who signs in, and so has an organization, can send in our name.
   */
  emailsPerOrgPerDay: number;
  /** Of those, how many may go to one recipient per UTC day. */
  emailsPerRecipientPerDay: number;
  /**
   * How many may go to one recipient per UTC day from all organizations together: anyone who signs in
   * gets an organization, so without it K accounts would send K times the limit above to one victim.
   */
  emailsPerRecipientAllOrgsPerDay: number;
  /** Key that seals invite tokens for the trip through the outbox to the mailer. */
  sealingKey: Buffer;
}

function storedName(name: string, email: string): string {
  return (
    plainTextLine(name, NAME_MAX_LENGTH) ||
    plainTextLine(email.split('@')[0] ?? '', NAME_MAX_LENGTH) ||
    'User'
  );
}

/** Invite tokens: 256 random bits with a prefix secret scanners can recognise. */
const INVITE_TOKEN_PREFIX = 'sts_inv';

export class IdentityService {
  constructor(
    private readonly store: IdentityStore,
    private readonly settings: IdentitySettings,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  /**
   * The caller behind a verified token. Users are found by (issuer, subject). At first login a user
   * without an accepted invite gets a personal organization as ORG_ADMIN; accepted invites bound to
   * the user's (verified) e-mail become memberships at the next login.
   */
  async resolveCaller(untrusted: Principal, requestedOrgId: string | null): Promise<Caller> {
    if (untrusted.kind === 'client') return this.resolveClient(untrusted);
    // The display name comes from the identity provider: stored as one line of plain text, capped,
    // so it cannot forge lines in the e-mails and feed items it later appears in.
    const principal = { ...untrusted, name: storedName(untrusted.name, untrusted.email) };

    const snapshot = await this.store.read((repos) =>
      repos.findUserSnapshot(principal.issuer, principal.subject, this.clock.now()),
    );
    const needsWrite =
      !snapshot ||
      snapshot.memberships.length === 0 ||
      (snapshot.acceptedInviteCount > 0 && principal.emailVerified) ||
      snapshot.user.email !== principal.email ||
      snapshot.user.name !== principal.name;
    const current = needsWrite ? await this.provisionUser(principal) : snapshot;
    return pickMembership(current, requestedOrgId);
  }

  async listMembers(orgId: string, page: PageRequest): Promise<Member[]> {
    return this.store.read((repos) => repos.listMembers(orgId, page));
  }

  async updateMember(
    orgId: string,
    memberId: string,
    patch: { role?: Role; dashboardAccess?: boolean },
  ): Promise<Member> {
    return this.store.transaction(async (repos) => {
      const member = await requireMember(repos, orgId, memberId);
      const role = patch.role ?? member.role;
      const dashboardAccess = patch.dashboardAccess ?? member.dashboardAccess;
      if (
        member.role === 'ORG_ADMIN' &&
        member.dashboardAccess &&
        (role !== 'ORG_ADMIN' || !dashboardAccess)
      ) {
        await assertNotLastAdmin(repos, orgId, memberId);
      }
      await repos.updateMember(orgId, memberId, { role, dashboardAccess });
      if (role !== member.role || dashboardAccess !== member.dashboardAccess) {
        await repos.emit('member.updated', {
          org_id: orgId,
          member_id: memberId,
          user_id: member.userId,
          role,
          dashboard_access: dashboardAccess,
          at: this.clock.now().toISOString(),
        });
      }
      return { ...member, role, dashboardAccess };
    });
  }

  async removeMember(orgId: string, memberId: string): Promise<void> {
    await this.store.transaction(async (repos) => {
      const member = await requireMember(repos, orgId, memberId);
      if (member.role === 'ORG_ADMIN' && member.dashboardAccess)
        await assertNotLastAdmin(repos, orgId, memberId);
      await repos.deleteMember(orgId, memberId);
      await repos.emit('member.removed', {
        org_id: orgId,
        member_id: memberId,
        user_id: member.userId,
        at: this.clock.now().toISOString(),
      });
    });
  }

  /** Pending invites, or accepted ones whose invitee has not joined yet; live ones only, either way. */
  async listInvites(orgId: string, status: OpenInviteStatus, page: PageRequest): Promise<Invite[]> {
    return this.store.read((repos) => repos.listInvites(orgId, status, this.clock.now(), page));
  }

  async createInvite(
    orgId: string,
    rawEmail: string,
    role: Role,
    invitedByMemberId: string | null,
  ): Promise<Invite> {
    const email = normalizeEmail(rawEmail);
    const now = this.clock.now();
    return this.store.transaction(async (repos) => {
      const org = await repos.findOrganization(orgId);
      if (!org) throw new AppError('ORGANIZATION_NOT_FOUND');
      if (await repos.findMemberByEmail(orgId, email)) {
        throw new AppError('ALREADY_MEMBER', `${email} is already a member of this organization`);
      }
      const inviter = invitedByMemberId ? await repos.findMember(orgId, invitedByMemberId) : null;
      const inviteId = this.ids.newId();
      // Counted in this transaction: a refused or failed invite does not use up the day's quota, and
      // revoking does not give it back (invite and revoke in a loop would send unlimited e-mail).
      await this.takeOutboundEmail(repos, orgId, email, 'invite', inviteId, now);
      await repos.retireSupersededInvites(orgId, email, now);

      const token = generateSecret(INVITE_TOKEN_PREFIX);
      const invite: Invite = {
        id: inviteId,
        orgId,
        email,
        role,
        status: 'pending',
        tokenHash: hashSecret(token),
        invitedByMemberId: inviter?.id ?? null,
        createdAt: now,
        expiresAt: new Date(now.getTime() + this.settings.inviteTtlHours * 3_600_000),
        acceptedAt: null,
      };
      if (!(await repos.insertInvite(invite))) {
        throw new AppError('INVITE_ALREADY_PENDING', `an invite for ${email} is already pending`);
      }
      await repos.emit('invite.created', {
        org_id: org.id,
        org_name: org.name,
        invite_id: invite.id,
        email,
        role,
        invited_by_name: inviter?.name ?? org.name,
        expires_at: invite.expiresAt.toISOString(),
        token_sealed: sealSecret(
          token,
          this.settings.sealingKey,
          SEALING_CONTEXTS.inviteToken({ org_id: org.id, email, invite_id: invite.id }),
        ),
      });
      return invite;
    });
  }

  /**
   * Takes one e-mail to `rawEmail` (an enrollment code) from the organization's daily quota, which
   * invites share; RATE_LIMITED, with nothing taken, when it or the recipient's limit is used up. The
   * caller sends the e-mail next, and gives the reservation back if that is refused.
   */
  async reserveOutboundEmail(orgId: string, rawEmail: string): Promise<{ reservationId: string }> {
    const email = normalizeEmail(rawEmail);
    const now = this.clock.now();
    return this.store.transaction(async (repos) => {
      if (!(await repos.findOrganization(orgId))) throw new AppError('ORGANIZATION_NOT_FOUND');
      const reservationId = this.ids.newId();
      await this.takeOutboundEmail(repos, orgId, email, 'enrollment_code', reservationId, now);
      return { reservationId };
    });
  }

  /** Gives back a reservation whose e-mail was not sent. Idempotent; invites are never given back. */
  async releaseOutboundEmail(orgId: string, reservationId: string): Promise<void> {
    await this.store.transaction((repos) =>
      repos.deleteOutboundEmail(orgId, reservationId, 'enrollment_code'),
    );
  }

  /**
   * One e-mail to an outsider, counted in the caller's transaction against the organization's daily
   * quota, the recipient's daily limit within the organization and the recipient's daily limit across all
   * organizations (UTC days); RATE_LIMITED when any is used up. The organization's quota and then the
   * recipient's count are locked until the transaction ends, so concurrent requests on any replica cannot
   * both take the last place of either.
   */
  private async takeOutboundEmail(
    repos: IdentityRepositories,
    orgId: string,
    email: string,
    kind: OutboundEmailKind,
    id: string,
    now: Date,
  ): Promise<void> {
    const day = now.toISOString().slice(0, 10);
    const recipientHash = hashSecret(email);
    const { ofOrg, toRecipient, toRecipientAllOrgs } = await repos.lockOutboundEmailsOfDay(
      orgId,
      day,
      recipientHash,
    );
    const { emailsPerOrgPerDay, emailsPerRecipientPerDay, emailsPerRecipientAllOrgsPerDay } = this.settings;
    if (ofOrg >= emailsPerOrgPerDay) {
      throw new AppError(
        'RATE_LIMITED',
        `this organization has sent its ${emailsPerOrgPerDay} e-mails (invites and enrollment codes) for today (UTC)`,
      );
    }
    if (toRecipient >= emailsPerRecipientPerDay) {
      throw new AppError(
        'RATE_LIMITED',
        `this organization has sent ${emailsPerRecipientPerDay} e-mails to ${email} today (UTC); try again tomorrow`,
      );
    }
    if (toRecipientAllOrgs >= emailsPerRecipientAllOrgsPerDay) {
      // Says no more than that the address had its share today: not who else wrote to it, nor how often.
      throw new AppError(
        'RATE_LIMITED',
        `${email} has been sent as many e-mails from us as it may get today (UTC); try again tomorrow`,
      );
    }
    await repos.insertOutboundEmail({ id, orgId, day, recipientHash, kind, createdAt: now });
  }

  async revokeInvite(orgId: string, inviteId: string): Promise<void> {
    await this.store.transaction(async (repos) => {
      const invite = await repos.findInvite(orgId, inviteId);
      // Accepted but not joined yet can be revoked too: until the join, nobody is a member by it.
      if (!invite || (invite.status !== 'pending' && invite.status !== 'accepted'))
        throw new AppError('INVITE_NOT_FOUND');
      await repos.deleteInvite(orgId, inviteId);
    });
  }

  /** Single use: the first presentation of a live token wins; later ones are rejected. */
  async acceptInvite(token: string): Promise<{ invite: Invite; org: Organization }> {
    return this.inviteOf(token, 'transaction', (repos, tokenHash, now) =>
      repos.acceptInviteByTokenHash(tokenHash, now),
    );
  }

  /**
   * What `acceptInvite` would accept, changing nothing: the invitee sees who invites them, and as what,
   * before they accept. The same INVITE_TOKEN_INVALID for every token an accept would refuse.
   */
  async previewInvite(token: string): Promise<{ invite: Invite; org: Organization }> {
    return this.inviteOf(token, 'read', (repos, tokenHash, now) =>
      repos.findPendingInviteByTokenHash(tokenHash, now),
    );
  }

  /** The invite a token finds (in a transaction when `find` changes it) and its organization. */
  private async inviteOf(
    token: string,
    unit: 'read' | 'transaction',
    find: (repos: IdentityRepositories, tokenHash: string, now: Date) => Promise<Invite | null>,
  ): Promise<{ invite: Invite; org: Organization }> {
    if (!token.startsWith(`${INVITE_TOKEN_PREFIX}_`)) throw new AppError('INVITE_TOKEN_INVALID');
    return this.store[unit](async (repos) => {
      const invite = await find(repos, hashSecret(token), this.clock.now());
      if (!invite) throw new AppError('INVITE_TOKEN_INVALID');
      const org = await repos.findOrganization(invite.orgId);
      if (!org) throw new AppError('INVITE_TOKEN_INVALID');
      return { invite, org };
    });
  }

  private async resolveClient(principal: Extract<Principal, { kind: 'client' }>): Promise<Caller> {
    const org = await this.store.read((repos) => repos.findOrganization(principal.orgId));
    if (!org) throw new AppError('UNAUTHENTICATED', 'the token names an unknown organization');
    return {
      user: { id: `client:${principal.subject}`, email: '', name: principal.subject },
      org,
      memberId: null,
      role: principal.role,
      dashboardAccess: true,
    };
  }

  private async provisionUser(principal: Extract<Principal, { kind: 'user' }>): Promise<UserSnapshot> {
    try {
      return await this.store.transaction((repos) => this.provisionUserIn(repos, principal));
    } catch (error) {
      // Two first requests of a new user raced; the other one created the rows. Read them.
      if (!(error instanceof UniqueConflict)) throw error;
      return this.store.transaction((repos) => this.provisionUserIn(repos, principal));
    }
  }

  private async provisionUserIn(
    repos: IdentityRepositories,
    principal: Extract<Principal, { kind: 'user' }>,
  ): Promise<UserSnapshot> {
    const now = this.clock.now();
    let snapshot = await repos.findUserSnapshot(principal.issuer, principal.subject, now);
    if (!snapshot) {
      const user = {
        id: this.ids.newId(),
        issuer: principal.issuer,
        subject: principal.subject,
        email: principal.email,
        name: principal.name,
        createdAt: now,
      };
      await repos.insertUser(user);
      snapshot = { user, memberships: [], acceptedInviteCount: 0 };
    } else if (snapshot.user.email !== principal.email || snapshot.user.name !== principal.name) {
      await repos.updateUserProfile(snapshot.user.id, principal.email, principal.name);
    }
    const userId = snapshot.user.id;

    let joined = false;
    // An unverified e-mail address must not unlock another organization's invite.
    if (principal.emailVerified) {
      for (const invite of await repos.lockAcceptedInvites(normalizeEmail(principal.email), now)) {
        const alreadyMember = await repos.findMemberByEmail(invite.orgId, invite.email);
        if (!alreadyMember) {
          const memberId = this.ids.newId();
          await repos.insertMember({
            id: memberId,
            orgId: invite.orgId,
            userId,
            role: invite.role,
            dashboardAccess: true,
            joinedAt: now,
          });
          await repos.emit('member.joined', {
            org_id: invite.orgId,
            member_id: memberId,
            user_id: userId,
            email: principal.email,
            name: principal.name,
            role: invite.role,
            joined_at: now.toISOString(),
          });
          joined = true;
        }
        await repos.markInviteJoined(invite.id);
      }
    }

    if (!joined && snapshot.memberships.length === 0) {
      const org: Organization = {
        id: this.ids.newId(),
        name: `${principal.name}'s organization`,
        domain: null,
        createdAt: now,
      };
      await repos.insertOrganization(org);
      await repos.insertMember({
        id: this.ids.newId(),
        orgId: org.id,
        userId,
        role: 'ORG_ADMIN',
        dashboardAccess: true,
        joinedAt: now,
      });
      await repos.emit('org.created', {
        org_id: org.id,
        name: org.name,
        domain: null,
        created_at: now.toISOString(),
      });
    }
    const fresh = await repos.findUserSnapshot(principal.issuer, principal.subject, this.clock.now());
    if (!fresh) throw new Error('user vanished during provisioning');
    return fresh;
  }
}

function pickMembership(snapshot: UserSnapshot, requestedOrgId: string | null): Caller {
  const chosen = requestedOrgId
    ? snapshot.memberships.find((m) => m.org.id === requestedOrgId)
    : snapshot.memberships[0];
  if (!chosen) {
    // Asking for an organization one does not belong to looks exactly like asking for one that does not exist.
    throw new AppError('ORGANIZATION_NOT_FOUND', 'not a member of the requested organization');
  }
  const { user } = snapshot;
  return {
    user: { id: user.id, email: user.email, name: user.name },
    org: chosen.org,
    memberId: chosen.member.id,
    role: chosen.member.role,
    dashboardAccess: chosen.member.dashboardAccess,
  };
}

async function requireMember(repos: IdentityRepositories, orgId: string, memberId: string): Promise<Member> {
  const member = await repos.findMember(orgId, memberId);
  if (!member) throw new AppError('MEMBER_NOT_FOUND');
  return member;
}

async function assertNotLastAdmin(
  repos: IdentityRepositories,
  orgId: string,
  memberId: string,
): Promise<void> {
  const admins = await repos.lockAdminIds(orgId);
  if (admins.length <= 1 && admins.includes(memberId)) {
    throw new AppError(
      'LAST_ADMIN',
      'the last ORG_ADMIN with dashboard access cannot be demoted, disabled or removed',
    );
  }
}
