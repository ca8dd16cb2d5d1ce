import type { ClickHouseClient } from './clickhouse-client';
import { arrayLiteral, sql } from './sql-escape';

/** One shard of a cluster of the servers' `remote_servers`. */
export interface ClusterShard {
  /** `shard_num` of system.clusters (1-based). */
  readonly number: number;
  readonly weight: number;
  /** The shard's replicas as `remote()` takes them: `host:port|host:port`. */
  readonly replicas: string;
}

/** The shards of a cluster as the server the client talks to defines it, in shard order. */
export async function readClusterShards(client: ClickHouseClient, cluster: string): Promise<ClusterShard[]> {
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
  const shards = new Map<number, { weight: number; replicas: string[] }>();
  for (const row of rows) {
    const number = Number(row.shard_num);
    let shard = shards.get(number);
    if (!shard) shards.set(number, (shard = { weight: Number(row.shard_weight), replicas: [] }));
    const host = row.host_name.includes(':') ? `[${row.host_name}]` : row.host_name;
    shard.replicas.push(`${host}:${Number(row.port)}`);
  }
  return [...shards].map(([number, { weight, replicas }]) => ({
    number,
    weight,
    replicas: replicas.join('|'),
  }));
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
  ) {}

  static async open(client: ClickHouseClient, cluster: string): Promise<ShardRouter> {
    const router = new ShardRouter(client, cluster);
    await router.refresh();
    return router;
  }

  /** Reads the cluster's shards again (a shard was added). */
  async refresh(): Promise<void> {
    const shards = await readClusterShards(this.client, this.cluster);
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
