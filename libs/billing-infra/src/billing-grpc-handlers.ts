import type { BillingCycle, License, LicenseStatus, Plan } from '@sts/billing-domain/billing-model';
import type { BillingService } from '@sts/billing-domain/billing-service';
import type { PaymentEventHandler } from '@sts/billing-domain/payment-events';
import { AppError } from '@sts/errors/app-error';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import type { Logger } from '@sts/logger/create-logger';
import {
  BillingCycle as ProtoBillingCycle,
  LicenseStatus as ProtoLicenseStatus,
  Plan as ProtoPlan,
  type BillingServiceService,
  type License as ProtoLicense,
} from '@sts/proto/gen/billing/v1/billing';

const PLAN_TO_PROTO: Record<Plan, ProtoPlan> = {
  none: ProtoPlan.PLAN_NONE,
  basic: ProtoPlan.PLAN_BASIC,
  pro: ProtoPlan.PLAN_PRO,
  enterprise: ProtoPlan.PLAN_ENTERPRISE,
};

const STATUS_TO_PROTO: Record<LicenseStatus, ProtoLicenseStatus> = {
  pending: ProtoLicenseStatus.LICENSE_STATUS_PENDING,
  onboarding: ProtoLicenseStatus.LICENSE_STATUS_ONBOARDING,
  active: ProtoLicenseStatus.LICENSE_STATUS_ACTIVE,
  canceled: ProtoLicenseStatus.LICENSE_STATUS_CANCELED,
};

const CYCLE_TO_PROTO: Record<BillingCycle, ProtoBillingCycle> = {
  monthly: ProtoBillingCycle.BILLING_CYCLE_MONTHLY,
  annual: ProtoBillingCycle.BILLING_CYCLE_ANNUAL,
};

export function licenseToProto(license: License): ProtoLicense {
  return {
    orgId: license.orgId,
    plan: PLAN_TO_PROTO[license.plan],
    status: STATUS_TO_PROTO[license.status],
    billingCycle: CYCLE_TO_PROTO[license.billingCycle],
    expiresAt: license.expiresAt,
  };
}

const PLAN_FROM_PROTO = new Map<ProtoPlan, Exclude<Plan, 'none'>>([
  [ProtoPlan.PLAN_BASIC, 'basic'],
  [ProtoPlan.PLAN_PRO, 'pro'],
  [ProtoPlan.PLAN_ENTERPRISE, 'enterprise'],
]);
const CYCLE_FROM_PROTO = new Map<ProtoBillingCycle, BillingCycle>([
  [ProtoBillingCycle.BILLING_CYCLE_MONTHLY, 'monthly'],
  [ProtoBillingCycle.BILLING_CYCLE_ANNUAL, 'annual'],
]);

/** Stripe's events are at most a few hundred KB; anything far larger is not one. */
const MAX_PAYLOAD_BYTES = 1024 * 1024;
/** A Stripe-Signature header: a timestamp and a few signatures (one per active secret). */
const MAX_SIGNATURE_CHARS = 2048;

function required(value: string, path: string): string {
  if (!value.trim()) {
    throw new AppError('VALIDATION_FAILED', `${path} is required`, {
      fields: [{ path, message: 'required' }],
    });
  }
  return value;
}

/** billing.v1.BillingService: proto in (validated here), domain call, proto out. */
export function billingGrpcHandlers(
  service: BillingService,
  payments: PaymentEventHandler,
  logger: Logger,
): AsyncHandlers<typeof BillingServiceService> {
  return {
    getLicense: async (request) => ({ license: licenseToProto(await service.getLicense(request.orgId)) }),
    createCheckoutSession: async (request) => {
      const orgId = required(request.orgId, 'org_id');
      const plan = PLAN_FROM_PROTO.get(request.plan);
      const cycle = CYCLE_FROM_PROTO.get(request.billingCycle);
      if (!plan || !cycle) {
        throw new AppError('VALIDATION_FAILED', 'plan and billing_cycle are required', {
          fields: [
            ...(plan ? [] : [{ path: 'plan', message: 'must be basic, pro or enterprise' }]),
            ...(cycle ? [] : [{ path: 'cycle', message: 'must be monthly or annual' }]),
          ],
        });
      }
      const url = await service.startCheckout({
        orgId,
        plan,
        cycle,
        requestedByEmail: request.requestedByEmail.trim() || null,
      });
      return { url };
    },
    createPortalSession: async (request) => ({
      url: await service.openPortal(required(request.orgId, 'org_id')),
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
