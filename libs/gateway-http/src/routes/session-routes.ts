import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { errorResponses, sessionPayload, type licensePayload } from '../contract-schemas';
import { licenseToContract } from '../contract-mapping';
import { requireCaller } from '../caller-context';
import type { TtlCache } from '../ttl-cache';
import type { UpstreamClients } from '../upstream-clients';
import { callOptionsFor } from '../http-observability';

export const sessionRoutes: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  licenses: TtlCache<z.infer<typeof licensePayload>>;
}> = async (app, { clients, licenses }) => {
  app.get(
    '/api/session',
    {
      schema: {
        tags: ['Session'],
        summary: 'The current user, organization and license',
        security: [{ bearerAuth: [] }],
        response: { 200: sessionPayload, ...errorResponses(401, 403) },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const license = await licenses.getOrLoad(caller.org.id, async () =>
        licenseToContract(
          (await clients.billing.getLicense({ orgId: caller.org.id }, callOptionsFor(request))).license,
        ),
      );
      return {
        user: {
          id: caller.userId,
          email: caller.email,
          name: caller.name,
          role: caller.role,
          dashboard_access: caller.dashboardAccess,
        },
        org: caller.org,
        license,
      };
    },
  );
};
