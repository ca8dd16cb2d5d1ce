import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { AnalyticsService } from '@sts/analytics-domain/analytics-service';
import { createClickHouseClient, type ClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { ShardRouter } from '@sts/clickhouse/cluster-shards';
import { identifier, inList, sql } from '@sts/clickhouse/sql-escape';
import { loadConfig } from '@sts/config/load-config';
import { testOptionsVariable } from '@sts/config/test-options';
import {
  telemetryMessageId,
  telemetryStreamName,
  telemetrySubject,
  type TelemetryBatchMessage,
} from '@sts/events/telemetry';
import { dependencyHealthName } from '@sts/grpc/dependency-health';
import { grpcHealth } from '@sts/grpc/health-probe';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { openLimitsBucket } from '@sts/nats/kv-buckets';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { eventually } from '@sts/testing/eventually';
import {
  clickhouseNodeUrl,
  clusterNode,
  localCluster,
  natsClusterUrl,
  startWholeCluster,
} from '@sts/testing/local-cluster';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { testServiceAuth } from '@sts/testing/service-auth';
import { startTcpBalancer, type TcpBalancer } from '@sts/testing/tcp-balancer';
import { analyticsEnvSchema } from './analytics-config';
import { openAnalyticsClickHouse, type AnalyticsClickHouse } from './analytics-tables';
import { ClickHouseAnalyticsStore } from './clickhouse-analytics-store';
import { startAnalyticsService, TELEMETRY_CONSUMER, type RunningService } from './start-analytics-service';

const EVENTS_PER_BATCH = 5;
/** The load while a node fails: a batch per device every this often. */
const ROUND_INTERVAL_MS = 100;
const DEVICES_PER_ORG = 2;

interface Org {
  id: string;
  shard: number;
  devices: string[];
}

/**
 * Analytics on the local cluster (ClickHouse 2 shards x 2 replicas with ZooKeeper, NATS 3 nodes) while
 * its nodes fail, under load. After each fault the figures reconcile to the event: every batch sent is
 * stored once, on both replicas of its organization's shard, its rollups and ledger entry with it, and
 * each device's threat raised once.
 */
describe('analytics on a cluster whose nodes fail (ClickHouse 2x2, ZooKeeper, NATS x3)', () => {
  const logger = createLogger('analytics-faults', 'silent');
  const namespace = uniqueNatsNamespace('faults');
  const clickhouse = testClickHouseDatabase('faults');
  const cluster = clickhouse.cluster!;
  const natsUrl = natsClusterUrl();
  const nodes = localCluster().clickhouse.nodes;
  let balancer: TcpBalancer<string>;
  let nats: JetStreamConnection;
  let queries: AnalyticsService;
  let analytics: AnalyticsClickHouse;
  let queryClient: ClickHouseClient;
  const services: RunningService[] = [];
  const orgs: Org[] = [];
  /** Events sent (each batch once, whatever its copies) per organization. */
  const sentEvents = new Map<string, number>();
  /** Batches sent per organization. */
  const sentBatches = new Map<string, number>();
  let batchNumber = 0;

  const env = () => ({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    NATS_URL: natsUrl,
    NATS_NAMESPACE: namespace,
    NATS_STREAM_REPLICAS: '3',
    // Through a balancer over the four servers, as a Service in front of the cluster.
    CLICKHOUSE_URL: `http://127.0.0.1:${balancer.port}`,
    CLICKHOUSE_DATABASE: clickhouse.name,
    CLICKHOUSE_CLUSTER: cluster,
    ...testServiceAuth().envOf('analytics'),
    GRPC_PORT: '0',
    TELEMETRY_BATCH_WAIT_MS: '20',
    TELEMETRY_BATCH_MESSAGES: '20',
    // A killed process's batches come back after this.
    TELEMETRY_ACK_WAIT_MS: '3000',
    THREAT_COOLDOWN_MINUTES: '1440',
  });

  const startService = async (overrides: Record<string, string> = {}) => {
    const service = await startAnalyticsService(
      loadConfig(analyticsEnvSchema, { ...env(), ...overrides }),
      logger,
      {
        dependencyCheckIntervalMs: 200,
      },
    );
    services.push(service);
    return service;
  };

  const nodeClient = (node: string) =>
    createClickHouseClient({
      url: clickhouseNodeUrl(node),
      database: clickhouse.name,
      requestTimeoutMs: 5_000,
    });

  beforeAll(async () => {
    await startWholeCluster();
    // The cluster's Service.
    balancer = await startTcpBalancer(
      nodes.map((node) => `${node.host}:${node.httpPort}`),
      {
        healthCheck: async (backend) =>
          (await fetch(`http://${String(backend)}/ping`, { signal: AbortSignal.timeout(1_000) })
            .then((response) => response.ok)
            .catch(() => false)) === true,
        healthIntervalMs: 200,
      },
    );
    nats = await connectJetStream({ url: natsUrl, name: 'analytics-faults-test', logger });
    // Two processes share the work, as two replicas of the service do.
    await startService();
    await startService();
    analytics = await openAnalyticsClickHouse({
      url: `http://127.0.0.1:${balancer.port}`,
      target: { database: clickhouse.name, cluster },
    });
    queryClient = analytics.client;
    queries = new AnalyticsService(new ClickHouseAnalyticsStore(queryClient, analytics.tables), {
      now: () => new Date(),
    });
    // Two organizations on each shard, as ClickHouse's sharding key places them.
    const router = await ShardRouter.open(queryClient, cluster, clickhouseNodeUrl('ch-s1-r1'));
    while (
      orgs.filter((org) => org.shard === 1).length < 2 ||
      orgs.filter((org) => org.shard === 2).length < 2
    ) {
      const id = randomUUID();
      const shard = (await router.shardsOf([id])).get(id)!.number;
      if (orgs.filter((org) => org.shard === shard).length < 2) {
        orgs.push({ id, shard, devices: Array.from({ length: DEVICES_PER_ORG }, () => randomUUID()) });
      }
    }
  }, 300_000);

  afterEach(async () => {
    // A test that failed halfway may have left a node down.
    await startWholeCluster();
  }, 300_000);

  afterAll(async () => {
    for (const service of services.splice(0)) await service.stop();
    await analytics?.close();
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await balancer?.close();
    await clickhouse.drop();
  }, 300_000);

  /** One batch per device of each organization, published as the gateway does (retried like an agent). */
  const sendRound = async (of: readonly Org[] = orgs): Promise<void> => {
    const round = ++batchNumber;
    await Promise.all(
      of.flatMap((org) =>
        org.devices.map(async (deviceId) => {
          const batch: TelemetryBatchMessage = {
            org_id: org.id,
            device_id: deviceId,
            batch_id: `r${round}`,
            received_at: Date.now(),
            events: Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({
              observed_at: Date.now() - 60_000 - i,
              host: `site-${i}.example`,
              verdict: i === 0 ? ('blocked' as const) : ('allowed' as const),
              classification_ms: 5,
            })),
          };
          // Until the stream takes it: a node may be away (the agent retries the same batch id).
          await eventually(
            () =>
              nats.js
                .publish(telemetrySubject(namespace, org.id), JSON.stringify(batch), {
                  msgID: telemetryMessageId(deviceId, batch.batch_id),
                  timeout: 2_000,
                })
                .then(() => true)
                .catch(() => false),
            60_000,
          );
          sentEvents.set(org.id, (sentEvents.get(org.id) ?? 0) + EVENTS_PER_BATCH);
          sentBatches.set(org.id, (sentBatches.get(org.id) ?? 0) + 1);
        }),
      ),
    );
  };

  /** A round every ROUND_INTERVAL_MS (the load) until `during` is done. */
  const sendingWhile = async (during: () => Promise<void>): Promise<void> => {
    let done = false;
    const sending = (async () => {
      while (!done) {
        await Promise.all([sendRound(), delay(ROUND_INTERVAL_MS)]);
      }
    })();
    try {
      await during();
    } finally {
      done = true;
      await sending;
    }
  };

  const scalar = async (client: ClickHouseClient, query: string): Promise<number> => {
    const result = await client.query({ query, format: 'JSONEachRow' });
    return Number((await result.json<{ n: string | number }>())[0]?.n ?? 0);
  };
  const ofOrgs = (of: readonly Org[]) => inList(of.map((org) => org.id));
  const expectedEvents = (of: readonly Org[]) =>
    of.reduce((sum, org) => sum + (sentEvents.get(org.id) ?? 0), 0);

  const consumerIdle = async () => {
    const info = await nats.jsm.consumers.info(telemetryStreamName(namespace), TELEMETRY_CONSUMER);
    return info.num_pending === 0 && info.num_ack_pending === 0;
  };

  /** Every replica holds exactly its shard's organizations' events, rollups and ledger; threats once. */
  const reconciled = async () => {
    await eventually(consumerIdle, 120_000);
    for (const node of nodes) {
      const shardOrgs = orgs.filter((org) => org.shard === Number(node.shard));
      const client = nodeClient(node.name);
      try {
        const local = (table: string) => identifier(`${table}_local`);
        const raw = sql`SELECT count() AS n FROM ${local('telemetry_events')} WHERE org_id IN ${ofOrgs(shardOrgs)}`;
        const hourly = sql`SELECT sum(total_analyzed) AS n FROM ${local('telemetry_hourly')} WHERE org_id IN ${ofOrgs(shardOrgs)}`;
        const ledger = sql`SELECT sum(events) AS n FROM ${local('ingested_batches')}`;
        // A restarted replica catches up by fetching what the other stored meanwhile.
        await eventually(
          async () => (await scalar(client, raw.text)) === expectedEvents(shardOrgs),
          120_000,
        ).catch(async () => {
          throw new Error(
            `${node.name} holds ${await scalar(client, raw.text)} events of its shard's organizations, ${expectedEvents(shardOrgs)} were sent`,
          );
        });
        await eventually(
          async () => (await scalar(client, hourly.text)) === expectedEvents(shardOrgs),
          60_000,
        );
        await eventually(
          async () => (await scalar(client, ledger.text)) === expectedEvents(shardOrgs),
          60_000,
        );
      } finally {
        await client.close();
      }
    }
    // Through the Distributed tables, each organization exactly.
    for (const org of orgs) {
      const summary = await queries.summary(org.id, '24h', null);
      expect({ org: org.id, total: summary.total_analyzed }).toEqual({
        org: org.id,
        total: sentEvents.get(org.id),
      });
    }
    // Devices detected, not rows: the cooldown check reads a replica, which may lag after a kill, so the
    // bookkeeping row can come twice; the threat.detected event itself is deduplicated by the stream (its
    // message id is the device and cooldown period).
    const detections = await scalar(
      queryClient,
      sql`SELECT uniqExact(org_id, device_id) AS n FROM threat_detections WHERE org_id IN ${ofOrgs(orgs)}`
        .text,
    );
    // Each device's first round holds its first block; five rounds reach the threshold, once per cooldown.
    const devicesWithThreats = orgs.reduce(
      (sum, org) => sum + ((sentBatches.get(org.id) ?? 0) / DEVICES_PER_ORG >= 5 ? DEVICES_PER_ORG : 0),
      0,
    );
    expect(detections).toBe(devicesWithThreats);
  };

  it('goes on when a replica is killed mid-ingest, answers queries meanwhile, and the replica catches up', async () => {
    await sendRound();
    await sendingWhile(async () => {
      await clusterNode('kill', 'ch-s1-r2');
      // Queries answer from the other replicas while it is away.
      for (const org of orgs) {
        await eventually(
          () =>
            queries
              .summary(org.id, '24h', null)
              .then(() => true)
              .catch(() => false),
          30_000,
        );
      }
      for (let round = 0; round < 5; round++) await sendRound();
      await clusterNode('start', 'ch-s1-r2');
    });
    await reconciled();
  }, 300_000);

  it("keeps one shard's organizations waiting in JetStream while both its replicas are down, and lands the others'", async () => {
    const down = orgs.filter((org) => org.shard === 1);
    const up = orgs.filter((org) => org.shard === 2);
    await eventually(consumerIdle, 60_000);
    await Promise.all([clusterNode('kill', 'ch-s1-r1'), clusterNode('kill', 'ch-s1-r2')]);
    const before = new Map(up.map((org) => [org.id, sentEvents.get(org.id) ?? 0]));
    for (let round = 0; round < 5; round++) await sendRound();
    // The other shard's organizations land meanwhile.
    const shard2 = nodeClient('ch-s2-r1');
    try {
      await eventually(
        async () =>
          (await scalar(
            shard2,
            sql`SELECT count() AS n FROM ${identifier('telemetry_events_local')} WHERE org_id IN ${ofOrgs(up)}`
              .text,
          )) === expectedEvents(up),
        60_000,
      );
      expect(expectedEvents(up)).toBeGreaterThan([...before.values()].reduce((a, b) => a + b, 0));
    } finally {
      await shard2.close();
    }
    // The first shard's wait, unacknowledged, in the stream; health names the shard.
    const waiting = async () => {
      const info = await nats.jsm.consumers.info(telemetryStreamName(namespace), TELEMETRY_CONSUMER);
      return info.num_pending + info.num_ack_pending;
    };
    await eventually(async () => (await waiting()) === 5 * down.length * DEVICES_PER_ORG, 30_000).catch(
      async () => {
        throw new Error(
          `${await waiting()} batches wait in the stream, expected the first shard's ${5 * down.length * DEVICES_PER_ORG}`,
        );
      },
    );
    await eventually(
      async () =>
        (await grpcHealth(
          `127.0.0.1:${services[0]!.grpcPort}`,
          2_000,
          null,
          dependencyHealthName('clickhouse-shard-1'),
        )) === 'not-serving',
      30_000,
    );

    await Promise.all([clusterNode('start', 'ch-s1-r1'), clusterNode('start', 'ch-s1-r2')]);
    await reconciled();
  }, 300_000);

  it('acknowledges nothing it could not store while ZooKeeper is down, and loses nothing when it returns', async () => {
    await eventually(consumerIdle, 60_000);
    await clusterNode('kill', 'zookeeper');
    const replicas = nodes.map((node) => nodeClient(node.name));
    const storedOn = () =>
      Promise.all(
        replicas.map((client) =>
          scalar(client, sql`SELECT count() AS n FROM ${identifier('telemetry_events_local')}`.text),
        ),
      );
    try {
      const stored = await storedOn();
      for (let round = 0; round < 3; round++) await sendRound();
      // Replicated tables take no insert without ZooKeeper: every batch sent stays in the stream.
      await eventually(async () => {
        const info = await nats.jsm.consumers.info(telemetryStreamName(namespace), TELEMETRY_CONSUMER);
        return info.num_pending + info.num_ack_pending === orgs.length * DEVICES_PER_ORG * 3;
      }, 30_000);
      expect(await storedOn()).toEqual(stored);
    } finally {
      await Promise.all(replicas.map((client) => client.close()));
    }
    await clusterNode('start', 'zookeeper');
    await reconciled();
  }, 300_000);

  it('goes on when a NATS node is killed mid-ingest; the shared limits survive', async () => {
    const limits = await openLimitsBucket(nats.nc, namespace, { timeoutMs: 5_000, replicas: 3 });
    await limits.put('login.203.0.113.7', '4');
    // Asked again while the servers elect new leaders: a request may time out meanwhile.
    const settled = <T>(request: () => Promise<T>) =>
      eventually(() => request().catch(() => false as const), 30_000);
    await sendingWhile(async () => {
      await clusterNode('kill', 'nats-n1');
      for (let round = 0; round < 5; round++) await sendRound();
      expect((await settled(() => limits.get('login.203.0.113.7')))?.string()).toBe('4');
      await settled(() => limits.put('login.203.0.113.7', '5'));
      await clusterNode('start', 'nats-n1');
    });
    expect((await limits.get('login.203.0.113.7'))?.string()).toBe('5');
    await reconciled();
  }, 300_000);

  it('counts once a batch stored through one replica by a process that died before acknowledging it, redelivered to a process writing through the other', async () => {
    for (const service of services.splice(0)) await service.stop();
    const [org] = orgs.filter((candidate) => candidate.shard === 1);
    // The second replica fetches nothing from the first: it never sees what the dying process stored.
    const second = nodeClient('ch-s1-r2');
    const tables = ['telemetry_events', 'telemetry_hourly', 'telemetry_daily', 'ingested_batches'];
    for (const table of tables) {
      await second.command({ query: sql`SYSTEM STOP FETCHES ${identifier(`${table}_local`)}`.text });
    }
    try {
      for (let round = 0; round < 5; round++) await sendRound([org!]);
      // Dies the hard way right after its first insert, through the first replica.
      const child = spawn(process.execPath, ['--import', 'tsx', 'apps/analytics/src/main.ts'], {
        cwd: resolve(__dirname, '../../..'),
        env: {
          ...process.env,
          ...env(),
          CLICKHOUSE_URL: clickhouseNodeUrl('ch-s1-r1'),
          ...testOptionsVariable({ killAfterIngest: true }),
        },
        stdio: 'ignore',
      });
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });
      const first = nodeClient('ch-s1-r1');
      const storedByTheDead = await scalar(
        first,
        sql`SELECT count() AS n FROM ${identifier('telemetry_events_local')} WHERE org_id = ${org!.id}`.text,
      );
      const keysOfTheDead = (
        await (
          await first.query({
            query: sql`SELECT DISTINCT batch_key FROM ${identifier('ingested_batches_local')}`.text,
            format: 'JSONEachRow',
          })
        ).json<{ batch_key: string }>()
      ).map((row) => row.batch_key);
      await first.close();
      expect(storedByTheDead).toBeGreaterThan(0);
      expect(keysOfTheDead.length).toBeGreaterThan(0);

      // Ingestion's ledger reads through the lagging replica never answer "not stored" for them: that
      // replica is refused (whichever replica a read would pick, again and again).
      const throughSecond = await openAnalyticsClickHouse({
        url: clickhouseNodeUrl('ch-s1-r2'),
        target: { database: clickhouse.name, cluster },
      });
      try {
        const [group] = await throughSecond.byShard([org!.id], (id) => id);
        const ledger = new ClickHouseAnalyticsStore(throughSecond.client, group!.tables);
        await eventually(async () => {
          const lag = await scalar(
            second,
            sql`SELECT max(absolute_delay) AS n FROM system.replicas WHERE database = ${clickhouse.name}`
              .text,
          );
          return lag >= 2;
        }, 30_000);
        for (let read = 0; read < 20; read++) {
          const found = await ledger.storedBatchKeys(keysOfTheDead, new Date(Date.now() - 3_600_000));
          expect([...found].sort()).toEqual([...keysOfTheDead].sort());
        }
      } finally {
        await throughSecond.close();
      }

      // Its batches come back to a process writing through the second replica, which lags.
      await startService({ CLICKHOUSE_URL: clickhouseNodeUrl('ch-s1-r2') });
      await eventually(consumerIdle, 60_000);
    } finally {
      for (const table of tables) {
        await second.command({ query: sql`SYSTEM START FETCHES ${identifier(`${table}_local`)}`.text });
      }
      await second.close();
    }
    await startService();
    await reconciled();
  }, 300_000);
});
