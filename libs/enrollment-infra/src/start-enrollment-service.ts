import { randomUUID } from 'node:crypto';
import { deriveEnrollmentKeyring } from '@sts/enrollment-domain/enrollment-secrets';
import { EnrollmentService } from '@sts/enrollment-domain/enrollment-service';
import { registerService } from '@sts/grpc/grpc-server';
import type { Logger } from '@sts/logger/create-logger';
import { EnrollmentServiceService } from '@sts/proto/gen/enrollment/v1/enrollment';
import { runServiceHost, type RunningService } from '@sts/service-host/service-host';
import type { EnrollmentConfig } from './enrollment-config';
import { enrollmentGrpcHandlers } from './enrollment-grpc-handlers';
import { ENROLLMENT_MIGRATIONS, ENROLLMENT_SCHEMA } from './enrollment-migrations';
import { MikroEnrollmentStore } from './mikro-enrollment-store';

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
        entities: [],
        migrations: ENROLLMENT_MIGRATIONS,
        publishesEvents: true,
      },
      config,
      logger,
    },
    async (host) => {
      const service = new EnrollmentService(
        new MikroEnrollmentStore(host.orm, () => host.wakeOutbox()),
        {
          keyring: deriveEnrollmentKeyring(Buffer.from(config.ENROLLMENT_KEY_ENCRYPTION_KEY, 'base64')),
          eventSealingKey: Buffer.from(config.SECRET_SEALING_KEY, 'base64'),
        },
        { now: () => new Date() },
        { newId: () => randomUUID() },
      );
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
