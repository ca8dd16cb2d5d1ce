import { AnalyticsService } from '@sts/analytics-domain/analytics-service';
import { TelemetryIngestion, type IngestionOutcome } from '@sts/analytics-domain/telemetry-ingestion';
import { createClickHouseClient } from '@sts/clickhouse/clickhouse-client';
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
import { ANALYTICS_MIGRATIONS } from './analytics-migrations';
import { dropExpiredPartitions, retentionOf } from './analytics-retention';
import { ClickHouseAnalyticsStore } from './clickhouse-analytics-store';
import { DEVICE_EVENTS_CONSUMER, deviceEventProgress } from './device-event-progress';
import { deviceLifecycleHandler } from './device-lifecycle-handler';
import { startDevicePurges } from './device-purges';
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
  const connection = { url: config.CLICKHOUSE_URL, logger };
  const migrations = {
    connection,
    database: config.CLICKHOUSE_DATABASE,
    migrations: ANALYTICS_MIGRATIONS,
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
    const client = createClickHouseClient({ ...connection, database: config.CLICKHOUSE_DATABASE });
    host.onShutdown('clickhouse', () => client.close());
    host.checkDependency('clickhouse', async () => (await client.ping()).success);
    const store = new ClickHouseAnalyticsStore(client);
    const { js, jsm } = host.nats;

    // A deleted device's telemetry must go (privacy), however long ClickHouse is away: its purge is
    // parked in a stream without an age limit and retried until done; health shows one waiting long
    // (`dependency/device-purges`) without taking the service out of service: every replica shares the
    // stream, so none would serve better, and analytics' reads do not depend on it.
    const purges = await startDevicePurges({
      js,
      jsm,
      namespace: config.NATS_NAMESPACE,
      store,
      logger,
      retryDelay: options.devicePurgeRetryDelay,
    });
    host.onShutdown('device purges', () => purges.stop());
    host.checkDependency(
      'device-purges',
      async () => (await purges.oldestWaitMs()) < config.DEVICE_PURGE_MAX_WAIT_MS,
      { decidesReadiness: false },
    );
    const applyDeviceEvent = deviceLifecycleHandler(store, purges);
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
    const ingestion = new TelemetryIngestion(
      store,
      threatPublisher(createEventPublisher(js, config.NATS_NAMESPACE), config.THREAT_COOLDOWN_MINUTES),
      await openBatchClaims(host.nats.nc, config.NATS_NAMESPACE),
      purges,
      deviceEventProgress({ jsm, namespace: config.NATS_NAMESPACE }),
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
    const telemetry = await startBatchConsumer({
      js,
      jsm,
      ...telemetryConsumerServerSettings(config.NATS_NAMESPACE, TELEMETRY_CONSUMER, {
        ackWaitMs: config.TELEMETRY_ACK_WAIT_MS,
        maxBatchMessages: config.TELEMETRY_BATCH_MESSAGES,
      }),
      ensureStream: () =>
        ensureTelemetry(jsm, config.NATS_NAMESPACE, logger, { maxBytes: config.TELEMETRY_STREAM_MAX_BYTES }),
      decode: (msg) => parseTelemetryBatch(msg.json()),
      handleBatch: async (batch) => {
        const outcome = await ingestion.ingest(
          batch.map((item) => item.value),
          batch.map((item) => String(item.msg.seq)),
        );
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
        return new Map(
          batch.flatMap(({ msg, value }) => {
            const failure = later.get(telemetryMessageId(value.device_id, value.batch_id));
            return failure ? [[msg, failure] as const] : [];
          }),
        );
      },
      logger,
      maxWaitMs: config.TELEMETRY_BATCH_WAIT_MS,
    });
    host.onShutdown('telemetry consumer', () => telemetry.stop());

    const applyRetention = () =>
      dropExpiredPartitions(client, config.CLICKHOUSE_DATABASE, retained, clock.now(), logger).catch(
        (error: unknown) => logger.warn({ err: error }, 'telemetry retention failed; will retry'),
      );
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
