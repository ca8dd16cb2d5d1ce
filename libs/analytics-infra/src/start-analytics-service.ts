import { randomUUID } from 'node:crypto';
import { AnalyticsService } from '@sts/analytics-domain/analytics-service';
import { TelemetryIngestion, type IngestionOutcome } from '@sts/analytics-domain/telemetry-ingestion';
import { assertClickHouseMigrated, runClickHouseMigrations } from '@sts/clickhouse/clickhouse-migrations';
import { parseTelemetryBatch, telemetryMessageId } from '@sts/events/telemetry';
import { registerService } from '@sts/grpc/grpc-server';
import type { Logger } from '@sts/logger/create-logger';
import { startBatchConsumer } from '@sts/nats/batch-consumer';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { ensureTelemetry, telemetryConsumerServerSettings } from '@sts/nats/nats-topology';
import type { TelemetryConsumerName } from '@sts/events/event-consumers';
import { AnalyticsServiceService } from '@sts/proto/gen/analytics/v1/analytics';
import { migratedOnly, runServiceHost, type RunningService } from '@sts/service-host/service-host';
import type { AnalyticsConfig } from './analytics-config';
import { analyticsGrpcHandlers } from './analytics-grpc-handlers';
import { analyticsMigrations, type AnalyticsSchemaTarget } from './analytics-migrations';
import { dropExpiredPartitions, retentionOf } from './analytics-retention';
import {
  assertTopology,
  clientSettingsOf,
  openAnalyticsClickHouse,
  shardAnswers,
  type AnalyticsTables,
} from './analytics-tables';
import { ClickHouseAnalyticsStore } from './clickhouse-analytics-store';
import { DEVICE_EVENTS_CONSUMER, deviceEventProgress } from './device-event-progress';
import { deviceLifecycleHandler } from './device-lifecycle-handler';
import { startDevicePurges } from './device-purges';
import { signallingDeviceStates } from './device-states-signal';
import { openBatchClaims } from './nats-batch-claims';
import { threatPublisher } from './threat-publisher';

export type { RunningService } from '@sts/service-host/service-host';

/** Durable consumer of the telemetry stream; every analytics process shares it (and so the work). */
export const TELEMETRY_CONSUMER = 'analytics-telemetry' satisfies TelemetryConsumerName;

export interface AnalyticsServiceOptions {
  /** Called after each batch is stored, before it is acknowledged (tests use it to crash at that point). */
  afterIngest?: (outcome: IngestionOutcome) => void;
  /** Awaited before each device event is handled (tests hold device events up with it). */
  beforeDeviceEvent?: () => Promise<void>;
  /** Delay before a failed device event is retried (tests shorten it; default 1 s doubling to 5 min). */
  deviceEventRetryDelay?: { initialMs: number; maxMs: number };
  /** Delay before a failed device purge is retried (tests shorten it; default 1 s doubling to 1 min). */
  devicePurgeRetryDelay?: { initialMs: number; maxMs: number };
  /** How often readiness checks the dependencies (5 s unless a test wants it sooner). */
  dependencyCheckIntervalMs?: number;
}

/** At least two seconds: longer than the replica delay ingestion's reads accept (analytics-tables.ts). */
const TELEMETRY_RETRY_ON_CLUSTER = { initialMs: 2_500, maxMs: 30_000 };

/**
 * Failures of batches that are not failures of ours: they come back later and are decided then. Named by
 * their code, which is all a log line keeps of an error (`redactedError` of @sts/logger/redacted-error).
 */
class TryLater extends Error {
  constructor(
    readonly code: 'BATCH_CLAIMED_ELSEWHERE' | 'DEVICE_STATE_UNSETTLED',
    message: string,
  ) {
    super(message);
    this.name = 'TryLater';
  }
}

/**
 * Analytics: consumes telemetry batches into ClickHouse (raw rows and rollups, exactly once), keeps
 * the device lifecycle from device events, detects threats, and answers summaries and series.
 */
export async function startAnalyticsService(
  config: AnalyticsConfig,
  logger: Logger,
  options: AnalyticsServiceOptions = {},
): Promise<RunningService> {
  const cluster = config.CLICKHOUSE_CLUSTER ?? null;
  const target: AnalyticsSchemaTarget = { database: config.CLICKHOUSE_DATABASE, cluster };
  const connection = { url: config.CLICKHOUSE_URL, logger, settings: clientSettingsOf(target) };
  await assertTopology(connection, target);
  const migrations = {
    connection,
    database: config.CLICKHOUSE_DATABASE,
    cluster,
    migrations: analyticsMigrations(target),
    logger,
  };
  if (config.MIGRATIONS === 'check') await assertClickHouseMigrated(migrations);
  else await runClickHouseMigrations(migrations);
  if (config.MIGRATIONS === 'only') return migratedOnly;
  const retained = retentionOf(config);
  const clock = { now: () => new Date() };

  const hostOptions = {
    name: 'analytics' as const,
    config,
    logger,
    dependencyCheckIntervalMs: options.dependencyCheckIntervalMs,
  };
  return runServiceHost(hostOptions, async (host) => {
    const clickhouse = await openAnalyticsClickHouse({ url: config.CLICKHOUSE_URL, target, logger });
    host.onShutdown('clickhouse', () => clickhouse.close());
    const { client } = clickhouse;
    host.checkDependency('clickhouse', async () => (await client.ping()).success);
    // On a cluster, health names a shard none of whose replicas answers (informational: every analytics
    // process would see the same, and the other shards are served), and the layout is read again now and
    // then (a shard added).
    for (const shard of clickhouse.shards()) {
      host.checkDependency(`clickhouse-shard-${shard.number}`, () => shardAnswers(client, shard), {
        decidesReadiness: false,
      });
    }
    if (cluster !== null) {
      const layout = setInterval(
        () =>
          void clickhouse
            .refreshLayout()
            .catch((error: unknown) =>
              logger.warn({ err: error }, 'cannot read the ClickHouse cluster layout'),
            ),
        60_000,
      );
      layout.unref();
      host.onShutdown('clickhouse cluster layout', () => clearInterval(layout));
    }
    const store = new ClickHouseAnalyticsStore(client, clickhouse.tables);
    const { js, jsm } = host.nats;
    // Device changes, applied: each then tells the gateways to drop the organization's cached answers.
    const deviceStates = signallingDeviceStates(store, host.nats.nc, config.NATS_NAMESPACE, logger);

    // A deleted device's telemetry must go (privacy), however long ClickHouse is away: its purge is
    // parked in a stream without an age limit and retried until done; health shows one waiting long
    // (`dependency/device-purges`) without taking the service out of service: every replica shares the
    // stream, so none would serve better, and analytics' reads do not depend on it.
    const purges = await startDevicePurges({
      js,
      jsm,
      namespace: config.NATS_NAMESPACE,
      streamReplicas: config.NATS_STREAM_REPLICAS,
      store: deviceStates,
      logger,
      retryDelay: options.devicePurgeRetryDelay,
    });
    host.onShutdown('device purges', () => purges.stop());
    host.checkDependency(
      'device-purges',
      async () => (await purges.oldestWaitMs()) < config.DEVICE_PURGE_MAX_WAIT_MS,
      { decidesReadiness: false },
    );
    const applyDeviceEvent = deviceLifecycleHandler(deviceStates, purges);
    const { beforeDeviceEvent } = options;
    await host.consume({
      consumer: DEVICE_EVENTS_CONSUMER,
      handle: beforeDeviceEvent
        ? async (event) => {
            await beforeDeviceEvent();
            return applyDeviceEvent(event);
          }
        : applyDeviceEvent,
      retryDelay: options.deviceEventRetryDelay,
    });

    // The events stream exists: the device consumer above ensured it.
    const threats = threatPublisher(
      createEventPublisher(js, config.NATS_NAMESPACE),
      config.THREAT_COOLDOWN_MINUTES,
    );
    // This process's deliveries: a message redelivered to another process while this one still stores it
    // (its ack or progress lost with a NATS server) must wait, not be stored twice.
    const claimHolder = randomUUID();
    const claims = await openBatchClaims(host.nats.nc, config.NATS_NAMESPACE, config.NATS_STREAM_REPLICAS);
    const appliedDeviceEvents = deviceEventProgress({ jsm, namespace: config.NATS_NAMESPACE });
    const ingestionOver = (ingestionStore: ClickHouseAnalyticsStore) =>
      new TelemetryIngestion(
        ingestionStore,
        threats,
        claims,
        purges,
        appliedDeviceEvents,
        {
          threatRule: {
            threshold: config.THREAT_BLOCK_THRESHOLD,
            windowMinutes: config.THREAT_WINDOW_MINUTES,
            cooldownMinutes: config.THREAT_COOLDOWN_MINUTES,
          },
          // Longer than a batch can wait in the stream (its max age is 7 days).
          ledgerLookbackMs: 8 * 86_400_000,
          maxRowsPerInsert: 200_000,
          relayGraceMs: config.TELEMETRY_STATE_SETTLE_MS,
        },
        clock,
      );
    // One ingestion per shard (its reads go to that shard's replicas), one on a single server.
    const ingestions = new Map<AnalyticsTables, TelemetryIngestion>();
    const ingestionOf = (tables: AnalyticsTables) => {
      let found = ingestions.get(tables);
      if (!found)
        ingestions.set(tables, (found = ingestionOver(new ClickHouseAnalyticsStore(client, tables))));
      return found;
    };
    const telemetry = await startBatchConsumer({
      js,
      jsm,
      ...telemetryConsumerServerSettings(config.NATS_NAMESPACE, TELEMETRY_CONSUMER, {
        ackWaitMs: config.TELEMETRY_ACK_WAIT_MS,
        maxBatchMessages: config.TELEMETRY_BATCH_MESSAGES,
      }),
      ensureStream: () =>
        ensureTelemetry(jsm, config.NATS_NAMESPACE, logger, {
          maxBytes: config.TELEMETRY_STREAM_MAX_BYTES,
          replicas: config.NATS_STREAM_REPLICAS,
        }),
      decode: (msg) => parseTelemetryBatch(msg.json()),
      handleBatch: async (batch) => {
        const failures = new Map<(typeof batch)[number]['msg'], unknown>();
        const groups = await clickhouse.byShard(batch, (item) => item.value.org_id);
        const settled = await Promise.allSettled(
          groups.map(({ tables, items }) =>
            ingestionOf(tables).ingest(
              items.map((item) => item.value),
              items.map((item) => `${claimHolder}:${item.msg.seq}`),
            ),
          ),
        );
        settled.forEach((result, index) => {
          const { items } = groups[index]!;
          if (result.status === 'rejected') {
            // One shard away fails its own organizations' batches only.
            if (groups.length === 1) throw result.reason;
            for (const { msg } of items) failures.set(msg, result.reason);
            return;
          }
          const outcome = result.value;
          logger.debug(outcome, 'telemetry stored');
          options.afterIngest?.(outcome);
          // Another replica is storing another copy of these: by the next try its ledger entry is there.
          // Those received while their device was disabled wait, until the device events up to them are
          // applied, for an enable that may be on its way.
          const later = new Map<string, TryLater>([
            ...outcome.deferred.map(
              (key) =>
                [
                  key,
                  new TryLater('BATCH_CLAIMED_ELSEWHERE', 'another replica is storing a copy of this batch'),
                ] as const,
            ),
            ...outcome.unsettled.map(
              (key) =>
                [
                  key,
                  new TryLater(
                    'DEVICE_STATE_UNSETTLED',
                    'received while its device was disabled, before the device events up to it were applied',
                  ),
                ] as const,
            ),
          ]);
          for (const { msg, value } of items) {
            const failure = later.get(telemetryMessageId(value.device_id, value.batch_id));
            if (failure) failures.set(msg, failure);
          }
        });
        return failures;
      },
      // On a cluster a failed batch must come back after a lagging replica would be refused (a second):
      // its insert may have landed on a replica that died before another fetched it.
      ...(cluster === null ? {} : { retryDelay: TELEMETRY_RETRY_ON_CLUSTER }),
      logger,
      maxWaitMs: config.TELEMETRY_BATCH_WAIT_MS,
    });
    host.onShutdown('telemetry consumer', () => telemetry.stop());

    const applyRetention = () =>
      dropExpiredPartitions(
        client,
        config.CLICKHOUSE_DATABASE,
        retained,
        clock.now(),
        logger,
        clickhouse.tables,
      ).catch((error: unknown) => logger.warn({ err: error }, 'telemetry retention failed; will retry'));
    void applyRetention();
    const retention = setInterval(() => void applyRetention(), 60 * 60_000);
    retention.unref();
    host.onShutdown('telemetry retention', () => clearInterval(retention));

    return [
      registerService(
        'analytics.v1.AnalyticsService',
        AnalyticsServiceService,
        analyticsGrpcHandlers(new AnalyticsService(store, clock)),
        logger,
      ),
    ];
  });
}
