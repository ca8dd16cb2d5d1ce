import { Migration } from '@mikro-orm/migrations';
import { dependencyHealthName, LIVENESS_HEALTH_NAME } from '@sts/grpc/dependency-health';
import { grpcHealth } from '@sts/grpc/health-probe';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { testServiceAuth } from '@sts/testing/service-auth';
import { startTcpProxy, type TcpProxy } from '@sts/testing/tcp-proxy';
import { runServiceHost, type RunningService } from './service-host';

class Nothing extends Migration {
  override up(): void {
    this.addSql('create table "readiness_test"."nothing" (id int);');
  }
}

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** A service's gRPC health follows its dependencies (readiness) while `liveness` stays SERVING. */
describe('service readiness (PostgreSQL through a proxy, NATS)', () => {
  const logger = createLogger('readiness-test', 'silent');
  const namespace = uniqueNatsNamespace('ready');
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: RunningService;
  let address: string;
  // An informational check (as analytics' device-purges): reported, never deciding readiness.
  let backlogOnTime = true;

  beforeAll(async () => {
    database = await createTestDatabase('readiness');
    const url = new URL(database.url);
    proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.host = `127.0.0.1:${proxy.port}`;
    service = await runServiceHost(
      {
        name: 'billing',
        database: {
          schema: 'readiness_test',
          entities: [],
          migrations: [{ name: '0001_nothing', class: Nothing }],
          publishesEvents: false,
        },
        config: {
          DATABASE_URL: url.toString(),
          NATS_URL,
          NATS_NAMESPACE: namespace,
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: 0,
          SERVICE_TRUSTED_KEYS: testServiceAuth().trustedKeys,
        },
        logger,
        dependencyCheckIntervalMs: 100,
      },
      async (host) => {
        host.checkDependency('backlog', async () => backlogOnTime, { decidesReadiness: false });
        return [];
      },
    );
    address = `127.0.0.1:${service.grpcPort}`;
  });

  afterAll(async () => {
    proxy?.restore();
    await service?.stop();
    await proxy?.close();
    const nats = await connectJetStream({ url: NATS_URL, name: 'readiness-cleanup', logger });
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
    await database?.drop();
  });

  const states = async () => ({
    ready: await grpcHealth(address, 2_000),
    live: await grpcHealth(address, 2_000, null, LIVENESS_HEALTH_NAME),
    postgres: await grpcHealth(address, 2_000, null, dependencyHealthName('postgres')),
    nats: await grpcHealth(address, 2_000, null, dependencyHealthName('nats')),
    backlog: await grpcHealth(address, 2_000, null, dependencyHealthName('backlog')),
  });

  it('is ready while PostgreSQL and NATS answer, names PostgreSQL when it goes away, and stays alive', async () => {
    expect(await states()).toEqual({
      ready: 'serving',
      live: 'serving',
      postgres: 'serving',
      nats: 'serving',
      backlog: 'serving',
    });
    proxy.cut();
    await eventually(async () => (await grpcHealth(address, 2_000)) === 'not-serving', 10_000);
    expect(await states()).toEqual({
      ready: 'not-serving',
      live: 'serving',
      postgres: 'not-serving',
      nats: 'serving',
      backlog: 'serving',
    });
    proxy.restore();
    await eventually(async () => (await grpcHealth(address, 2_000)) === 'serving', 15_000);
    expect(await states()).toEqual({
      ready: 'serving',
      live: 'serving',
      postgres: 'serving',
      nats: 'serving',
      backlog: 'serving',
    });
  });

  it('stays ready while an informational check fails, and reports that check as not serving', async () => {
    backlogOnTime = false;
    try {
      await eventually(
        async () =>
          (await grpcHealth(address, 2_000, null, dependencyHealthName('backlog'))) === 'not-serving',
        10_000,
      );
      expect(await states()).toEqual({
        ready: 'serving',
        live: 'serving',
        postgres: 'serving',
        nats: 'serving',
        backlog: 'not-serving',
      });
    } finally {
      backlogOnTime = true;
    }
  });
});
