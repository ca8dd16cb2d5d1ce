import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireCaller } from '../auth/caller-context';
import { notificationToContract } from '../contract/contract-mapping';
import { errorResponses, idParam, notificationPayload, pageQuery } from '../contract/contract-schemas';
import { setNextLink } from '../contract/link-header';
import type { UpstreamClients } from '../upstream-clients';
import { required } from '../contract/upstream-answer';
import { callOptionsFor } from '../observability/http-observability';

export const notificationRoutes: FastifyPluginAsyncZod<{ clients: UpstreamClients }> = async (
  app,
  { clients },
) => {
  app.get(
    '/api/notifications',
    {
      schema: {
        tags: ['Notifications'],
        summary: "The organization's feed, newest first, with the caller's read state",
        description:
          'The X-Unread-Count response header carries the number of unread notifications (our addition).',
        security: [{ bearerAuth: [] }],
        querystring: pageQuery
          .extend({ unread: z.stringbool().optional().describe('Only unread notifications') })
          .strict(),
        response: { 200: z.array(notificationPayload), ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const caller = requireCaller(request);
      const { notifications, nextCursor, unreadCount } = await clients.notification.listNotifications(
        {
          orgId: caller.org.id,
          userId: caller.userId,
          limit: request.query.limit ?? 0,
          cursor: request.query.cursor ?? '',
          unreadOnly: request.query.unread ?? false,
        },
        callOptionsFor(request),
      );
      setNextLink(request, reply, nextCursor, request.query.limit);
      reply.header('x-unread-count', String(unreadCount));
      return notifications.map(notificationToContract);
    },
  );

  app.post(
    '/api/notifications/:id/read',
    {
      schema: {
        tags: ['Notifications'],
        summary: 'Mark one notification read for the caller',
        security: [{ bearerAuth: [] }],
        params: z.object({ id: idParam }),
        response: { 200: notificationPayload, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const marked = await clients.notification.markRead(
        { orgId: caller.org.id, userId: caller.userId, notificationId: request.params.id },
        callOptionsFor(request),
      );
      return notificationToContract(required(marked.notification, 'notification'));
    },
  );

  app.post(
    '/api/notifications/read-all',
    {
      schema: {
        tags: ['Notifications'],
        summary: 'Mark every notification of the feed read for the caller',
        security: [{ bearerAuth: [] }],
        response: {
          200: z.object({ marked: z.number().int() }).meta({ id: 'MarkedAllRead' }),
          ...errorResponses(401, 403),
        },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const { marked } = await clients.notification.markAllRead(
        { orgId: caller.org.id, userId: caller.userId },
        callOptionsFor(request),
      );
      return { marked };
    },
  );
};
