import { randomUUID } from 'node:crypto';
import { registerService } from '@sts/grpc/grpc-server';
import { IdentityService } from '@sts/identity-domain/identity-service';
import type { Logger } from '@sts/logger/create-logger';
import { IdentityServiceService } from '@sts/proto/gen/identity/v1/identity';
import { runServiceHost, type RunningService } from '@sts/service-host/service-host';
import type { IdentityConfig } from './identity-config';
import { IDENTITY_ENTITIES } from './identity-entities';
import { identityGrpcHandlers } from './identity-grpc-handlers';
import { IDENTITY_MIGRATIONS, IDENTITY_SCHEMA } from './identity-migrations';
import { PostgresIdentityStore } from './postgres-identity-store';

export type { RunningService } from '@sts/service-host/service-host';

/** Identity: users, organizations, members and invites; publishes org.created, member.joined, invite.created. */
export function startIdentityService(config: IdentityConfig, logger: Logger): Promise<RunningService> {
  return runServiceHost(
    {
      name: 'identity',
      database: {
        schema: IDENTITY_SCHEMA,
        entities: IDENTITY_ENTITIES,
        migrations: IDENTITY_MIGRATIONS,
        publishesEvents: true,
      },
      config,
      logger,
    },
    async (host) => {
      const service = new IdentityService(
        new PostgresIdentityStore(host.orm, () => host.wakeOutbox()),
        {
          inviteTtlHours: config.INVITE_TTL_HOURS,
          emailsPerOrgPerDay: config.OUTBOUND_EMAILS_PER_ORG_PER_DAY,
          emailsPerRecipientPerDay: config.OUTBOUND_EMAILS_PER_RECIPIENT_PER_DAY,
          emailsPerRecipientAllOrgsPerDay: config.OUTBOUND_EMAILS_PER_RECIPIENT_ALL_ORGS_PER_DAY,
          sealingKey: Buffer.from(config.SECRET_SEALING_KEY, 'base64'),
        },
        { now: () => new Date() },
        { newId: () => randomUUID() },
      );
      return [
        registerService(
          'identity.v1.IdentityService',
          IdentityServiceService,
          identityGrpcHandlers(service),
          logger,
          // The notifier e-mails an organization's admins (a failed payment); it may do nothing else here.
          { extraCallers: { listMembers: ['notification'] } },
        ),
      ];
    },
  );
}
