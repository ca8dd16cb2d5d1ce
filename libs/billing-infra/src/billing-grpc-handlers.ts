import type { BillingCycle, License, LicenseStatus, Plan } from '@sts/billing-domain/billing-model';
import type { BillingService } from '@sts/billing-domain/billing-service';
import type { AsyncHandlers } from '@sts/grpc/service-types';
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

/** billing.v1.BillingService: proto in, domain call, proto out. */
export function billingGrpcHandlers(service: BillingService): AsyncHandlers<typeof BillingServiceService> {
  return {
    getLicense: async (request) => ({ license: licenseToProto(await service.getLicense(request.orgId)) }),
  };
}
