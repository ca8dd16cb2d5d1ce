import type { ClickHouseSettings } from '@clickhouse/client';
import {
  createClickHouseClient,
  type ClickHouseClient,
  type ClickHouseClientOptions,
} from '@sts/clickhouse/clickhouse-client';
import { ShardRouter, type ClusterShard } from '@sts/clickhouse/cluster-shards';
import { identifier, sql, type SqlFragment } from '@sts/clickhouse/sql-escape';
import type { Logger } from '@sts/logger/create-logger';
import { LOCAL_TABLE_SUFFIX, type AnalyticsSchemaTarget, type AnalyticsTable } from './analytics-migrations';

/**
 * The tables of analytics-migrations.ts as the store uses them in one topology. Inserts always go to
 * the table's own name (on a cluster, its Distributed table, which routes rows by organization).
 */
export interface AnalyticsTables {
  /** A table to read from. */
  from(table: AnalyticsTable): SqlFragment;
  /**
   * Inserts rows with `write`, given the client and table name to write them to: the table on one server;
   * on a cluster each shard's rows into its local table on one of its replicas (tried in turn), so that a
   * shard that is away fails its own organizations' rows only (18.16's synchronous Distributed insert
   * connects to every shard). A replica that stored a block whose answer was lost, then the same block
   * retried on the other, keeps it once: replicated tables drop a block they already have.
   */
  insert<Row extends { org_id: string }>(
    table: AnalyticsTable,
    rows: readonly Row[],
    write: (client: ClickHouseClient, table: string, rows: readonly Row[]) => Promise<void>,
  ): Promise<void>;
  /**
   * `ALTER TABLE <table> <change>` (a delete, a dropped partition) applied to every copy of its rows: on
   * the server, or on one replica of each shard; a replicated table's mutation or dropped partition
   * reaches the shard's other replicas through ZooKeeper.
   */
  alter(table: AnalyticsTable, change: SqlFragment): Promise<void>;
  /** Settings of reads that decide what is written (ingestion's). */
  readonly decidingReads: ClickHouseSettings;
  /** Where the tables' active parts are listed (retention), and a table's name there. */
  readonly parts: { readonly from: SqlFragment; readonly nameOf: (table: AnalyticsTable) => string };
}

/** One server: the tables themselves. */
export function singleServerTables(client: ClickHouseClient): AnalyticsTables {
  return {
    from: (table) => identifier(table),
    insert: async (table, rows, write) => {
      if (rows.length > 0) await write(client, table, rows);
    },
    alter: async (table, change) => {
      await client.command({ query: sql`ALTER TABLE ${identifier(table)} ${change}`.text });
    },
    decidingReads: {},
    parts: { from: identifier('system', 'parts'), nameOf: (table) => table },
  };
}

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
 * A read that decides what ingestion writes (is this batch stored? which state was this device in? how
 * many blocks has it?) must see every write acknowledged before it. Writes go to a shard's first replica
 * that answers, in the order of `remote_servers` (`insert` below), and these reads ask the replicas in
 * the same order, none taken for local: while the first replica is up, every process writes and reads
 * there. When it goes, reads move to the next, which must not lag: one behind by a second or more (an
 * insert it has not fetched) is refused, and with all of a shard's replicas refused the read fails and
 * the batch comes back later. Telemetry comes back no sooner than that: a failed batch after 2 s at
 * least, a crashed process's after TELEMETRY_ACK_WAIT_MS (3 s at least on a cluster).
 */
const DECIDING_READS: ClickHouseSettings = {
  load_balancing: 'in_order',
  prefer_localhost_replica: 0,
  max_replica_delay_for_distributed_queries: '1',
  fallback_to_stale_replicas_for_distributed_queries: 0,
};

/** Analytics' ClickHouse in one topology: the client, the tables over all data, and ingestion's shards. */
export interface AnalyticsClickHouse {
  readonly target: AnalyticsSchemaTarget;
  /** Settings every client of this topology sends (migrations included). */
  readonly clientSettings: ClickHouseSettings;
  readonly client: ClickHouseClient;
  /** The tables over all the data: the summaries and series, device lifecycle, purges, retention. */
  readonly tables: AnalyticsTables;
  /** On a cluster, each shard (for health checks); none on one server. */
  shards(): readonly ClusterShard[];
  /**
   * Items grouped by the shard of their organization, each group with tables that reach that shard's
   * replicas only, so that ingestion for one shard goes on while another is away. One group on a server.
   */
  byShard<T>(
    items: readonly T[],
    orgOf: (item: T) => string,
  ): Promise<{ tables: AnalyticsTables; items: T[] }[]>;
  /** Reads the cluster's layout again (a shard was added). */
  refreshLayout(): Promise<void>;
  close(): Promise<void>;
}

export interface AnalyticsClickHouseOptions {
  /** CLICKHOUSE_URL. */
  url: string;
  target: AnalyticsSchemaTarget;
  logger?: Logger;
  requestTimeoutMs?: number;
}

/** The settings of every request in a topology (before a client exists: migrations). */
export function clientSettingsOf(target: AnalyticsSchemaTarget): ClickHouseSettings {
  return target.cluster === null ? {} : CLUSTER_CLIENT_SETTINGS;
}

export async function openAnalyticsClickHouse(
  options: AnalyticsClickHouseOptions,
): Promise<AnalyticsClickHouse> {
  const { target } = options;
  const clientSettings = clientSettingsOf(target);
  const connection = (url: string): ClickHouseClientOptions => ({
    url,
    database: target.database,
    logger: options.logger,
    requestTimeoutMs: options.requestTimeoutMs,
    settings: clientSettings,
  });
  const client = createClickHouseClient(connection(options.url));
  const { cluster } = target;
  if (cluster === null) {
    const tables = singleServerTables(client);
    return {
      target,
      clientSettings,
      client,
      tables,
      shards: () => [],
      byShard: async (items) => (items.length === 0 ? [] : [{ tables, items: [...items] }]),
      refreshLayout: async () => {},
      close: () => client.close(),
    };
  }

  let router: ShardRouter;
  try {
    router = await ShardRouter.open(client, cluster, options.url);
  } catch (error) {
    await client.close();
    throw error;
  }
  // Clients of single replicas, for what must go to a replica of a given shard.
  const replicaClients = new Map<string, ClickHouseClient>();
  const onReplicaOf = async (shard: ClusterShard, run: (replica: ClickHouseClient) => Promise<void>) => {
    let lastError: unknown = new Error(
      `no replica of ClickHouse shard ${shard.number} answered when the cluster's layout was read`,
    );
    for (const url of shard.replicaUrls) {
      let replica = replicaClients.get(url);
      if (!replica) replicaClients.set(url, (replica = createClickHouseClient(connection(url))));
      try {
        await run(replica);
        return;
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  };
  const insert: AnalyticsTables['insert'] = async (table, rows, write) => {
    if (rows.length === 0) return;
    const shardOf = await router.shardsOf(rows.map((row) => row.org_id));
    const byShard = new Map<ClusterShard, (typeof rows)[number][]>();
    for (const row of rows) {
      const shard = shardOf.get(row.org_id)!;
      const own = byShard.get(shard);
      if (own) own.push(row);
      else byShard.set(shard, [row]);
    }
    const localTable = `${target.database}.${table}${LOCAL_TABLE_SUFFIX}`;
    await Promise.all(
      [...byShard].map(([shard, own]) =>
        onReplicaOf(shard, (replica) => write(replica, localTable, byShard.size === 1 ? rows : own)),
      ),
    );
  };
  const local = (table: AnalyticsTable) => identifier(target.database, table + LOCAL_TABLE_SUFFIX);
  // Not `ALTER ... ON CLUSTER`: on ClickHouse 18.16 two replicas of a shard can both take such a task, and
  // the second one's "Node exists" stops that server's distributed DDL for good (until it restarts).
  const alterOn =
    (shards: () => readonly ClusterShard[]) =>
    async (table: AnalyticsTable, change: SqlFragment): Promise<void> => {
      for (const shard of shards()) {
        await onReplicaOf(shard, async (replica) => {
          await replica.command({ query: sql`ALTER TABLE ${local(table)} ${change}`.text });
        });
      }
    };
  const parts = {
    // One replica of each shard that answers; a shard that is away keeps its old partitions a while longer.
    get from() {
      return sql`remote(${router.shards.map((shard) => shard.replicas).join(',')}, ${identifier('system')}, ${identifier('parts')})`;
    },
    nameOf: (table: AnalyticsTable) => table + LOCAL_TABLE_SUFFIX,
  };
  const tables: AnalyticsTables = {
    from: (table) => identifier(table),
    insert,
    alter: alterOn(() => router.shards),
    decidingReads: DECIDING_READS,
    parts,
  };
  const shardTables = new Map<string, AnalyticsTables>();
  const tablesOf = (shard: ClusterShard): AnalyticsTables => {
    let found = shardTables.get(shard.replicas);
    if (!found) {
      found = {
        // That shard's replicas only, through `remote()` over the local tables.
        from: (table) =>
          sql`remote(${shard.replicas}, ${identifier(target.database)}, ${identifier(table + LOCAL_TABLE_SUFFIX)})`,
        insert,
        alter: alterOn(() => [shard]),
        decidingReads: DECIDING_READS,
        parts,
      };
      shardTables.set(shard.replicas, found);
    }
    return found;
  };
  return {
    target,
    clientSettings,
    client,
    tables,
    shards: () => router.shards,
    byShard: async (items, orgOf) => {
      const shardOf = await router.shardsOf(items.map(orgOf));
      const groups = new Map<ClusterShard, { tables: AnalyticsTables; items: (typeof items)[number][] }>();
      for (const item of items) {
        const shard = shardOf.get(orgOf(item))!;
        let group = groups.get(shard);
        if (!group) groups.set(shard, (group = { tables: tablesOf(shard), items: [] }));
        group.items.push(item);
      }
      return [...groups.values()];
    },
    refreshLayout: () => router.refresh(),
    close: async () => {
      await Promise.all([client.close(), ...[...replicaClients.values()].map((replica) => replica.close())]);
    },
  };
}

/** Whether any replica of a shard answers. */
export async function shardAnswers(client: ClickHouseClient, shard: ClusterShard): Promise<boolean> {
  const result = await client.query({
    query:
      sql`SELECT count() AS n FROM remote(${shard.replicas}, ${identifier('system')}, ${identifier('one')})`
        .text,
    format: 'JSONEachRow',
  });
  return Number((await result.json<{ n: string | number }>())[0]?.n) === 1;
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
