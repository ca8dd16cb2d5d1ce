import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { errorResponses, sessionPayload, type licensePayload } from '../contract/contract-schemas';
import { licenseToContract } from '../contract/contract-mapping';
import { requireCaller } from '../auth/caller-context';
import type { GroupedCache } from '../caching/grouped-cache';
import type { UpstreamClients } from '../upstream-clients';
import { callOptionsFor } from '../observability/http-observability';

export const sessionRoutes: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  licenses: GroupedCache<z.infer<typeof licensePayload>>;
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
