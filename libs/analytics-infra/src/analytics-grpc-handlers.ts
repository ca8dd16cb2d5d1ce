import type { AnalyticsWindow, Metric } from '@sts/analytics-domain/analytics-model';
import type { AnalyticsService } from '@sts/analytics-domain/analytics-service';
import { invalidField } from '@sts/errors/app-error';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import {
  Metric as ProtoMetric,
  Window as ProtoWindow,
  type AnalyticsServiceService,
} from '@sts/proto/gen/analytics/v1/analytics';
import { isUuid } from '@sts/vocabulary/identifiers';

function windowFromProto(window: ProtoWindow): AnalyticsWindow {
  switch (window) {
    case ProtoWindow.WINDOW_24H:
      return '24h';
    case ProtoWindow.WINDOW_30D:
      return '30d';
    default:
      throw invalidField('window', 'must be 24h or 30d');
  }
}

function metricFromProto(metric: ProtoMetric): Metric {
  switch (metric) {
    case ProtoMetric.METRIC_TOTAL_ANALYZED:
      return 'total_analyzed';
    case ProtoMetric.METRIC_DANGEROUS_BLOCKS:
      return 'dangerous_blocks';
    case ProtoMetric.METRIC_RISKY_WARNINGS:
      return 'risky_warnings';
    case ProtoMetric.METRIC_AVG_CLASSIFICATION_MS:
      return 'avg_classification_ms';
    default:
      throw invalidField(
        'metric',
        'must be total_analyzed, dangerous_blocks, risky_warnings or avg_classification_ms',
      );
  }
}

function requireOrgId(value: string): string {
  if (!isUuid(value)) throw invalidField('org_id', 'must be an organization id');
  return value;
}

/** Empty: the whole organization. A malformed id is a bad request; a well-formed one not ours reads as empty. */
function deviceScope(value: string): string | null {
  if (value === '') return null;
  if (!isUuid(value)) throw invalidField('device_id', 'must be a device id');
  return value.toLowerCase();
}

export function analyticsGrpcHandlers(
  service: AnalyticsService,
): AsyncHandlers<typeof AnalyticsServiceService> {
  return {
    getSummary: async (request) => {
      const orgId = requireOrgId(request.orgId);
      const window = windowFromProto(request.window);
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
      const orgId = requireOrgId(request.orgId);
      const metric = metricFromProto(request.metric);
      const window = windowFromProto(request.window);
      const points = await service.series(orgId, metric, window, deviceScope(request.deviceId));
      return { buckets: points.map((point) => ({ start: point.start, value: point.value })) };
    },
  };
}
