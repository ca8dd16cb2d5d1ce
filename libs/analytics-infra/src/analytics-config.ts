import { z } from 'zod';
import { DEFAULT_THREAT_RULE } from '@sts/analytics-domain/telemetry-ingestion';
import { clickhouseEnv, commonEnv, grpcServerEnv, natsEnv } from '@sts/config/env-fragments';

const positiveInt = z.coerce.number().int().positive();

export const analyticsEnvSchema = z.object({
  ...commonEnv,
  ...natsEnv,
  ...clickhouseEnv,
  ...grpcServerEnv,
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
  /** Telemetry batches handed to ClickHouse together at most. */
  TELEMETRY_BATCH_MESSAGES: positiveInt.default(200),
  /** How long the first batch waits for more before the insert. */
  TELEMETRY_BATCH_WAIT_MS: positiveInt.default(200),
  /**
   * A batch pulled but not acknowledged in this time goes to another process (the holder is kept
   * alive while it works, so this is how long a crashed process's batches wait).
   */
  TELEMETRY_ACK_WAIT_MS: z.coerce.number().int().min(1_000).max(600_000).default(60_000),
  /** Bytes the telemetry stream may hold before the gateway is refused (503); -1: no limit. */
  TELEMETRY_STREAM_MAX_BYTES: z.coerce.number().int().min(-1).default(-1),
  THREAT_BLOCK_THRESHOLD: positiveInt.default(DEFAULT_THREAT_RULE.threshold),
  THREAT_WINDOW_MINUTES: positiveInt.default(DEFAULT_THREAT_RULE.windowMinutes),
  THREAT_COOLDOWN_MINUTES: positiveInt.default(DEFAULT_THREAT_RULE.cooldownMinutes),
});

export type AnalyticsConfig = z.infer<typeof analyticsEnvSchema>;
