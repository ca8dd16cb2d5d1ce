import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { METRIC_TO_PROTO, WINDOW_TO_PROTO } from '@sts/grpc/proto-enums';
import { isUuid } from '@sts/vocabulary/identifiers';
import { required } from '../contract/upstream-answer';
import { requireCaller, requireRoles } from '../auth/caller-context';
import { errorResponses } from '../contract/contract-schemas';
import type { GatewayCaches } from '../caching/gateway-caches';
import type { UpstreamClients } from '../upstream-clients';
import { callOptionsFor } from '../observability/http-observability';

const windowParam = z.enum(['24h', '30d']).describe('24h: 24 hourly buckets; 30d: 30 daily buckets (UTC)');
const deviceParam = z
  // isUuid, as everywhere: our ids are UUIDs of any version. `format` keeps the OpenAPI type.
  .string()
  .refine(isUuid, 'Invalid UUID')
  .meta({ format: 'uuid' })
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

const METRICS = ['total_analyzed', 'dangerous_blocks', 'risky_warnings', 'avg_classification_ms'] as const;
type Metric = (typeof METRICS)[number];
type Window = z.infer<typeof windowParam>;
const pointPayload = z.object({ timestamp: z.string(), value: z.number() });
type Point = z.infer<typeof pointPayload>;

const seriesPayload = z
  .object({
    metric: z.enum(METRICS),
    window: windowParam,
    data: z.array(pointPayload),
  })
  .meta({ id: 'TimeSeries' });

const overviewPayload = z
  .object({
    window: windowParam,
    summary: summaryPayload,
    series: z
      .object(
        Object.fromEntries(METRICS.map((metric) => [metric, z.array(pointPayload)])) as Record<
          Metric,
          z.ZodArray<typeof pointPayload>
        >,
      )
      .describe("Each metric's buckets, as GET /api/analytics/series answers them"),
  })
  .meta({ id: 'AnalyticsOverview' });

/** GET /api/analytics/summary, /series and /overview: the organization's figures (disabled devices left out), or one device's. */
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
      const { window, device_id: deviceId = '' } = request.query;
      return summaryOf(request, window, deviceId);
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
      const { metric, window, device_id: deviceId = '' } = request.query;
      return seriesOf(request, metric, window, deviceId);
    },
  );

  // Our addition (the dashboard's overview in one request instead of five): the summary and every
  // metric's series of one window, each answer the same as its own route's (and cached with it).
  app.get(
    '/api/analytics/overview',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags: ['Analytics'],
        summary: 'The summary and the series of every metric over a window, in one answer',
        security,
        querystring: z.object({ window: windowParam, device_id: deviceParam }).strict(),
        response: { 200: overviewPayload, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => {
      const { window, device_id: deviceId = '' } = request.query;
      const [summary, ...series] = await Promise.all([
        summaryOf(request, window, deviceId),
        ...METRICS.map((metric) => seriesOf(request, metric, window, deviceId)),
      ]);
      return {
        window,
        summary,
        series: Object.fromEntries(series.map((one) => [one.metric, one.data])) as Record<Metric, Point[]>,
      };
    },
  );

  function summaryOf(request: FastifyRequest, window: Window, deviceId: string) {
    const orgId = requireCaller(request).org.id;
    return caches.analyticsAnswer(orgId, `summary|${window}|${deviceId}`, async () => {
      const { summary } = await clients.analytics.getSummary(
        { orgId, window: WINDOW_TO_PROTO[window], deviceId },
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
  }

  function seriesOf(request: FastifyRequest, metric: Metric, window: Window, deviceId: string) {
    const orgId = requireCaller(request).org.id;
    return caches.analyticsAnswer(orgId, `series|${metric}|${window}|${deviceId}`, async () => {
      const { buckets } = await clients.analytics.getSeries(
        { orgId, metric: METRIC_TO_PROTO[metric], window: WINDOW_TO_PROTO[window], deviceId },
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
  }
};
