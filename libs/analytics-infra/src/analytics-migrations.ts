import type { ClickHouseMigration } from '@sts/clickhouse/clickhouse-migrations';

/**
 * The analytics tables (ClickHouse 18.16 and current versions):
 *
 * - `telemetry_events`: raw rows, one per analyzed address, partitioned by UTC day (retention drops
 *   whole partitions). `batch_key` (device id and batch id) ties each row to its batch.
 * - `telemetry_hourly`, `telemetry_daily`: rollups per organization, bucket and device, filled by
 *   materialized views from the same insert; SummingMergeTree, so queries `sum()` and `GROUP BY`.
 * - `ingested_batches`: the ledger of stored batch keys, filled by a materialized view from the same
 *   insert as the rows, so a batch's key is stored if and only if its rows are.
 * - `device_states`: the device lifecycle as analytics knows it (newest version wins).
 * - `device_state_changes`: every change of that lifecycle (and enrollment times), so that ingestion
 *   knows a device's state when a batch was received, not only now (migration 002).
 * - `threat_detections`: when a device last crossed the threat threshold (the cooldown reads it).
 *
 * Times are `DateTime('UTC')`, so buckets are UTC whatever the server's time zone.
 */
export const ANALYTICS_MIGRATIONS: ClickHouseMigration[] = [
  {
    id: '001_telemetry',
    statements: [
      `CREATE TABLE IF NOT EXISTS telemetry_events (
        org_id String,
        device_id String,
        batch_key String,
        observed_at DateTime('UTC'),
        host String,
        verdict Enum8('allowed' = 1, 'blocked' = 2, 'warned' = 3),
        classification_ms Float32,
        received_at DateTime('UTC')
      ) ENGINE = MergeTree() PARTITION BY toYYYYMMDD(observed_at) ORDER BY (org_id, device_id, observed_at)`,
      `CREATE TABLE IF NOT EXISTS telemetry_hourly (
        org_id String,
        hour DateTime('UTC'),
        device_id String,
        total_analyzed UInt64,
        dangerous_blocks UInt64,
        risky_warnings UInt64,
        classification_ms_sum Float64
      ) ENGINE = SummingMergeTree() PARTITION BY toYYYYMMDD(hour) ORDER BY (org_id, hour, device_id)`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS telemetry_hourly_mv TO telemetry_hourly AS
        SELECT org_id, toStartOfHour(observed_at) AS hour, device_id,
          count() AS total_analyzed,
          countIf(verdict = 'blocked') AS dangerous_blocks,
          countIf(verdict = 'warned') AS risky_warnings,
          sum(classification_ms) AS classification_ms_sum
        FROM telemetry_events GROUP BY org_id, hour, device_id`,
      `CREATE TABLE IF NOT EXISTS telemetry_daily (
        org_id String,
        day Date,
        device_id String,
        total_analyzed UInt64,
        dangerous_blocks UInt64,
        risky_warnings UInt64,
        classification_ms_sum Float64
      ) ENGINE = SummingMergeTree() PARTITION BY toYYYYMM(day) ORDER BY (org_id, day, device_id)`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS telemetry_daily_mv TO telemetry_daily AS
        SELECT org_id, toDate(observed_at) AS day, device_id,
          count() AS total_analyzed,
          countIf(verdict = 'blocked') AS dangerous_blocks,
          countIf(verdict = 'warned') AS risky_warnings,
          sum(classification_ms) AS classification_ms_sum
        FROM telemetry_events GROUP BY org_id, day, device_id`,
      `CREATE TABLE IF NOT EXISTS ingested_batches (
        received_day Date,
        batch_key String,
        events UInt64
      ) ENGINE = MergeTree() PARTITION BY toYYYYMMDD(received_day) ORDER BY batch_key`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ingested_batches_mv TO ingested_batches AS
        SELECT toDate(received_at) AS received_day, batch_key, count() AS events
        FROM telemetry_events GROUP BY received_day, batch_key`,
      `CREATE TABLE IF NOT EXISTS device_states (
        org_id String,
        device_id String,
        hostname String,
        state Enum8('active' = 1, 'disabled' = 2, 'deleted' = 3),
        version UInt64
      ) ENGINE = ReplacingMergeTree(version) ORDER BY (org_id, device_id)`,
      `CREATE TABLE IF NOT EXISTS threat_detections (
        org_id String,
        device_id String,
        detected_at DateTime('UTC'),
        dangerous_blocks UInt64
      ) ENGINE = MergeTree() PARTITION BY toYYYYMM(detected_at) ORDER BY (org_id, device_id, detected_at)`,
    ],
  },
  {
    id: '002_device_state_changes',
    statements: [
      // Rows are changes, not versions of one row: the ordering key holds the version, so merges only
      // fold repeats of one change (a redelivered event).
      `CREATE TABLE IF NOT EXISTS device_state_changes (
        org_id String,
        device_id String,
        version UInt64,
        state Enum8('active' = 1, 'disabled' = 2, 'deleted' = 3),
        enrolled_at UInt64
      ) ENGINE = ReplacingMergeTree() ORDER BY (org_id, device_id, version, state)`,
      // Devices known before: their current state, from when it was set (earlier changes are not known).
      `INSERT INTO device_state_changes (org_id, device_id, version, state, enrolled_at)
        SELECT org_id, device_id, max(version), argMax(state, version), 0
        FROM device_states GROUP BY org_id, device_id`,
    ],
  },
];

/** Tables whose rows belong to a device: a deleted device's rows go from each. */
export const DEVICE_TELEMETRY_TABLES = ['telemetry_events', 'telemetry_hourly', 'telemetry_daily'] as const;
