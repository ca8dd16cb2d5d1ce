import { invalidField } from '@sts/errors/app-error';
import {
  INVITE_STATE_FROM_PROTO,
  INVITE_STATE_TO_PROTO,
  ROLE_FROM_PROTO,
  ROLE_TO_PROTO,
} from '@sts/grpc/proto-enums';
import { enumFrom, requireEmail, requirePresent, requireText, requireUuid } from '@sts/grpc/request-checks';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import type { Invite, Member, Organization, Principal } from '@sts/identity-domain/identity-model';
import type { IdentityService } from '@sts/identity-domain/identity-service';
import { toPage, toPageRequest } from '@sts/pagination/keyset-cursor';
import {
  InviteState,
  type IdentityServiceService,
  type Invite as ProtoInvite,
  type Member as ProtoMember,
  type Organization as ProtoOrganization,
  type ResolveCallerRequest,
} from '@sts/proto/gen/identity/v1/identity';

function toProtoMember(member: Member): ProtoMember {
  return {
    id: member.id,
    userId: member.userId,
    email: member.email,
    name: member.name,
    role: ROLE_TO_PROTO[member.role],
    dashboardAccess: member.dashboardAccess,
    joinedAt: member.joinedAt,
  };
}

function toProtoInvite(invite: Invite): ProtoInvite {
  return {
    id: invite.id,
    email: invite.email,
    role: ROLE_TO_PROTO[invite.role],
    createdAt: invite.createdAt,
    expiresAt: invite.expiresAt,
    // Joined and superseded invites are never answered; an accepted one says so.
    state: INVITE_STATE_TO_PROTO[invite.status === 'accepted' ? 'accepted' : 'pending'],
    acceptedAt: invite.acceptedAt ?? undefined,
  };
}

function toProtoOrganization(org: Organization): ProtoOrganization {
  return { id: org.id, name: org.name, domain: org.domain ?? undefined };
}

function principalFrom(request: ResolveCallerRequest): Principal {
  const principal = requirePresent(request.principal, 'principal');
  switch (principal.$case) {
    case 'user':
      return {
        kind: 'user',
        issuer: requireText(principal.value.issuer, 'user.issuer'),
        subject: requireText(principal.value.subject, 'user.subject'),
        email: requireText(principal.value.email, 'user.email'),
        emailVerified: principal.value.emailVerified,
        name: principal.value.name || principal.value.email,
      };
    case 'client':
      return {
        kind: 'client',
        issuer: requireText(principal.value.issuer, 'client.issuer'),
        subject: requireText(principal.value.subject, 'client.subject'),
        // The token's claim, not our context: an organization we do not know is the domain's UNAUTHENTICATED.
        orgId: requireText(principal.value.orgId, 'client.org_id'),
        role: enumFrom(ROLE_FROM_PROTO, principal.value.role, 'client.role'),
      };
  }
}

/** gRPC `identity.v1.IdentityService`: translation between the wire contract and the domain. */
export function identityGrpcHandlers(service: IdentityService): AsyncHandlers<typeof IdentityServiceService> {
  return {
    resolveCaller: async (request) => {
      const caller = await service.resolveCaller(principalFrom(request), request.orgId || null);
      return {
        user: caller.user,
        org: toProtoOrganization(caller.org),
        memberId: caller.memberId ?? '',
        role: ROLE_TO_PROTO[caller.role],
        dashboardAccess: caller.dashboardAccess,
      };
    },
    listMembers: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const page = toPageRequest(request.limit, request.cursor);
      const rows = await service.listMembers(orgId, page);
      const { items, nextCursor } = toPage(rows, page.limit, (m) => ({
        at: m.joinedAt.toISOString(),
        id: m.id,
      }));
      return { members: items.map(toProtoMember), nextCursor };
    },
    updateMember: async (request) => {
      if (request.role === undefined && request.dashboardAccess === undefined) {
        throw invalidField('body', 'must set role or dashboard_access');
      }
      const orgId = requireText(request.orgId, 'org_id');
      const role = request.role === undefined ? undefined : enumFrom(ROLE_FROM_PROTO, request.role, 'role');
      const memberId = requireUuid(request.memberId, 'MEMBER_NOT_FOUND');
      const member = await service.updateMember(orgId, memberId, {
        role,
        dashboardAccess: request.dashboardAccess,
      });
      return { member: toProtoMember(member) };
    },
    removeMember: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      await service.removeMember(orgId, requireUuid(request.memberId, 'MEMBER_NOT_FOUND'));
      return {};
    },
    listInvites: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const page = toPageRequest(request.limit, request.cursor);
      const state =
        request.state === InviteState.INVITE_STATE_UNSPECIFIED
          ? 'pending'
          : enumFrom(INVITE_STATE_FROM_PROTO, request.state, 'state');
      const rows = await service.listInvites(orgId, state, page);
      const { items, nextCursor } = toPage(rows, page.limit, (i) => ({
        at: i.createdAt.toISOString(),
        id: i.id,
      }));
      return { invites: items.map(toProtoInvite), nextCursor };
    },
    createInvite: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const email = requireEmail(request.email, 'email');
      const role = enumFrom(ROLE_FROM_PROTO, request.role, 'role');
      const invite = await service.createInvite(orgId, email, role, request.invitedByMemberId || null);
      return { invite: toProtoInvite(invite) };
    },
    revokeInvite: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      await service.revokeInvite(orgId, requireUuid(request.inviteId, 'INVITE_NOT_FOUND'));
      return {};
    },
    acceptInvite: async (request) => {
      // The token is a credential: the domain judges it, an empty one included (INVITE_TOKEN_INVALID).
      const { invite, org } = await service.acceptInvite(request.token);
      return { invite: toProtoInvite(invite), org: toProtoOrganization(org) };
    },
    previewInvite: async (request) => {
      const { invite, org } = await service.previewInvite(request.token);
      return { invite: toProtoInvite(invite), org: toProtoOrganization(org) };
    },
    reserveOutboundEmail: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      return service.reserveOutboundEmail(orgId, requireEmail(request.email, 'email'));
    },
    releaseOutboundEmail: async (request) => {
      // Not requireUuid: a reservation that is not ours is nothing to give back, not an error.
      await service.releaseOutboundEmail(
        requireText(request.orgId, 'org_id'),
        requireText(request.reservationId, 'reservation_id'),
      );
      return {};
    },
  };
}
