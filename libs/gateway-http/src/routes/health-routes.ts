import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Readiness } from '../readiness';

const readinessPayload = z
  .object({
    status: z.enum(['ready', 'not ready']),
    checks: z.record(z.string(), z.enum(['ok', 'missing'])),
    missing: z.array(z.string()).describe('The dependencies that did not answer'),
  })
  .meta({ id: 'Readiness' });

/**
 * The contract's health route, and the operators' probes: `/livez` (the process serves HTTP: restart it
 * otherwise) and `/readyz` (every dependency answers: send it traffic; otherwise 503 naming what is missing).
 */
export const healthRoutes: FastifyPluginAsyncZod<{ readiness: Readiness }> = async (app, { readiness }) => {
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

  app.get(
    '/livez',
    {
      schema: {
        tags: ['Health'],
        summary: 'Liveness: the gateway process serves requests',
        response: { 200: z.object({ status: z.literal('ok') }) },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['Health'],
        summary: 'Readiness: NATS and every service answer; 503 names the missing ones',
        response: { 200: readinessPayload, 503: readinessPayload },
      },
    },
    async (_request, reply) => {
      const report = await readiness.report();
      return reply.status(report.ready ? 200 : 503).send({
        status: report.ready ? 'ready' : 'not ready',
        checks: report.checks,
        missing: report.missing,
      });
    },
  );
};
