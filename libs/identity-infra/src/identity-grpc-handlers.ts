import { invalidField } from '@sts/errors/app-error';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import type { Role } from '@sts/vocabulary/roles';
import type { Invite, Member, Organization, Principal } from '@sts/identity-domain/identity-model';
import type { IdentityService } from '@sts/identity-domain/identity-service';
import { toPage, toPageRequest } from '@sts/pagination/keyset-cursor';
import {
  Role as ProtoRole,
  type IdentityServiceService,
  type Invite as ProtoInvite,
  type Member as ProtoMember,
  type Organization as ProtoOrganization,
  type ResolveCallerRequest,
} from '@sts/proto/gen/identity/v1/identity';
import { z } from 'zod';

const ROLE_FROM_PROTO: Partial<Record<ProtoRole, Role>> = {
  [ProtoRole.ROLE_ORG_ADMIN]: 'ORG_ADMIN',
  [ProtoRole.ROLE_ANALYST]: 'ANALYST',
  [ProtoRole.ROLE_APP_USER]: 'APP_USER',
};
const ROLE_TO_PROTO: Record<Role, ProtoRole> = {
  ORG_ADMIN: ProtoRole.ROLE_ORG_ADMIN,
  ANALYST: ProtoRole.ROLE_ANALYST,
  APP_USER: ProtoRole.ROLE_APP_USER,
};

function roleFromProto(role: ProtoRole, field = 'role'): Role {
  const mapped = ROLE_FROM_PROTO[role];
  if (!mapped) throw invalidField(field, 'must be ORG_ADMIN, ANALYST or APP_USER');
  return mapped;
}

function requireId(value: string, path: string): string {
  if (!value) throw invalidField(path, 'is required');
  return value;
}

const emailSchema = z.email().max(254);

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
  };
}

function toProtoOrganization(org: Organization): ProtoOrganization {
  return { id: org.id, name: org.name, domain: org.domain ?? undefined };
}

function principalFrom(request: ResolveCallerRequest): Principal {
  const principal = request.principal;
  if (!principal) throw invalidField('principal', 'is required');
  switch (principal.$case) {
    case 'user':
      return {
        kind: 'user',
        issuer: requireId(principal.value.issuer, 'user.issuer'),
        subject: requireId(principal.value.subject, 'user.subject'),
        email: requireId(principal.value.email, 'user.email'),
        emailVerified: principal.value.emailVerified,
        name: principal.value.name || principal.value.email,
      };
    case 'client':
      return {
        kind: 'client',
        issuer: requireId(principal.value.issuer, 'client.issuer'),
        subject: requireId(principal.value.subject, 'client.subject'),
        orgId: requireId(principal.value.orgId, 'client.org_id'),
        role: roleFromProto(principal.value.role, 'client.role'),
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
      const page = toPageRequest(request.limit, request.cursor);
      const rows = await service.listMembers(requireId(request.orgId, 'org_id'), page);
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
      const member = await service.updateMember(
        requireId(request.orgId, 'org_id'),
        requireId(request.memberId, 'member_id'),
        {
          role: request.role === undefined ? undefined : roleFromProto(request.role),
          dashboardAccess: request.dashboardAccess,
        },
      );
      return { member: toProtoMember(member) };
    },
    removeMember: async (request) => {
      await service.removeMember(
        requireId(request.orgId, 'org_id'),
        requireId(request.memberId, 'member_id'),
      );
      return {};
    },
    listInvites: async (request) => {
      const page = toPageRequest(request.limit, request.cursor);
      const rows = await service.listInvites(requireId(request.orgId, 'org_id'), page);
      const { items, nextCursor } = toPage(rows, page.limit, (i) => ({
        at: i.createdAt.toISOString(),
        id: i.id,
      }));
      return { invites: items.map(toProtoInvite), nextCursor };
    },
    createInvite: async (request) => {
      const email = emailSchema.safeParse(request.email);
      if (!email.success) throw invalidField('email', 'must be an e-mail address');
      const invite = await service.createInvite(
        requireId(request.orgId, 'org_id'),
        email.data,
        roleFromProto(request.role),
        request.invitedByMemberId || null,
      );
      return { invite: toProtoInvite(invite) };
    },
    revokeInvite: async (request) => {
      await service.revokeInvite(
        requireId(request.orgId, 'org_id'),
        requireId(request.inviteId, 'invite_id'),
      );
      return {};
    },
    acceptInvite: async (request) => {
      const { invite, org } = await service.acceptInvite(requireId(request.token, 'token'));
      return { invite: toProtoInvite(invite), org: toProtoOrganization(org) };
    },
    reserveOutboundEmail: async (request) => {
      const email = emailSchema.safeParse(request.email.trim());
      if (!email.success) throw invalidField('email', 'must be an e-mail address');
      return service.reserveOutboundEmail(requireId(request.orgId, 'org_id'), email.data);
    },
    releaseOutboundEmail: async (request) => {
      await service.releaseOutboundEmail(
        requireId(request.orgId, 'org_id'),
        requireId(request.reservationId, 'reservation_id'),
      );
      return {};
    },
  };
}
