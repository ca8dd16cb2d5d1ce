import type { ClickHouseMigration } from '@sts/clickhouse/clickhouse-migrations';
import { identifier, sql, type SqlFragment } from '@sts/clickhouse/sql-escape';

/**
 * Where the analytics tables live: one server (`cluster` null), or a cluster of the servers'
 * `remote_servers` (CLICKHOUSE_CLUSTER), chosen when the database is created.
 */
export interface AnalyticsSchemaTarget {
  readonly database: string;
  readonly cluster: string | null;
}

export type AnalyticsTable =
  | 'telemetry_events'
  | 'telemetry_hourly'
  | 'telemetry_daily'
  | 'ingested_batches'
  | 'device_states'
  | 'device_state_changes'
  | 'threat_detections';

interface TableSpec {
  readonly name: AnalyticsTable;
  readonly columns: SqlFragment;
  readonly engine: 'MergeTree' | 'SummingMergeTree' | 'ReplacingMergeTree';
  /** ReplacingMergeTree's version column. */
  readonly version?: string;
  /** PARTITION BY and ORDER BY. */
  readonly layout: SqlFragment;
  /**
   * How rows inserted into the cluster's Distributed table are spread: by organization, so that one
   * organization's rows (raw, rollups, device states) sit on one shard. Null for tables filled only by
   * materialized views on each shard (they follow the rows they are made from).
   */
  readonly shardedBy: SqlFragment | null;
}

interface ViewSpec {
  readonly name: string;
  readonly to: AnalyticsTable;
  readonly select: (source: SqlFragment) => SqlFragment;
}

const BY_ORGANIZATION = sql`cityHash64(org_id)`;

const TELEMETRY_EVENTS: TableSpec = {
  name: 'telemetry_events',
  columns: sql`(
        org_id String,
        device_id String,
        batch_key String,
        observed_at DateTime('UTC'),
        host String,
        verdict Enum8('allowed' = 1, 'blocked' = 2, 'warned' = 3),
        classification_ms Float32,
        received_at DateTime('UTC')
      )`,
  engine: 'MergeTree',
  layout: sql`PARTITION BY toYYYYMMDD(observed_at) ORDER BY (org_id, device_id, observed_at)`,
  shardedBy: BY_ORGANIZATION,
};

const rollupColumns = (bucket: SqlFragment) => sql`(
        org_id String,
        ${bucket},
        device_id String,
        total_analyzed UInt64,
        dangerous_blocks UInt64,
        risky_warnings UInt64,
        classification_ms_sum Float64
      )`;

const TELEMETRY_HOURLY: TableSpec = {
  name: 'telemetry_hourly',
  columns: rollupColumns(sql`hour DateTime('UTC')`),
  engine: 'SummingMergeTree',
  layout: sql`PARTITION BY toYYYYMMDD(hour) ORDER BY (org_id, hour, device_id)`,
  shardedBy: null,
};

const TELEMETRY_DAILY: TableSpec = {
  name: 'telemetry_daily',
  columns: rollupColumns(sql`day Date`),
  engine: 'SummingMergeTree',
  layout: sql`PARTITION BY toYYYYMM(day) ORDER BY (org_id, day, device_id)`,
  shardedBy: null,
};

const rollupOf = (bucket: SqlFragment, name: string) => (source: SqlFragment) =>
  sql`SELECT org_id, ${bucket} AS ${identifier(name)}, device_id,
          count() AS total_analyzed,
          countIf(verdict = 'blocked') AS dangerous_blocks,
          countIf(verdict = 'warned') AS risky_warnings,
          sum(classification_ms) AS classification_ms_sum
        FROM ${source} GROUP BY org_id, ${identifier(name)}, device_id`;

const HOURLY_VIEW: ViewSpec = {
  name: 'telemetry_hourly_mv',
  to: 'telemetry_hourly',
  select: rollupOf(sql`toStartOfHour(observed_at)`, 'hour'),
};

const DAILY_VIEW: ViewSpec = {
  name: 'telemetry_daily_mv',
  to: 'telemetry_daily',
  select: rollupOf(sql`toDate(observed_at)`, 'day'),
};

const INGESTED_BATCHES: TableSpec = {
  name: 'ingested_batches',
  columns: sql`(
        received_day Date,
        batch_key String,
        events UInt64
      )`,
  engine: 'MergeTree',
  layout: sql`PARTITION BY toYYYYMMDD(received_day) ORDER BY batch_key`,
  shardedBy: null,
};

const LEDGER_VIEW: ViewSpec = {
  name: 'ingested_batches_mv',
  to: 'ingested_batches',
  select: (source) => sql`SELECT toDate(received_at) AS received_day, batch_key, count() AS events
        FROM ${source} GROUP BY received_day, batch_key`,
};

const DEVICE_STATES: TableSpec = {
  name: 'device_states',
  columns: sql`(
        org_id String,
        device_id String,
        hostname String,
        state Enum8('active' = 1, 'disabled' = 2, 'deleted' = 3),
        version UInt64
      )`,
  engine: 'ReplacingMergeTree',
  version: 'version',
  layout: sql`ORDER BY (org_id, device_id)`,
  shardedBy: BY_ORGANIZATION,
};

const THREAT_DETECTIONS: TableSpec = {
  name: 'threat_detections',
  columns: sql`(
        org_id String,
        device_id String,
        detected_at DateTime('UTC'),
        dangerous_blocks UInt64
      )`,
  engine: 'MergeTree',
  layout: sql`PARTITION BY toYYYYMM(detected_at) ORDER BY (org_id, device_id, detected_at)`,
  shardedBy: BY_ORGANIZATION,
};

// Rows are changes, not versions of one row: the ordering key holds the version, so merges only fold
// repeats of one change (a redelivered event).
const DEVICE_STATE_CHANGES: TableSpec = {
  name: 'device_state_changes',
  columns: sql`(
        org_id String,
        device_id String,
        version UInt64,
        state Enum8('active' = 1, 'disabled' = 2, 'deleted' = 3),
        enrolled_at UInt64
      )`,
  engine: 'ReplacingMergeTree',
  layout: sql`ORDER BY (org_id, device_id, version, state)`,
  shardedBy: BY_ORGANIZATION,
};

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
 * On a cluster each is a `Replicated*MergeTree` table `<name>_local` on every server (its replicas in
 * ZooKeeper under the shard's path) with a `Distributed` table `<name>` over them: the code reads and
 * inserts the same names in both topologies. The materialized views run on each server, from its
 * `telemetry_events_local` into its rollups and ledger, so a batch's rows, rollups and ledger entry land
 * on the same shard, and replication copies them to the shard's other replicas.
 *
 * Times are `DateTime('UTC')`, so buckets are UTC whatever the server's time zone. Never edit a
 * migration that has run anywhere; add a new one.
 */
export function analyticsMigrations(target: AnalyticsSchemaTarget): ClickHouseMigration[] {
  const ddl = target.cluster === null ? singleServerDdl() : clusterDdl(target.cluster, target.database);
  return [
    {
      id: '001_telemetry',
      statements: [
        ...ddl.table(TELEMETRY_EVENTS),
        ...ddl.table(TELEMETRY_HOURLY),
        ddl.view(HOURLY_VIEW),
        ...ddl.table(TELEMETRY_DAILY),
        ddl.view(DAILY_VIEW),
        ...ddl.table(INGESTED_BATCHES),
        ddl.view(LEDGER_VIEW),
        ...ddl.table(DEVICE_STATES),
        ...ddl.table(THREAT_DETECTIONS),
      ],
    },
    {
      id: '002_device_state_changes',
      statements: [
        ...ddl.table(DEVICE_STATE_CHANGES),
        // Devices known before: their current state, from when it was set (earlier changes are not known).
        sql`INSERT INTO ${ddl.name('device_state_changes')} (org_id, device_id, version, state, enrolled_at)
        SELECT org_id, device_id, max(version), argMax(state, version), 0
        FROM ${ddl.name('device_states')} GROUP BY org_id, device_id`,
      ],
    },
  ];
}

/** Tables whose rows belong to a device: a deleted device's rows go from each. */
export const DEVICE_TELEMETRY_TABLES = ['telemetry_events', 'telemetry_hourly', 'telemetry_daily'] as const;

interface Ddl {
  /** The table as queries name it. */
  name(table: AnalyticsTable): SqlFragment;
  table(spec: TableSpec): SqlFragment[];
  view(spec: ViewSpec): SqlFragment;
}

function singleServerDdl(): Ddl {
  const engine = (spec: TableSpec) =>
    spec.engine === 'MergeTree'
      ? sql`MergeTree()`
      : spec.engine === 'SummingMergeTree'
        ? sql`SummingMergeTree()`
        : spec.version
          ? sql`ReplacingMergeTree(${identifier(spec.version)})`
          : sql`ReplacingMergeTree()`;
  return {
    name: (table) => identifier(table),
    table: (spec) => [
      sql`CREATE TABLE IF NOT EXISTS ${identifier(spec.name)} ${spec.columns} ENGINE = ${engine(spec)} ${spec.layout}`,
    ],
    view: (spec) =>
      sql`CREATE MATERIALIZED VIEW IF NOT EXISTS ${identifier(spec.name)} TO ${identifier(spec.to)} AS
        ${spec.select(identifier('telemetry_events'))}`,
  };
}

/** The local tables' suffix on a cluster. */
export const LOCAL_TABLE_SUFFIX = '_local';

/**
 * Names are qualified with the database: a distributed DDL query runs on every server, where the
 * session's current database is not the initiator's.
 */
function clusterDdl(cluster: string, database: string): Ddl {
  const onCluster = sql`ON CLUSTER ${identifier(cluster)}`;
  const local = (table: string) => identifier(database, `${table}${LOCAL_TABLE_SUFFIX}`);
  const engine = (spec: TableSpec) => {
    const zooKeeperPath = `/clickhouse/${cluster}/tables/{shard}/${database}/${spec.name}${LOCAL_TABLE_SUFFIX}`;
    const replicated = sql`${zooKeeperPath}, '{replica}'`;
    return spec.engine === 'MergeTree'
      ? sql`ReplicatedMergeTree(${replicated})`
      : spec.engine === 'SummingMergeTree'
        ? sql`ReplicatedSummingMergeTree(${replicated})`
        : spec.version
          ? sql`ReplicatedReplacingMergeTree(${replicated}, ${identifier(spec.version)})`
          : sql`ReplicatedReplacingMergeTree(${replicated})`;
  };
  return {
    name: (table) => identifier(database, table),
    table: (spec) => {
      const distributed = spec.shardedBy
        ? sql`Distributed(${identifier(cluster)}, ${identifier(database)}, ${identifier(spec.name + LOCAL_TABLE_SUFFIX)}, ${spec.shardedBy})`
        : sql`Distributed(${identifier(cluster)}, ${identifier(database)}, ${identifier(spec.name + LOCAL_TABLE_SUFFIX)})`;
      return [
        sql`CREATE TABLE IF NOT EXISTS ${local(spec.name)} ${onCluster} ${spec.columns}
          ENGINE = ${engine(spec)} ${spec.layout}`,
        sql`CREATE TABLE IF NOT EXISTS ${identifier(database, spec.name)} ${onCluster} AS ${local(spec.name)}
          ENGINE = ${distributed}`,
      ];
    },
    view: (spec) =>
      sql`CREATE MATERIALIZED VIEW IF NOT EXISTS ${identifier(database, spec.name)} ${onCluster}
        TO ${local(spec.to)} AS ${spec.select(local('telemetry_events'))}`,
  };
}
