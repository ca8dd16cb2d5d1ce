import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AccessTokenVerifier, Principal } from '@sts/auth/access-token-verifier';
import { AppError } from '@sts/errors/app-error';
import type { ResolveCallerRequest } from '@sts/proto/gen/identity/v1/identity';
import { ROLE_TO_PROTO } from '@sts/grpc/proto-enums';
import type { CallOptions } from '@sts/grpc/service-types';
import { isUuid } from '@sts/vocabulary/identifiers';
import { roleFromProto } from '../contract/contract-mapping';
import type { Role } from '../contract/contract-schemas';
import { callOptionsFor } from '../observability/http-observability';
import type { GroupedCache } from '../caching/grouped-cache';
import type { UpstreamClients } from '../upstream-clients';
import { required } from '../contract/upstream-answer';

/** Who is calling, resolved once per request by the authentication hook. */
export interface Caller {
  kind: 'user' | 'client';
  userId: string;
  email: string;
  name: string;
  memberId: string | null;
  role: Role;
  dashboardAccess: boolean;
  org: { id: string; name: string; domain: string | null };
}

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

export function requireCaller(request: FastifyRequest): Caller {
  if (!request.caller) throw new AppError('UNAUTHENTICATED');
  return request.caller;
}

const ORG_HEADER = 'x-org-id';

function toResolveRequest(principal: Principal, orgId: string): ResolveCallerRequest {
  switch (principal.kind) {
    case 'user':
      return { principal: { $case: 'user', value: { ...principal } }, orgId };
    case 'client':
      return {
        principal: {
          $case: 'client',
          value: {
            issuer: principal.issuer,
            subject: principal.subject,
            orgId: principal.orgId,
            role: ROLE_TO_PROTO[principal.role],
          },
        },
        orgId: '',
      };
  }
}

/**
 * onRequest hook: verifies the bearer token, resolves the caller through the identity service
 * (reusing a resolution for CALLER_CACHE_TTL_MS: one gRPC call and query less per request), and
 * refuses members whose dashboard access is off (contract 5.8 names GET /api/session; we apply it to
 * every user-token route, since such a member must not use the dashboard's API either).
 */
export function authenticate(
  verifier: AccessTokenVerifier,
  clients: UpstreamClients,
  callers: GroupedCache<Caller>,
) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const principal = await verifier.verifyAuthorizationHeader(request.headers.authorization);
    const requestedOrg = request.headers[ORG_HEADER];
    if (requestedOrg !== undefined && (typeof requestedOrg !== 'string' || !isUuid(requestedOrg))) {
      throw new AppError('VALIDATION_FAILED', 'X-Org-Id must be an organization id', {
        fields: [{ path: 'headers.x-org-id', message: 'invalid id' }],
      });
    }
    const resolveRequest = toResolveRequest(principal, requestedOrg ?? '');
    // The whole request (issuer, subject, e-mail, name, org) is the key: a changed profile resolves again.
    const cacheKey = JSON.stringify(resolveRequest);
    const caller = await callers.getOrLoad(cacheKey, () =>
      resolveCaller(clients, resolveRequest, callOptionsFor(request), principal.kind),
    );
    if (caller.kind === 'user' && !caller.dashboardAccess) throw new AppError('DASHBOARD_ACCESS_DENIED');
    request.caller = caller;
  };
}

async function resolveCaller(
  clients: UpstreamClients,
  resolveRequest: ResolveCallerRequest,
  call: CallOptions,
  kind: Caller['kind'],
): Promise<Caller> {
  const resolved = await clients.identity.resolveCaller(resolveRequest, call);
  const user = required(resolved.user, 'caller user');
  const org = required(resolved.org, 'caller organization');
  return {
    kind,
    userId: user.id,
    email: user.email,
    name: user.name,
    memberId: resolved.memberId || null,
    role: roleFromProto(resolved.role),
    dashboardAccess: resolved.dashboardAccess,
    org: { id: org.id, name: org.name, domain: org.domain ?? null },
  };
}

/** Route-level onRequest hook: least privilege by role (DESIGN.md section 3). */
export function requireRoles(...roles: Role[]) {
  return async (request: FastifyRequest): Promise<void> => {
    const caller = requireCaller(request);
    if (!roles.includes(caller.role)) {
      throw new AppError('FORBIDDEN', `requires role ${roles.join(' or ')}`);
    }
  };
}
