import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { jetstream, jetstreamManager, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { eventually } from '@sts/testing/eventually';

/** The node table of scripts/infra/cluster-nodes.sh (`bash cluster-nodes.sh json`). */
interface ClusterNodes {
  host: string;
  clickhouse: { cluster: string; nodes: { name: string; host: string; shard: string; httpPort: number }[] };
  nats: { cluster: string; nodes: { name: string; serverName: string; clientPort: number }[] };
}

const nodes = JSON.parse(
  execFileSync('bash', [join(__dirname, 'cluster-nodes.sh'), 'json'], { encoding: 'utf8' }),
) as ClusterNodes;
const { cluster } = nodes.clickhouse;

/**
 * scripts/infra/ensure-cluster.sh brings up, on 127.0.0.1, ZooKeeper, the ClickHouse cluster sts_cluster
 * (2 shards x 2 replicas, ClickHouse 18.16) and a 3-node NATS JetStream cluster: replicated and Distributed
 * tables made ON CLUSTER shard and replicate rows, and JetStream keeps R3 streams.
 */
describe('scripts/infra/ensure-cluster.sh', () => {
  beforeAll(() => {
    // Cold, it installs ZooKeeper and starts eight servers.
    execFileSync('bash', [join(__dirname, 'ensure-cluster.sh')], {
      stdio: ['ignore', 'pipe', 'pipe'],
      encoding: 'utf8',
      timeout: 540_000,
    });
  }, 600_000);

  describe('ClickHouse cluster', () => {
    const database = `sts_cluster_test_${randomBytes(5).toString('hex')}`;
    const clients = new Map<string, ClickHouseClient>();
    const first = nodes.clickhouse.nodes[0]!;
    const client = (name: string): ClickHouseClient => clients.get(name)!;

    beforeAll(() => {
      for (const node of nodes.clickhouse.nodes) {
        clients.set(
          node.name,
          createClient({ url: `http://${node.host}:${node.httpPort}`, request_timeout: 60_000 }),
        );
      }
    });

    afterAll(async () => {
      // DROP ... ON CLUSTER waits until every node has run it (18.16 has no SYNC).
      const admin = client(first.name);
      for (const statement of [
        `DROP TABLE IF EXISTS ${database}.events_all ON CLUSTER ${cluster}`,
        `DROP TABLE IF EXISTS ${database}.events ON CLUSTER ${cluster}`,
        `DROP DATABASE IF EXISTS ${database} ON CLUSTER ${cluster}`,
      ]) {
        await admin.command({ query: statement });
      }
      await Promise.all([...clients.values()].map((c) => c.close()));
    });

    async function rows<T>(name: string, query: string): Promise<T[]> {
      const result = await client(name).query({ query, format: 'JSONEachRow' });
      return result.json<T>();
    }

    async function keys(name: string, table: string): Promise<number[]> {
      const result = await rows<{ k: number }>(
        name,
        `SELECT toUInt32(k) AS k FROM ${database}.${table} ORDER BY k`,
      );
      return result.map((row) => row.k);
    }

    it('shards rows inserted into a Distributed table and replicates each shard', async () => {
      const admin = client(first.name);
      await admin.command({ query: `CREATE DATABASE ${database} ON CLUSTER ${cluster}` });
      // Dropping the last replica removes the table's znode but not its parents: one level, so that
      // nothing is left behind in ZooKeeper.
      await admin.command({
        query: `CREATE TABLE ${database}.events ON CLUSTER ${cluster} (k UInt64, v String)
          ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/${database}_events', '{replica}') ORDER BY k`,
      });
      await admin.command({
        query: `CREATE TABLE ${database}.events_all ON CLUSTER ${cluster} AS ${database}.events
          ENGINE = Distributed(${cluster}, ${database}, events, cityHash64(k))`,
      });

      const inserted = Array.from({ length: 100 }, (_, i) => i + 1);
      await admin.insert({
        table: `${database}.events_all`,
        values: inserted.map((k) => ({ k, v: `row ${k}` })),
        format: 'JSONEachRow',
        // Written to one replica of each shard before the insert returns.
        clickhouse_settings: { insert_distributed_sync: 1 },
      });

      // Each replica holds exactly its shard's rows (cityHash64(k) % 2 picks the shard, both weigh 1),
      // and the two replicas of a shard hold the same rows. The insert wrote to one replica per shard;
      // the other fetches the part from it.
      const shards = [...new Set(nodes.clickhouse.nodes.map((node) => node.shard))].sort();
      expect(shards).toHaveLength(2);
      const byShard = new Map<string, number[]>();
      for (const node of nodes.clickhouse.nodes) {
        await client(node.name).command({ query: `SYSTEM SYNC REPLICA ${database}.events` });
        const [expected] = await rows<{ keys: number[] }>(
          node.name,
          `SELECT groupArray(toUInt32(number + 1)) AS keys FROM numbers(100) WHERE cityHash64(number + 1) % 2 = ${shards.indexOf(node.shard)}`,
        );
        const held = await eventually(async () => {
          const found = await keys(node.name, 'events');
          return found.length === expected!.keys.length && found;
        }, 30_000);
        expect(held).toEqual(expected!.keys);
        expect(held.length).toBeGreaterThan(0);
        byShard.set(node.shard, held);
      }
      expect([...byShard.values()].flat().sort((a, b) => a - b)).toEqual(inserted);

      // Every node reads all rows through the Distributed table, whichever replica of a shard it asks.
      for (const node of nodes.clickhouse.nodes) {
        expect(await keys(node.name, 'events_all')).toEqual(inserted);
      }
    });
  });

  describe('NATS cluster', () => {
    const stream = `STS_CLUSTER_TEST_${randomBytes(5).toString('hex')}`;
    let nc: NatsConnection;
    let jsm: JetStreamManager;

    beforeAll(async () => {
      nc = await connect({
        servers: nodes.nats.nodes.map((node) => `nats://${nodes.host}:${node.clientPort}`),
        timeout: 5_000,
      });
      jsm = await jetstreamManager(nc, { timeout: 10_000 });
    });

    afterAll(async () => {
      await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close();
    });

    it('keeps an R3 stream on all three nodes', async () => {
      const created = await jsm.streams.add({
        name: stream,
        subjects: [`${stream.toLowerCase()}.>`],
        num_replicas: 3,
        storage: StorageType.File,
      });
      expect(created.config.num_replicas).toBe(3);

      await jetstream(nc).publish(`${stream.toLowerCase()}.one`, 'hello');
      // A leader and two replicas, on the three servers of the cluster, all caught up.
      const info = await eventually(async () => {
        const current = await jsm.streams.info(stream);
        const replicas = current.cluster?.replicas ?? [];
        return replicas.length === 2 && replicas.every((replica) => replica.current) && current;
      }, 30_000);
      expect(info.cluster?.name).toBe(nodes.nats.cluster);
      expect(info.state.messages).toBe(1);
      const servers = [info.cluster!.leader!, ...info.cluster!.replicas!.map((replica) => replica.name)];
      expect(servers.sort()).toEqual(nodes.nats.nodes.map((node) => node.serverName).sort());
    });
  });
});
