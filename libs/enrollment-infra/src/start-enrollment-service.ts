import { randomUUID } from 'node:crypto';
import { deriveEnrollmentKeyring } from '@sts/enrollment-domain/enrollment-secrets';
import { EnrollmentService } from '@sts/enrollment-domain/enrollment-service';
import { TELEMETRY_HEADERS } from '@sts/events/telemetry';
import { registerService } from '@sts/grpc/grpc-server';
import { startBatchConsumer } from '@sts/nats/batch-consumer';
import { ensureTelemetry, telemetryConsumerServerSettings } from '@sts/nats/nats-topology';
import type { Logger } from '@sts/logger/create-logger';
import { EnrollmentServiceService } from '@sts/proto/gen/enrollment/v1/enrollment';
import { runServiceHost, type RunningService } from '@sts/service-host/service-host';
import type { EnrollmentConfig } from './enrollment-config';
import { ENROLLMENT_ENTITIES } from './enrollment-entities';
import { enrollmentGrpcHandlers } from './enrollment-grpc-handlers';
import { ENROLLMENT_MIGRATIONS, ENROLLMENT_SCHEMA } from './enrollment-migrations';
import { PostgresEnrollmentStore } from './postgres-enrollment-store';

export type { RunningService } from '@sts/service-host/service-host';

/**
 * Enrollment: enrollment keys, one-time codes, devices and device tokens; publishes device.enrolled,
 * device.disabled, device.enabled, device.deleted and enrollment_code.email_requested.
 */
export function startEnrollmentService(config: EnrollmentConfig, logger: Logger): Promise<RunningService> {
  return runServiceHost(
    {
      name: 'enrollment',
      database: {
        schema: ENROLLMENT_SCHEMA,
        entities: ENROLLMENT_ENTITIES,
        migrations: ENROLLMENT_MIGRATIONS,
        publishesEvents: true,
      },
      config,
      logger,
    },
    async (host) => {
      const service = new EnrollmentService(
        new PostgresEnrollmentStore(host.orm, () => host.wakeOutbox()),
        {
          keyring: deriveEnrollmentKeyring(Buffer.from(config.ENROLLMENT_KEY_ENCRYPTION_KEY, 'base64')),
          eventSealingKey: Buffer.from(config.SECRET_SEALING_KEY, 'base64'),
          maxLiveCodes: config.ENROLLMENT_MAX_LIVE_CODES,
        },
        { now: () => new Date() },
        { newId: () => randomUUID() },
      );
      // last_seen_at follows telemetry: sightings read from the batch headers, written at most once per flush.
      const { js, jsm } = host.nats;
      const sightings = await startBatchConsumer({
        js,
        jsm,
        // Only the sender headers are read: the batches themselves (up to 2 MiB each) stay on the server.
        ...telemetryConsumerServerSettings(config.NATS_NAMESPACE, 'enrollment-last-seen'),
        ensureStream: () =>
          ensureTelemetry(jsm, config.NATS_NAMESPACE, logger, { replicas: config.NATS_STREAM_REPLICAS }),
        decode: (msg) => {
          const orgId = msg.headers?.get(TELEMETRY_HEADERS.orgId) ?? '';
          const deviceId = msg.headers?.get(TELEMETRY_HEADERS.deviceId) ?? '';
          const at = Number(msg.headers?.get(TELEMETRY_HEADERS.receivedAt));
          if (!orgId || !deviceId || !Number.isSafeInteger(at))
            throw new Error('telemetry batch without sender headers');
          return { orgId, deviceId, at: new Date(at) };
        },
        handleBatch: async (batch) => {
          await service.recordSightings(batch.map((item) => item.value));
        },
        logger,
        maxWaitMs: config.LAST_SEEN_FLUSH_MS,
      });
      host.onShutdown('last-seen consumer', () => sightings.stop());
      return [
        registerService(
          'enrollment.v1.EnrollmentService',
          EnrollmentServiceService,
          enrollmentGrpcHandlers(service),
          logger,
        ),
      ];
    },
  );
}
