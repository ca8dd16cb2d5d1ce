import type { ClickHouseClient } from './clickhouse-client';
import { arrayLiteral, sql } from './sql-escape';

/** One shard of a cluster of the servers' `remote_servers`. */
export interface ClusterShard {
  /** `shard_num` of system.clusters (1-based). */
  readonly number: number;
  readonly weight: number;
  /** The shard's replicas as `remote()` takes them: `host:port|host:port` (their native-protocol ports). */
  readonly replicas: string;
  /**
   * Each replica's HTTP interface: its host in `remote_servers`, with the user of `base`, on the port of
   * `base` unless the replica names its own in the macro `http_port`. Only those that answered when the
   * layout was read (a replica whose port is not known is never guessed: a statement meant for one shard
   * must not run on another).
   */
  readonly replicaUrls: readonly string[];
}

/**
 * The shards of a cluster as the server the client talks to defines it, in shard order. `base` is the URL
 * the client was given (CLICKHOUSE_URL): every replica is taken to serve HTTP on its port, with its
 * credentials, as the servers of one installation do (one Service per replica, the same ports), unless
 * the replica says otherwise in its macro `http_port` (servers sharing one address).
 */
export async function readClusterShards(
  client: ClickHouseClient,
  cluster: string,
  base: string,
): Promise<ClusterShard[]> {
  const result = await client.query({
    query: sql`SELECT shard_num, shard_weight, host_name, port FROM system.clusters
               WHERE cluster = ${cluster} ORDER BY shard_num, replica_num`.text,
    format: 'JSONEachRow',
  });
  const rows = await result.json<{
    shard_num: number | string;
    shard_weight: number | string;
    host_name: string;
    port: number | string;
  }>();
  if (rows.length === 0) {
    throw new Error(
      `ClickHouse cluster ${cluster} is not defined on the server (system.clusters has no row for it): ` +
        'check CLICKHOUSE_CLUSTER against remote_servers',
    );
  }
  const shards = new Map<number, { weight: number; replicas: string[]; replicaUrls: string[] }>();
  const httpPorts = await Promise.all(
    rows.map((row) => replicaHttpPort(client, `${hostOf(row.host_name)}:${Number(row.port)}`)),
  );
  rows.forEach((row, index) => {
    const number = Number(row.shard_num);
    let shard = shards.get(number);
    if (!shard) {
      shard = { weight: Number(row.shard_weight), replicas: [], replicaUrls: [] };
      shards.set(number, shard);
    }
    const host = hostOf(row.host_name);
    shard.replicas.push(`${host}:${Number(row.port)}`);
    const url = new URL(base);
    url.hostname = host;
    url.pathname = '/';
    const httpPort = httpPorts[index];
    if (httpPort === null) return;
    if (httpPort !== undefined) url.port = httpPort;
    shard.replicaUrls.push(url.toString());
  });
  return [...shards].map(([number, { weight, replicas, replicaUrls }]) => ({
    number,
    weight,
    replicas: replicas.join('|'),
    replicaUrls,
  }));
}

const hostOf = (name: string) => (name.includes(':') ? `[${name}]` : name);

/** The replica's macro `http_port`; undefined when it has none, null when it does not answer. */
async function replicaHttpPort(
  client: ClickHouseClient,
  address: string,
): Promise<string | undefined | null> {
  try {
    const result = await client.query({
      query: sql`SELECT substitution FROM remote(${address}, system, macros) WHERE macro = 'http_port'`.text,
      format: 'JSONEachRow',
      clickhouse_settings: { connect_timeout_with_failover_ms: 1000 },
    });
    const port = (await result.json<{ substitution: string }>())[0]?.substitution;
    if (port === undefined) return undefined;
    return /^\d{1,5}$/.test(port) ? port : null;
  } catch {
    return null;
  }
}

/**
 * Which shard a `Distributed` table sharded by `cityHash64(key)` sends a key's rows to: the hash modulo
 * the shards' total weight picks a slot, each shard holding as many consecutive slots as its weight
 * (ClickHouse's own rule, from 18.16 to current versions). The hash is the server's, asked once per key.
 */
export class ShardRouter {
  private readonly hashes = new Map<string, bigint>();
  private slots: ClusterShard[] = [];

  private constructor(
    private readonly client: ClickHouseClient,
    private readonly cluster: string,
    private readonly base: string,
  ) {}

  /** `base`: the URL of the client (CLICKHOUSE_URL), from which the replicas' URLs are made. */
  static async open(client: ClickHouseClient, cluster: string, base: string): Promise<ShardRouter> {
    const router = new ShardRouter(client, cluster, base);
    await router.refresh();
    return router;
  }

  /** Reads the cluster's shards again (a shard was added). */
  async refresh(): Promise<void> {
    const shards = await readClusterShards(this.client, this.cluster, this.base);
    const slots = shards.flatMap((shard) => Array.from({ length: shard.weight }, () => shard));
    if (slots.length === 0) throw new Error(`ClickHouse cluster ${this.cluster} has no shard with a weight`);
    this.slots = slots;
  }

  /** Every shard, in order. */
  get shards(): ClusterShard[] {
    return [...new Set(this.slots)];
  }

  async shardsOf(keys: readonly string[]): Promise<Map<string, ClusterShard>> {
    const unknown = [...new Set(keys)].filter((key) => !this.hashes.has(key));
    if (unknown.length > 0) {
      const result = await this.client.query({
        query:
          sql`SELECT key, toString(cityHash64(key)) AS hash FROM (SELECT arrayJoin(${arrayLiteral(unknown)}) AS key)`
            .text,
        format: 'JSONEachRow',
      });
      for (const row of await result.json<{ key: string; hash: string }>()) {
        this.hashes.set(row.key, BigInt(row.hash));
      }
    }
    const slots = this.slots;
    return new Map(
      keys.map((key) => {
        const hash = this.hashes.get(key);
        if (hash === undefined) throw new Error('ClickHouse did not hash a sharding key');
        return [key, slots[Number(hash % BigInt(slots.length))]!] as const;
      }),
    );
  }
}
