import { randomUUID } from 'node:crypto';
import { createServiceOrm, migrateToLatest } from '@sts/db/service-orm';
import { registerService, startGrpcServer } from '@sts/grpc/grpc-server';
import { IdentityService } from '@sts/identity-domain/identity-service';
import type { Logger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { ensureEventsStream } from '@sts/nats/event-stream';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { OutboxRelay } from '@sts/outbox/outbox-relay';
import { IdentityServiceService } from '@sts/proto/gen/identity/v1/identity';
import { Lifecycle } from '@sts/runtime/lifecycle';
import type { IdentityConfig } from './identity-config';
import { IDENTITY_ENTITIES } from './identity-entities';
import { identityGrpcHandlers } from './identity-grpc-handlers';
import { IDENTITY_MIGRATIONS, IDENTITY_SCHEMA } from './identity-migrations';
import { MikroIdentityStore } from './mikro-identity-store';

export interface RunningService {
  grpcPort: number;
  stop(): Promise<void>;
}

export async function startIdentityService(config: IdentityConfig, logger: Logger): Promise<RunningService> {
  const lifecycle = new Lifecycle((name, error) => logger.error({ err: error, resource: name }, 'shutdown step failed'));
  try {
    const orm = await createServiceOrm({
      databaseUrl: config.DATABASE_URL,
      schema: IDENTITY_SCHEMA,
      entities: IDENTITY_ENTITIES,
      migrations: IDENTITY_MIGRATIONS,
      logger,
    });
    lifecycle.add('postgres', () => orm.close());
    await migrateToLatest(orm, logger);

    const nats = await connectJetStream({ url: config.NATS_URL, name: 'identity', logger });
    lifecycle.add('nats', () => nats.close());
    await ensureEventsStream(nats.jsm, config.NATS_NAMESPACE);

    const relay = new OutboxRelay(orm, createEventPublisher(nats.js, config.NATS_NAMESPACE), logger);
    relay.start();
    lifecycle.add('outbox relay', () => relay.stop());

    const service = new IdentityService(
      new MikroIdentityStore(orm, () => relay.wake()),
      { inviteTtlHours: config.INVITE_TTL_HOURS, sealingKey: Buffer.from(config.SECRET_SEALING_KEY, 'base64') },
      { now: () => new Date() },
      { newId: () => randomUUID() },
    );
    const server = await startGrpcServer({
      host: config.GRPC_HOST,
      port: config.GRPC_PORT,
      logger,
      services: [registerService('identity.v1.IdentityService', IdentityServiceService, identityGrpcHandlers(service), logger)],
    });
    lifecycle.add('grpc server', () => server.shutdown());
    return { grpcPort: server.port, stop: () => lifecycle.close() };
  } catch (error) {
    await lifecycle.close();
    throw error;
  }
}
