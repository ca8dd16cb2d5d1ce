import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireCaller, requireRoles } from '../auth/caller-context';
import { ROLE_TO_PROTO } from '@sts/grpc/proto-enums';
import { memberToContract } from '../contract/contract-mapping';
import { errorResponses, idParam, memberPayload, pageQuery, roleSchema } from '../contract/contract-schemas';
import { setNextLink } from '../contract/link-header';
import type { GatewayCaches } from '../caching/gateway-caches';
import type { UpstreamClients } from '../upstream-clients';
import { required } from '../contract/upstream-answer';
import { callOptionsFor } from '../observability/http-observability';

const memberParams = z.object({ id: idParam });

export const memberRoutes: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  caches: GatewayCaches;
}> = async (app, { clients, caches }) => {
  app.get(
    '/api/members',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags: ['Members'],
        summary: "Members of the caller's organization",
        security: [{ bearerAuth: [] }],
        querystring: pageQuery,
        response: { 200: z.array(memberPayload), ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const caller = requireCaller(request);
      const page = await caches.memberPage(caller.org.id, request.query, async () => {
        const { members, nextCursor } = await clients.identity.listMembers(
          { orgId: caller.org.id, limit: request.query.limit ?? 0, cursor: request.query.cursor ?? '' },
          callOptionsFor(request),
        );
        return { members: members.map(memberToContract), nextCursor };
      });
      setNextLink(request, reply, page.nextCursor, request.query.limit);
      return page.members;
    },
  );

  app.patch(
    '/api/members/:id',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags: ['Members'],
        summary: "Change a member's role or dashboard access",
        description:
          'Either field may be sent alone. The last ORG_ADMIN with dashboard access cannot lose either (409 LAST_ADMIN).',
        security: [{ bearerAuth: [] }],
        params: memberParams,
        body: z
          .object({ role: roleSchema.optional(), dashboard_access: z.boolean().optional() })
          .strict()
          .refine(
            (body) => body.role !== undefined || body.dashboard_access !== undefined,
            'send role, dashboard_access or both',
          ),
        response: { 200: memberPayload, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const updated = await clients.identity.updateMember(
        {
          orgId: caller.org.id,
          memberId: request.params.id,
          role: request.body.role === undefined ? undefined : ROLE_TO_PROTO[request.body.role],
          dashboardAccess: request.body.dashboard_access,
        },
        callOptionsFor(request),
      );
      const member = required(updated.member, 'member');
      caches.membershipChanged(caller.org.id, member.userId);
      return memberToContract(member);
    },
  );

  app.delete(
    '/api/members/:id',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags: ['Members'],
        summary: 'Remove a member from the organization',
        security: [{ bearerAuth: [] }],
        params: memberParams,
        response: { 204: z.null().describe('No content'), ...errorResponses(401, 403, 404, 409) },
      },
    },
    async (request, reply) => {
      const caller = requireCaller(request);
      await clients.identity.removeMember(
        { orgId: caller.org.id, memberId: request.params.id },
        callOptionsFor(request),
      );
      caches.membershipChanged(caller.org.id, null);
      return reply.code(204).send(null);
    },
  );
};
