import { createPromiseClient } from '@sts/grpc/grpc-client';
import type { GrpcTls } from '@sts/grpc/grpc-tls';
import { ServiceTokenIssuer } from '@sts/grpc/service-token';
import { AnalyticsServiceService } from '@sts/proto/gen/analytics/v1/analytics';
import { BillingServiceService } from '@sts/proto/gen/billing/v1/billing';
import { IdentityServiceService } from '@sts/proto/gen/identity/v1/identity';
import { NotificationServiceService } from '@sts/proto/gen/notification/v1/notification';
import { EnrollmentServiceService } from '@sts/proto/gen/enrollment/v1/enrollment';
import type { GatewayConfig } from './gateway-config';

export function createUpstreamClients(
  config: Pick<
    GatewayConfig,
    | 'IDENTITY_GRPC_ADDRESS'
    | 'NOTIFICATION_GRPC_ADDRESS'
    | 'BILLING_GRPC_ADDRESS'
    | 'ENROLLMENT_GRPC_ADDRESS'
    | 'ANALYTICS_GRPC_ADDRESS'
    | 'GRPC_DEADLINE_MS'
    | 'SERVICE_SIGNING_KEY'
  >,
  /** Mutual TLS with the services (loadGrpcTls); plaintext when null. */
  tls: GrpcTls | null,
) {
  // The gateway's own key: the services trust its public half as the gateway's, and only as that.
  const issuer = new ServiceTokenIssuer(config.SERVICE_SIGNING_KEY, 'gateway');
  const deadline = config.GRPC_DEADLINE_MS;
  const identity = createPromiseClient(
    IdentityServiceService,
    config.IDENTITY_GRPC_ADDRESS,
    deadline,
    {
      issuer,
      target: 'identity',
    },
    tls,
  );
  const notification = createPromiseClient(
    NotificationServiceService,
    config.NOTIFICATION_GRPC_ADDRESS,
    deadline,
    {
      issuer,
      target: 'notification',
    },
    tls,
  );
  const billing = createPromiseClient(
    BillingServiceService,
    config.BILLING_GRPC_ADDRESS,
    deadline,
    {
      issuer,
      target: 'billing',
    },
    tls,
  );
  const enrollment = createPromiseClient(
    EnrollmentServiceService,
    config.ENROLLMENT_GRPC_ADDRESS,
    deadline,
    {
      issuer,
      target: 'enrollment',
    },
    tls,
  );
  const analytics = createPromiseClient(
    AnalyticsServiceService,
    config.ANALYTICS_GRPC_ADDRESS,
    deadline,
    {
      issuer,
      target: 'analytics',
    },
    tls,
  );
  return {
    identity,
    notification,
    billing,
    enrollment,
    analytics,
    close() {
      analytics.close();
      identity.close();
      notification.close();
      billing.close();
      enrollment.close();
    },
  };
}

export type UpstreamClients = ReturnType<typeof createUpstreamClients>;
