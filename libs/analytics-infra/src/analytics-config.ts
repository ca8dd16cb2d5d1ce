import { z } from 'zod';
import { DEFAULT_THREAT_RULE } from '@sts/analytics-domain/telemetry-ingestion';
import {
  clickhouseEnv,
  commonEnv,
  grpcServerEnv,
  natsEnv,
  telemetryStreamEnv,
} from '@sts/config/env-fragments';

const positiveInt = z.coerce.number().int().positive();

export const analyticsEnvSchema = z.object({
  ...commonEnv,
  ...natsEnv,
  ...clickhouseEnv,
  ...grpcServerEnv,
  ...telemetryStreamEnv,
  GRPC_PORT: grpcServerEnv.GRPC_PORT.default(50055),
  /** ClickHouse database of the analytics tables (created and migrated at start). */
  CLICKHOUSE_DATABASE: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
    .default('sts_analytics'),
  /** Days raw rows are kept; rollups outlive them. */
  TELEMETRY_RAW_RETENTION_DAYS: positiveInt.default(35),
  /** Days hourly rollups are kept (the 24h window needs 2). */
  TELEMETRY_HOURLY_RETENTION_DAYS: positiveInt.default(90),
  /** Days daily rollups are kept (the 30d window needs 31). */
  TELEMETRY_DAILY_RETENTION_DAYS: positiveInt.default(400),
  /** How long the first batch waits for more before the insert. */
  TELEMETRY_BATCH_WAIT_MS: positiveInt.default(200),
  /**
   * How long a batch received just after its device was disabled waits for an enable that has not reached
   * analytics yet, before it is dropped (docs/decisions.md, "Device lifecycle").
   */
  TELEMETRY_STATE_SETTLE_MS: positiveInt.default(30_000),
  /** Readiness reports `dependency/device-purges` not serving once a parked purge has waited this long. */
  DEVICE_PURGE_MAX_WAIT_MS: positiveInt.default(5 * 60_000),
  THREAT_BLOCK_THRESHOLD: positiveInt.default(DEFAULT_THREAT_RULE.threshold),
  THREAT_WINDOW_MINUTES: positiveInt.default(DEFAULT_THREAT_RULE.windowMinutes),
  THREAT_COOLDOWN_MINUTES: positiveInt.default(DEFAULT_THREAT_RULE.cooldownMinutes),
});

export type AnalyticsConfig = z.infer<typeof analyticsEnvSchema>;
