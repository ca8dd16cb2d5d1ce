import type { AnalyticsService } from '@sts/analytics-domain/analytics-service';
import { METRIC_FROM_PROTO, WINDOW_FROM_PROTO } from '@sts/grpc/proto-enums';
import { enumFrom, optionalUuidField, requireUuidField } from '@sts/grpc/request-checks';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import type { AnalyticsServiceService } from '@sts/proto/gen/analytics/v1/analytics';

/** Empty: the whole organization. A malformed id is a bad request; a well-formed one not ours reads as empty. */
function deviceScope(value: string): string | null {
  // device_id is a String column holding our ids as PostgreSQL writes them, in lower case.
  return optionalUuidField(value, 'device_id')?.toLowerCase() ?? null;
}

export function analyticsGrpcHandlers(
  service: AnalyticsService,
): AsyncHandlers<typeof AnalyticsServiceService> {
  return {
    getSummary: async (request) => {
      const orgId = requireUuidField(request.orgId, 'org_id');
      const window = enumFrom(WINDOW_FROM_PROTO, request.window, 'window');
      const summary = await service.summary(orgId, window, deviceScope(request.deviceId));
      return {
        summary: {
          totalAnalyzed: summary.total_analyzed,
          dangerousBlocks: summary.dangerous_blocks,
          riskyWarnings: summary.risky_warnings,
          avgClassificationMs: summary.avg_classification_ms,
        },
      };
    },
    getSeries: async (request) => {
      const orgId = requireUuidField(request.orgId, 'org_id');
      const metric = enumFrom(METRIC_FROM_PROTO, request.metric, 'metric');
      const window = enumFrom(WINDOW_FROM_PROTO, request.window, 'window');
      const points = await service.series(orgId, metric, window, deviceScope(request.deviceId));
      return { buckets: points.map((point) => ({ start: point.start, value: point.value })) };
    },
  };
}
