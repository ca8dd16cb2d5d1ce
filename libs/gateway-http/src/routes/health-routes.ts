import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';

export const healthRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/api/analytics/health',
    {
      schema: {
        tags: ['Health'],
        summary: 'Reports that the API is reachable',
        response: { 200: z.object({ status: z.literal('ok') }).meta({ id: 'Health' }) },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
};
