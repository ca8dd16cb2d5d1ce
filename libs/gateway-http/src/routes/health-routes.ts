import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Readiness } from '../observability/readiness';

const readinessPayload = z
  .object({
    status: z
      .enum(['ready', 'degraded', 'not ready', 'draining'])
      .describe(
        'degraded: ready, but a service does not answer (its routes fail, the others work); draining: shutting down, finishing what it has',
      ),
    checks: z.record(z.string(), z.enum(['ok', 'missing'])),
    missing: z.array(z.string()).describe('The dependencies that did not answer'),
  })
  .meta({ id: 'Readiness' });

/**
 * The contract's health route, and the operators' probes: `/livez` (the process serves HTTP: restart it
 * otherwise) and `/readyz` (NATS answers and no shutdown has begun: send it traffic; 503 otherwise), which
 * also names every service that does not answer.
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
        summary:
          'Readiness: NATS answers (503 otherwise); every service is checked and the missing ones named',
        response: { 200: readinessPayload, 503: readinessPayload },
      },
    },
    async (_request, reply) => {
      const report = await readiness.report();
      return reply.status(report.ready ? 200 : 503).send({
        status: report.draining
          ? 'draining'
          : !report.ready
            ? 'not ready'
            : report.missing.length > 0
              ? 'degraded'
              : 'ready',
        checks: report.checks,
        missing: report.missing,
      });
    },
  );
};
