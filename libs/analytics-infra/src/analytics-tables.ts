import type { ClickHouseSettings } from '@clickhouse/client';
import { createClickHouseClient, type ClickHouseClientOptions } from '@sts/clickhouse/clickhouse-client';
import type { ClusterShard } from '@sts/clickhouse/cluster-shards';
import { identifier, sql, type SqlFragment } from '@sts/clickhouse/sql-escape';
import { LOCAL_TABLE_SUFFIX, type AnalyticsSchemaTarget, type AnalyticsTable } from './analytics-migrations';

/**
 * How the analytics store names the tables of analytics-migrations.ts in one topology. Inserts always
 * go to the table's own name (on a cluster, its Distributed table, which routes rows by organization).
 */
export interface AnalyticsTables {
  /** A table to read from. */
  from(table: AnalyticsTable): SqlFragment;
  /** The target of `ALTER TABLE` (deletes, dropped partitions): every copy of the table's rows. */
  alter(table: AnalyticsTable): SqlFragment;
  /** Settings of reads that decide what is written (ingestion's). */
  readonly decidingReads: ClickHouseSettings;
}

/** One server: the tables themselves. */
export const SINGLE_SERVER_TABLES: AnalyticsTables = {
  from: (table) => identifier(table),
  alter: (table) => identifier(table),
  decidingReads: {},
};

/**
 * Settings of every request on a cluster: inserts into a Distributed table are written to the shard
 * before they are acknowledged (not queued on the server that took them), and a subquery over a
 * Distributed table reads each shard's local table: every table is sharded by organization, so an
 * organization's device states sit beside its telemetry.
 */
export const CLUSTER_CLIENT_SETTINGS: ClickHouseSettings = {
  insert_distributed_sync: 1,
  distributed_product_mode: 'local',
};

/**
 * A read that decides what ingestion writes (is this batch stored? which state was this device in?)
 * must not come from a replica that lags: after a consumer died between insert and acknowledgement, a
 * replica that has not fetched the insert yet would answer "not stored", and the batch would be stored
 * twice. Replicas behind by a second or more are refused, and with all of a shard's replicas behind the
 * read fails (the batch comes back later). Telemetry is retried no sooner than that (TELEMETRY_RETRY).
 */
const FRESH_REPLICAS_ONLY: ClickHouseSettings = {
  max_replica_delay_for_distributed_queries: '1',
  fallback_to_stale_replicas_for_distributed_queries: 0,
};

/** A cluster, all shards: reads through the Distributed tables. */
export function clusterTables(target: AnalyticsSchemaTarget & { cluster: string }): AnalyticsTables {
  return {
    from: (table) => identifier(table),
    alter: (table) => clusterAlter(target, table),
    decidingReads: FRESH_REPLICAS_ONLY,
  };
}

/**
 * One shard of a cluster: reads go to its replicas only (`remote()` over the local tables), so that
 * ingestion for the organizations of one shard needs that shard alone, whatever the state of the others.
 */
export function shardTables(
  target: AnalyticsSchemaTarget & { cluster: string },
  shard: ClusterShard,
): AnalyticsTables {
  return {
    from: (table) =>
      sql`remote(${shard.replicas}, ${identifier(target.database)}, ${identifier(table + LOCAL_TABLE_SUFFIX)})`,
    alter: (table) => clusterAlter(target, table),
    decidingReads: FRESH_REPLICAS_ONLY,
  };
}

/** On every server of the cluster (a replicated table's change then reaches each of its replicas). */
function clusterAlter(
  target: AnalyticsSchemaTarget & { cluster: string },
  table: AnalyticsTable,
): SqlFragment {
  return sql`${identifier(target.database, table + LOCAL_TABLE_SUFFIX)} ON CLUSTER ${identifier(target.cluster)}`;
}

/**
 * Refuses to start on a database made for the other topology: the tables are chosen when the database
 * is created, and a cluster's Distributed tables are not single-server tables (nor the other way round).
 */
export async function assertTopology(
  connection: Omit<ClickHouseClientOptions, 'database'>,
  target: AnalyticsSchemaTarget,
): Promise<void> {
  const client = createClickHouseClient({ ...connection, database: 'default' });
  let engine: string | undefined;
  try {
    const result = await client.query({
      query: sql`SELECT engine FROM system.tables
                 WHERE database = ${target.database} AND name = 'telemetry_events'`.text,
      format: 'JSONEachRow',
    });
    engine = (await result.json<{ engine: string }>())[0]?.engine;
  } finally {
    await client.close();
  }
  if (engine === undefined) return;
  const made = engine === 'Distributed' ? 'a cluster' : 'a single server';
  const wanted = target.cluster === null ? 'a single server' : `cluster ${target.cluster}`;
  if ((engine === 'Distributed') !== (target.cluster !== null)) {
    throw new Error(
      `ClickHouse database ${target.database} was made for ${made} (telemetry_events is ${engine}), ` +
        `not for ${wanted}: set CLICKHOUSE_CLUSTER as when it was created, or use a new CLICKHOUSE_DATABASE ` +
        '(deploy/README.md, "Moving analytics to a cluster")',
    );
  }
}

/** The settings of every request and the tables of whole-data reads, for a topology. */
export function topologyOf(target: AnalyticsSchemaTarget): {
  clientSettings: ClickHouseSettings;
  tables: AnalyticsTables;
} {
  const { cluster } = target;
  return cluster === null
    ? { clientSettings: {}, tables: SINGLE_SERVER_TABLES }
    : { clientSettings: CLUSTER_CLIENT_SETTINGS, tables: clusterTables({ ...target, cluster }) };
}
