import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireCaller, requireRoles } from '../auth/caller-context';
import { INVITE_STATE_TO_PROTO, ROLE_TO_PROTO } from '@sts/grpc/proto-enums';
import { inviteToContract } from '../contract/contract-mapping';
import { errorResponses, idParam, invitePayload, pageQuery, roleSchema } from '../contract/contract-schemas';
import { setNextLink } from '../contract/link-header';
import type { RateLimiter } from '../limits/rate-limiter';
import type { UpstreamClients } from '../upstream-clients';
import { required } from '../contract/upstream-answer';
import { callOptionsFor } from '../observability/http-observability';
import type {
  Invite as ProtoInvite,
  Organization as ProtoOrganization,
} from '@sts/proto/gen/identity/v1/identity';

export const inviteRoutes: FastifyPluginAsyncZod<{ clients: UpstreamClients }> = async (app, { clients }) => {
  app.get(
    '/api/invites',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags: ['Invites'],
        summary: 'Pending invites of the organization',
        description:
          'Pending invites (the contract). With status=accepted (our addition): invites accepted whose invitee has ' +
          'not joined yet; they join at their next sign-in before expires_at, unless the invite is revoked first.',
        security: [{ bearerAuth: [] }],
        querystring: pageQuery.extend({
          status: z
            .enum(['pending', 'accepted'])
            .default('pending')
            .describe('pending (default) or accepted, not yet joined'),
        }),
        response: { 200: z.array(invitePayload), ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const caller = requireCaller(request);
      const { invites, nextCursor } = await clients.identity.listInvites(
        {
          orgId: caller.org.id,
          limit: request.query.limit ?? 0,
          cursor: request.query.cursor ?? '',
          state: INVITE_STATE_TO_PROTO[request.query.status],
        },
        callOptionsFor(request),
      );
      setNextLink(request, reply, nextCursor, request.query.limit);
      return invites.map(inviteToContract);
    },
  );

  app.post(
    '/api/invites',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags: ['Invites'],
        summary: 'Invite someone by e-mail',
        description:
          'The invitee receives an e-mail with a single-use token that expires (7 days by default). Counts ' +
          'against the daily quota of e-mails the organization sends to outsiders, which e-mailed enrollment ' +
          'codes share, and the daily limit per recipient: 429 RATE_LIMITED beyond either, with nothing sent.',
        security: [{ bearerAuth: [] }],
        body: z.object({ email: z.email().max(254), role: roleSchema }).strict(),
        response: { 201: invitePayload, ...errorResponses(400, 401, 403, 409, 429) },
      },
    },
    async (request, reply) => {
      const caller = requireCaller(request);
      const created = await clients.identity.createInvite(
        {
          orgId: caller.org.id,
          email: request.body.email,
          role: ROLE_TO_PROTO[request.body.role],
          invitedByMemberId: caller.memberId ?? '',
        },
        callOptionsFor(request),
      );
      return reply.code(201).send(inviteToContract(required(created.invite, 'invite')));
    },
  );

  app.delete(
    '/api/invites/:id',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags: ['Invites'],
        summary: 'Revoke a pending invite, or an accepted one whose invitee has not joined yet',
        security: [{ bearerAuth: [] }],
        params: z.object({ id: idParam }),
        response: { 204: z.null().describe('No content'), ...errorResponses(401, 403, 404) },
      },
    },
    async (request, reply) => {
      const caller = requireCaller(request);
      await clients.identity.revokeInvite(
        { orgId: caller.org.id, inviteId: request.params.id },
        callOptionsFor(request),
      );
      return reply.code(204).send(null);
    },
  );
};

const inviteTokenBody = z.object({ token: z.string().min(1).max(200) }).strict();
const invitedFields = {
  email: z.string(),
  role: roleSchema,
  org: z.object({ id: z.string(), name: z.string() }),
};

/** The invite and its organization, as the accept and the preview answer them. */
function invitedBy(answer: { invite?: ProtoInvite; org?: ProtoOrganization }) {
  const org = required(answer.org, 'organization');
  const { email, role, expires_at } = inviteToContract(required(answer.invite, 'invite'));
  return { email, role, org: { id: org.id, name: org.name }, expires_at };
}

/**
 * POST /api/invites/accept and /api/invites/preview need no authentication: the token is the credential.
 * Rate limited per client address, each on its own. The token travels in a body, never in an address
 * (addresses end up in access logs and Referer headers).
 */
export const acceptInviteRoute: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  limiter: RateLimiter;
  perMinute: number;
}> = async (app, { clients, limiter, perMinute }) => {
  app.post(
    '/api/invites/accept',
    {
      onRequest: limiter.perAddress({ scope: 'post-api-invites-accept', max: perMinute }),
      schema: {
        tags: ['Invites'],
        summary: 'Accept an invite with the token from the invitation e-mail',
        description:
          'No authentication. The invitee becomes a member of the inviting organization at their next login with the invited e-mail address.',
        body: inviteTokenBody,
        response: {
          200: z.object({ status: z.literal('accepted'), ...invitedFields }).meta({ id: 'AcceptedInvite' }),
          ...errorResponses(400, 429),
        },
      },
    },
    async (request) => {
      const { expires_at: _expiresAt, ...invited } = invitedBy(
        await clients.identity.acceptInvite({ token: request.body.token }, callOptionsFor(request)),
      );
      return { status: 'accepted' as const, ...invited };
    },
  );

  app.post(
    '/api/invites/preview',
    {
      onRequest: limiter.perAddress({ scope: 'post-api-invites-preview', max: perMinute }),
      schema: {
        tags: ['Invites'],
        summary: 'Who invites the holder of this token, and as what (our addition); changes nothing',
        description:
          'No authentication. For the invitation page to show before the invitee accepts; 400 INVITE_TOKEN_INVALID for every token an accept would refuse.',
        body: inviteTokenBody,
        response: {
          200: z
            .object({ status: z.literal('pending'), ...invitedFields, expires_at: z.string() })
            .meta({ id: 'InvitePreview' }),
          ...errorResponses(400, 429),
        },
      },
    },
    async (request) => ({
      status: 'pending' as const,
      ...invitedBy(
        await clients.identity.previewInvite({ token: request.body.token }, callOptionsFor(request)),
      ),
    }),
  );
};
