import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { errorResponses, sessionPayload } from '../contract-schemas';
import { licenseToContract } from '../contract-mapping';
import { requireCaller } from '../caller-context';
import type { TtlCache } from '../ttl-cache';
import type { UpstreamClients } from '../upstream-clients';

export type SessionLicense = ReturnType<typeof licenseToContract>;

export const sessionRoutes: FastifyPluginAsyncZod<{ clients: UpstreamClients; licenses: TtlCache<SessionLicense> }> = async (
  app,
  { clients, licenses },
) => {
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
      let license = licenses.get(caller.org.id);
      if (!license) {
        license = licenseToContract((await clients.billing.getLicense({ orgId: caller.org.id }, { requestId: request.id })).license);
        licenses.set(caller.org.id, license);
      }
      return {
        user: { id: caller.userId, email: caller.email, name: caller.name, role: caller.role, dashboard_access: caller.dashboardAccess },
        org: caller.org,
        license,
      };
    },
  );
};
