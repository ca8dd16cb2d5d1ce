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

/** Replicas more than a second behind are refused to ingestion's reads; redeliveries come well after that. */
const CLUSTER_MIN_ACK_WAIT_MS = 3_000;

export const analyticsEnvSchema = z
  .object({
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
    /**
     * A cluster of the ClickHouse servers' `remote_servers`: the analytics tables are replicated local
     * tables on every server with Distributed tables over them, sharded by organization. Unset: plain
     * tables on the server of CLICKHOUSE_URL. Chosen when the database is created (docs/decisions.md).
     */
    CLICKHOUSE_CLUSTER: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
      .optional(),
    /** Days raw rows are kept; rollups outlive them. */
    TELEMETRY_RAW_RETENTION_DAYS: positiveInt.default(35),
    /** Days hourly rollups are kept (the 24h window needs 2). */
    TELEMETRY_HOURLY_RETENTION_DAYS: positiveInt.default(90),
    /** Days daily rollups are kept (the 30d window needs 31). */
    TELEMETRY_DAILY_RETENTION_DAYS: positiveInt.default(400),
    /** How long the first batch waits for more before the insert. */
    TELEMETRY_BATCH_WAIT_MS: positiveInt.default(200),
    /**
     * How long after a batch was received a device event from before it may still be on its way to the
     * events stream (the outbox relay). A batch received while its device was disabled is dropped only once
     * analytics has applied the device events up to this long after it; until then it waits for an enable
     * (docs/decisions.md, "A device's next batch meets its new state").
     */
    TELEMETRY_STATE_SETTLE_MS: positiveInt.default(5_000),
    /**
     * Health reports `dependency/device-purges` not serving once a parked purge has waited this long; it does
     * not decide readiness.
     */
    DEVICE_PURGE_MAX_WAIT_MS: positiveInt.default(5 * 60_000),
    THREAT_BLOCK_THRESHOLD: positiveInt.default(DEFAULT_THREAT_RULE.threshold),
    THREAT_WINDOW_MINUTES: positiveInt.default(DEFAULT_THREAT_RULE.windowMinutes),
    THREAT_COOLDOWN_MINUTES: positiveInt.default(DEFAULT_THREAT_RULE.cooldownMinutes),
  })
  .superRefine((config, context) => {
    // A crashed process's batches must come back after a lagging replica is refused (analytics-tables.ts).
    if (config.CLICKHOUSE_CLUSTER !== undefined && config.TELEMETRY_ACK_WAIT_MS < CLUSTER_MIN_ACK_WAIT_MS) {
      context.addIssue({
        code: 'custom',
        path: ['TELEMETRY_ACK_WAIT_MS'],
        message: `must be at least ${CLUSTER_MIN_ACK_WAIT_MS} with CLICKHOUSE_CLUSTER: a redelivered batch must find every replica that stored it fresh or refused`,
      });
    }
  });

export type AnalyticsConfig = z.infer<typeof analyticsEnvSchema>;
