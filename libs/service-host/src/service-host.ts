import type { EntitySchema } from '@mikro-orm/postgresql';
import { PROCESSED_EVENTS_RETENTION } from '@sts/db/processed-events';
import { startRetention, type RetainedTable } from '@sts/db/retention';
import {
  assertMigrated,
  createServiceOrm,
  migrateToLatest,
  type MigrationEntry,
  type ServiceOrm,
} from '@sts/db/service-orm';
import type { EventType } from '@sts/events/event-catalogue';
import {
  EVENT_CONSUMERS,
  type EventConsumerDeclaration,
  type EventConsumerName,
} from '@sts/events/event-consumers';
import { startGrpcServer, type ServiceRegistration } from '@sts/grpc/grpc-server';
import { watchDependencies, type DependencyCheck } from '@sts/grpc/dependency-health';
import { loadGrpcTls } from '@sts/grpc/grpc-tls';
import { ServiceTokenVerifier } from '@sts/grpc/service-token';
import type { TrustedServiceKeys } from '@sts/config/service-keys';
import type { ServiceName } from '@sts/vocabulary/services';
import type { Logger } from '@sts/logger/create-logger';
import { startEventConsumer, type EventConsumerSettings, type EventHandler } from '@sts/nats/event-consumer';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { isBrokerUnavailable } from '@sts/nats/broker-failures';
import { ensureEventsStream } from '@sts/nats/event-stream';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { OUTBOX_RETENTION } from '@sts/outbox/outbox';
import { OutboxRelay } from '@sts/outbox/outbox-relay';
import { loggedLifecycle } from '@sts/runtime/lifecycle';
import { outboxBacklog } from '@sts/observability/metrics';
import { startObservability, type ObservabilityConfig } from '@sts/observability/process-observability';

export interface ServiceHostConfig extends ObservabilityConfig {
  /** Required when the service has a `database`. */
  DATABASE_URL?: string;
  NATS_URL: string;
  NATS_NAMESPACE: string;
  /** Copies of the events stream a NATS cluster keeps, should this service make it (default 1). */
  NATS_STREAM_REPLICAS?: number;
  /** How long the start waits for a restarted NATS cluster's leaders (default 120 s). */
  NATS_READY_TIMEOUT_MS?: number;
  GRPC_HOST: string;
  GRPC_PORT: number;
  /** The public keys of the services that call this one (SERVICE_TRUSTED_KEYS, parsed). */
  SERVICE_TRUSTED_KEYS: TrustedServiceKeys;
  /** run (default), only (migrate and stop), check (refuse to start with pending migrations). */
  MIGRATIONS?: 'run' | 'only' | 'check';
  GRPC_TLS_CA_FILE?: string | undefined;
  GRPC_TLS_CERT_FILE?: string | undefined;
  GRPC_TLS_KEY_FILE?: string | undefined;
}

export interface ServiceHostOptions {
  /** Service name: NATS connection name, durable consumer name, audience of its service tokens. */
  name: ServiceName;
  /** The services whose calls this one serves (service-token.ts); the gateway unless told otherwise. */
  callers?: ServiceName[];
  /** The service's PostgreSQL schema; absent for a service that keeps no state there (analytics). */
  database?: ServiceDatabase;
  config: ServiceHostConfig;
  logger: Logger;
  /** How often readiness checks the dependencies (5 s unless a test wants it sooner). */
  dependencyCheckIntervalMs?: number;
}

export interface ServiceDatabase {
  schema: string;
  entities: EntitySchema[];
  migrations: MigrationEntry[];
  /** Whether the service publishes events through its outbox (the schema then has an outbox table). */
  publishesEvents: boolean;
  /** The service's own tables whose rows expire, besides the outbox and the ledger of handled events. */
  retainedTables?: RetainedTable[];
}

/** What a service's composition gets to build its domain on. `orm` is null without a `database`. */
export interface ServiceHost<Orm extends ServiceOrm | null = ServiceOrm> {
  orm: Orm;
  /** The service's NATS connection, for what is not a domain event (telemetry, direct publishing). */
  nats: JetStreamConnection;
  logger: Logger;
  /** Call after a commit that wrote events, to publish them at once. No-op for non-publishers. */
  wakeOutbox(): void;
  /**
   * Starts one of the service's durable consumers of the events stream, as EVENT_CONSUMERS declares it
   * (its event types and deliveries).
   */
  consume<Name extends EventConsumerName>(
    options: EventHandler<ConsumerEventType<Name>> & {
      consumer: Name;
      retryDelay?: EventConsumerSettings['retryDelay'];
    },
  ): Promise<void>;
  /** Registers something to close at shutdown (before the connections above it). */
  onShutdown(name: string, close: () => unknown): void;
  /**
   * A dependency besides PostgreSQL and NATS that readiness checks (gRPC health `dependency/<name>`).
   * `decidesReadiness: false`: reported as `dependency/<name>` only, the service stays ready (`''`)
   * however it answers (something for an operator to see that no replica would serve better without).
   */
  checkDependency(name: string, check: DependencyCheck, options?: { decidesReadiness?: boolean }): void;
}

/** The event types a declared consumer takes. */
type ConsumerEventType<Name extends EventConsumerName> = (typeof EVENT_CONSUMERS)[Name]['eventTypes'][number];

export interface RunningService {
  grpcPort: number;
  /** Port of GET /metrics; undefined without METRICS_PORT. */
  metricsPort?: number | undefined;
  stop(): Promise<void>;
  /** MIGRATIONS=only: the migrations ran and nothing else started; the process should exit. */
  migratedOnly?: boolean;
}

/** How often a service checks its dependencies for its readiness, and how long one check may take. */
const DEPENDENCY_CHECK_INTERVAL_MS = 5_000;
const DEPENDENCY_CHECK_TIMEOUT_MS = 2_000;

/** What a service start answers with MIGRATIONS=only. */
export const migratedOnly: RunningService = { grpcPort: 0, stop: async () => undefined, migratedOnly: true };

/**
 * Runs a gRPC service process the one way all of ours run: migrate its PostgreSQL schema, connect
 * NATS, relay its outbox (ensuring the events stream first), let `compose` build the domain and
 * consumers (each ensures the stream itself), then serve gRPC (with health). `stop()` closes
 * everything in reverse order; a failed start closes what was opened.
 */
export function runServiceHost(
  options: ServiceHostOptions & { database: ServiceDatabase },
  compose: (host: ServiceHost) => Promise<ServiceRegistration[]>,
): Promise<RunningService>;
export function runServiceHost(
  options: ServiceHostOptions & { database?: undefined },
  compose: (host: ServiceHost<null>) => Promise<ServiceRegistration[]>,
): Promise<RunningService>;
export async function runServiceHost(
  options: ServiceHostOptions,
  // `never`: each overload's compose accepts the host it is given (with or without an ORM).
  compose: (host: ServiceHost<never>) => Promise<ServiceRegistration[]>,
): Promise<RunningService> {
  const { config, logger, database } = options;
  const lifecycle = loggedLifecycle(logger);
  try {
    let orm: ServiceOrm | null = null;
    if (database) {
      if (!config.DATABASE_URL) throw new Error(`${options.name} needs DATABASE_URL`);
      const opened = await createServiceOrm({
        databaseUrl: config.DATABASE_URL,
        schema: database.schema,
        entities: database.entities,
        migrations: database.migrations,
        logger,
      });
      orm = opened;
      lifecycle.add('postgres', () => opened.close());
      if (config.MIGRATIONS === 'check') await assertMigrated(opened);
      else await migrateToLatest(opened, logger);
    }
    if (config.MIGRATIONS === 'only') {
      await lifecycle.close();
      return migratedOnly;
    }
    const observability = await startObservability(options.name, config, logger);
    lifecycle.add('metrics and traces', () => observability.stop());

    const nats = await connectJetStream({
      url: config.NATS_URL,
      name: options.name,
      logger,
      readyTimeoutMs: config.NATS_READY_TIMEOUT_MS,
    });
    lifecycle.add('nats', () => nats.close());

    let relay: OutboxRelay | undefined;
    if (orm && database?.publishesEvents) {
      // Consumers ensure the stream themselves (and again when it vanishes); the relay needs it to publish.
      await nats.untilAnswers('the events stream', () =>
        ensureEventsStream(nats.jsm, config.NATS_NAMESPACE, {
          logger,
          replicas: config.NATS_STREAM_REPLICAS,
        }),
      );
      relay = new OutboxRelay(orm, createEventPublisher(nats.js, config.NATS_NAMESPACE), logger, {
        brokerAnswers: () => nats.jsm.getAccountInfo().then(() => true),
        isBrokerFailure: isBrokerUnavailable,
        maxPayloadBytes: nats.nc.info?.max_payload,
      });
      relay.start();
      lifecycle.add('outbox relay', () => relay?.stop());
      const running = relay;
      lifecycle.add(
        'outbox metrics',
        outboxBacklog.add(database.schema, () => running.backlog()),
      );
    }

    let consumesEvents = false;
    const extraChecks: Record<string, DependencyCheck> = {};
    const informationalChecks: Record<string, DependencyCheck> = {};
    const host: ServiceHost<ServiceOrm | null> = {
      orm,
      nats,
      logger,
      wakeOutbox: () => relay?.wake(),
      onShutdown: (name, close) => lifecycle.add(name, close),
      checkDependency: (name, check, { decidesReadiness = true } = {}) => {
        if (name in extraChecks || name in informationalChecks)
          throw new Error(`dependency ${name} is checked already`);
        (decidesReadiness ? extraChecks : informationalChecks)[name] = check;
      },
      consume: async ({ consumer, ...handler }) => {
        const declaration: EventConsumerDeclaration = EVENT_CONSUMERS[consumer];
        if (declaration.service !== options.name)
          throw new Error(`consumer ${consumer} belongs to ${declaration.service}, not ${options.name}`);
        consumesEvents = true;
        const running = await startEventConsumer({
          ...(handler as EventHandler<EventType>),
          durableName: consumer,
          eventTypes: declaration.eventTypes,
          maxDeliver: declaration.maxDeliver,
          retryDelay: handler.retryDelay,
          js: nats.js,
          jsm: nats.jsm,
          namespace: config.NATS_NAMESPACE,
          streamReplicas: config.NATS_STREAM_REPLICAS,
          logger,
        });
        lifecycle.add(`event consumer ${consumer}`, () => running.stop());
      },
    };
    const services = await compose(host as ServiceHost<never>);

    // The outbox and the consumers' dedupe ledger keep rows only as long as the stream keeps events.
    const retained: RetainedTable[] = [
      ...(database?.publishesEvents ? [OUTBOX_RETENTION] : []),
      ...(consumesEvents ? [PROCESSED_EVENTS_RETENTION] : []),
      ...(database?.retainedTables ?? []),
    ];
    if (orm && retained.length > 0) {
      const retention = startRetention(orm, logger, retained);
      lifecycle.add('retention', () => retention.stop());
    }

    const everyMethodCallers = options.callers ?? ['gateway'];
    const callers = new ServiceTokenVerifier(config.SERVICE_TRUSTED_KEYS, options.name, [
      ...new Set([
        ...everyMethodCallers,
        ...services.flatMap((service) => Object.values(service.extraCallers).flat()),
      ]),
    ]);
    const server = await startGrpcServer({
      host: config.GRPC_HOST,
      port: config.GRPC_PORT,
      logger,
      services,
      callers,
      everyMethodCallers,
      tls: loadGrpcTls(config),
    });
    lifecycle.add('grpc server', () => server.shutdown());
    // Readiness names what is missing: PostgreSQL, NATS and what the service adds (analytics: ClickHouse).
    const openOrm = orm;
    const dependencies = watchDependencies({
      health: server.health,
      services: services.map((service) => service.name),
      checks: Object.assign(
        openOrm
          ? {
              postgres: async () =>
                (await openOrm.em.getConnection().execute('select 1', [], 'all')).length === 1,
            }
          : {},
        { nats: () => nats.answers() },
        extraChecks,
      ),
      informational: informationalChecks,
      intervalMs: options.dependencyCheckIntervalMs ?? DEPENDENCY_CHECK_INTERVAL_MS,
      timeoutMs: DEPENDENCY_CHECK_TIMEOUT_MS,
      onChange: (missing) =>
        missing.length > 0
          ? logger.warn({ missing }, 'not ready: dependencies do not answer')
          : logger.info('ready: every dependency answers'),
      onInformationalChange: (failing) =>
        failing.length > 0
          ? logger.warn({ failing }, 'informational dependency checks fail (readiness unaffected)')
          : logger.info('every informational dependency check passes'),
    });
    await dependencies.checkNow();
    lifecycle.add('dependency checks', () => dependencies.stop());
    return { grpcPort: server.port, metricsPort: observability.metricsPort, stop: () => lifecycle.close() };
  } catch (error) {
    await lifecycle.close();
    throw error;
  }
}
