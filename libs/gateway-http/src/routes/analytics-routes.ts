import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { Metric, Window } from '@sts/proto/gen/analytics/v1/analytics';
import { required } from '../upstream-answer';
import { requireCaller, requireRoles } from '../caller-context';
import { errorResponses } from '../contract-schemas';
import type { GatewayCaches } from '../gateway-caches';
import type { UpstreamClients } from '../upstream-clients';
import { callOptionsFor } from '../http-observability';

const WINDOWS = { '24h': Window.WINDOW_24H, '30d': Window.WINDOW_30D } as const;
const METRICS = {
  total_analyzed: Metric.METRIC_TOTAL_ANALYZED,
  dangerous_blocks: Metric.METRIC_DANGEROUS_BLOCKS,
  risky_warnings: Metric.METRIC_RISKY_WARNINGS,
  avg_classification_ms: Metric.METRIC_AVG_CLASSIFICATION_MS,
} as const;

const windowParam = z.enum(['24h', '30d']).describe('24h: 24 hourly buckets; 30d: 30 daily buckets (UTC)');
const deviceParam = z
  .uuid()
  .optional()
  .describe('Scopes to one device; a device of another organization reads as one without telemetry');

const summaryPayload = z
  .object({
    total_analyzed: z.number(),
    dangerous_blocks: z.number(),
    risky_warnings: z.number(),
    avg_classification_ms: z.number(),
  })
  .meta({ id: 'AnalyticsSummary' });

const seriesPayload = z
  .object({
    metric: z.enum(['total_analyzed', 'dangerous_blocks', 'risky_warnings', 'avg_classification_ms']),
    window: windowParam,
    data: z.array(z.object({ timestamp: z.string(), value: z.number() })),
  })
  .meta({ id: 'TimeSeries' });

/** GET /api/analytics/summary and /series: the organization's figures (disabled devices left out), or one device's. */
export const analyticsRoutes: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  caches: GatewayCaches;
}> = async (app, { clients, caches }) => {
  const security = [{ bearerAuth: [] }];

  app.get(
    '/api/analytics/summary',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags: ['Analytics'],
        summary: 'Totals over a window',
        security,
        querystring: z.object({ window: windowParam, device_id: deviceParam }).strict(),
        response: { 200: summaryPayload, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => {
      const orgId = requireCaller(request).org.id;
      const { window, device_id: deviceId = '' } = request.query;
      return caches.analyticsAnswer(orgId, `summary|${window}|${deviceId}`, async () => {
        const { summary } = await clients.analytics.getSummary(
          { orgId, window: WINDOWS[window], deviceId },
          callOptionsFor(request),
        );
        const totals = required(summary, 'analytics summary');
        return {
          total_analyzed: totals.totalAnalyzed,
          dangerous_blocks: totals.dangerousBlocks,
          risky_warnings: totals.riskyWarnings,
          avg_classification_ms: totals.avgClassificationMs,
        };
      });
    },
  );

  app.get(
    '/api/analytics/series',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags: ['Analytics'],
        summary: 'One metric per bucket over a window (zero-filled, UTC, oldest first)',
        security,
        querystring: z
          .object({ metric: seriesPayload.shape.metric, window: windowParam, device_id: deviceParam })
          .strict(),
        response: { 200: seriesPayload, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => {
      const orgId = requireCaller(request).org.id;
      const { metric, window, device_id: deviceId = '' } = request.query;
      return caches.analyticsAnswer(orgId, `series|${metric}|${window}|${deviceId}`, async () => {
        const { buckets } = await clients.analytics.getSeries(
          { orgId, metric: METRICS[metric], window: WINDOWS[window], deviceId },
          callOptionsFor(request),
        );
        return {
          metric,
          window,
          data: buckets.map((bucket) => ({
            timestamp: required(bucket.start, 'bucket start').toISOString(),
            value: bucket.value,
          })),
        };
      });
    },
  );
};
