import type { License, Plan } from '@sts/billing-domain/billing-model';
import type { BillingService } from '@sts/billing-domain/billing-service';
import type { PaymentEventHandler } from '@sts/billing-domain/payment-events';
import { AppError } from '@sts/errors/app-error';
import {
  BILLING_CYCLE_FROM_PROTO,
  BILLING_CYCLE_TO_PROTO,
  LICENSE_STATUS_TO_PROTO,
  PLAN_FROM_PROTO,
  PLAN_TO_PROTO,
} from '@sts/grpc/proto-enums';
import { enumFrom, requireText } from '@sts/grpc/request-checks';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import type { Logger } from '@sts/logger/create-logger';
import type { BillingServiceService, License as ProtoLicense } from '@sts/proto/gen/billing/v1/billing';

export function licenseToProto(license: License): ProtoLicense {
  return {
    orgId: license.orgId,
    plan: PLAN_TO_PROTO[license.plan],
    status: LICENSE_STATUS_TO_PROTO[license.status],
    billingCycle: BILLING_CYCLE_TO_PROTO[license.billingCycle],
    expiresAt: license.expiresAt,
  };
}

/** The plans a checkout can buy: `none` is the license of an organization that has bought nothing. */
const CHECKOUT_PLANS: readonly Exclude<Plan, 'none'>[] = ['basic', 'pro', 'enterprise'];

/** Stripe's events are at most a few hundred KB; anything far larger is not one. */
const MAX_PAYLOAD_BYTES = 1024 * 1024;
/** A Stripe-Signature header: a timestamp and a few signatures (one per active secret). */
const MAX_SIGNATURE_CHARS = 2048;

/** billing.v1.BillingService: proto in (validated here), domain call, proto out. */
export function billingGrpcHandlers(
  service: BillingService,
  payments: PaymentEventHandler,
  logger: Logger,
): AsyncHandlers<typeof BillingServiceService> {
  return {
    getLicense: async (request) => ({
      license: licenseToProto(await service.getLicense(requireText(request.orgId, 'org_id'))),
    }),
    createCheckoutSession: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const plan = enumFrom(PLAN_FROM_PROTO, request.plan, 'plan', CHECKOUT_PLANS);
      // `cycle`, as the public request's body names it.
      const cycle = enumFrom(BILLING_CYCLE_FROM_PROTO, request.billingCycle, 'cycle');
      const url = await service.startCheckout({
        orgId,
        plan,
        cycle,
        requestedByEmail: request.requestedByEmail.trim() || null,
      });
      return { url };
    },
    createPortalSession: async (request) => ({
      url: await service.openPortal(requireText(request.orgId, 'org_id')),
    }),
    handlePaymentEvent: async (request) => {
      if (request.payload.length > MAX_PAYLOAD_BYTES) throw new AppError('PAYLOAD_TOO_LARGE');
      if (!request.signature || request.signature.length > MAX_SIGNATURE_CHARS) {
        throw new AppError('WEBHOOK_SIGNATURE_INVALID', 'The Stripe-Signature header is missing or too long');
      }
      const result = await payments.handle(request.payload, request.signature);
      if (result.outcome === 'ignored') {
        logger.info({ orgId: result.orgId, reason: result.reason }, 'payment event ignored');
      }
      return { orgId: result.orgId ?? '', outcome: result.outcome };
    },
  };
}
