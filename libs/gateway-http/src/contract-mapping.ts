import { AppError } from '@sts/errors/app-error';
import {
  BillingCycle,
  LicenseStatus,
  Plan,
  type License as ProtoLicense,
} from '@sts/proto/gen/billing/v1/billing';
import {
  Role as ProtoRole,
  type Invite as ProtoInvite,
  type Member as ProtoMember,
} from '@sts/proto/gen/identity/v1/identity';
import type { Notification as ProtoNotification } from '@sts/proto/gen/notification/v1/notification';
import {
  DeviceStatus,
  type Device as ProtoDevice,
  type EmailEnrollmentCodeResponse,
  type EnrollmentCode as ProtoEnrollmentCode,
  type EnrollmentKey as ProtoEnrollmentKey,
} from '@sts/proto/gen/enrollment/v1/enrollment';
import type { z } from 'zod';
import { isoTimestamp } from './iso-timestamp';
import type {
  devicePayload,
  enrollmentCodePayload,
  enrollmentKeyPayload,
  invitePayload,
  licensePayload,
  memberPayload,
  notificationPayload,
} from './contract-schemas';
import type { Role } from './contract-schemas';
import { required } from './upstream-answer';

/** Translation between the gRPC contracts and the public REST contract's JSON shapes. */

const ROLE_TO_CONTRACT: Record<ProtoRole, Role | null> = {
  [ProtoRole.ROLE_ORG_ADMIN]: 'ORG_ADMIN',
  [ProtoRole.ROLE_ANALYST]: 'ANALYST',
  [ProtoRole.ROLE_APP_USER]: 'APP_USER',
  [ProtoRole.ROLE_UNSPECIFIED]: null,
  [ProtoRole.UNRECOGNIZED]: null,
};

export const ROLE_TO_PROTO: Record<Role, ProtoRole> = {
  ORG_ADMIN: ProtoRole.ROLE_ORG_ADMIN,
  ANALYST: ProtoRole.ROLE_ANALYST,
  APP_USER: ProtoRole.ROLE_APP_USER,
};

export function roleFromProto(role: ProtoRole): Role {
  const mapped = ROLE_TO_CONTRACT[role];
  if (!mapped) throw new AppError('INTERNAL', `upstream returned role ${role}`);
  return mapped;
}

export function memberToContract(member: ProtoMember): z.infer<typeof memberPayload> {
  return {
    id: member.id,
    email: member.email,
    name: member.name,
    role: roleFromProto(member.role),
    dashboard_access: member.dashboardAccess,
    joined_at: isoOf(member.joinedAt),
  };
}

export function inviteToContract(invite: ProtoInvite): z.infer<typeof invitePayload> {
  return {
    id: invite.id,
    email: invite.email,
    role: roleFromProto(invite.role),
    created_at: isoOf(invite.createdAt),
    expires_at: isoOf(invite.expiresAt),
  };
}

export function notificationToContract(notification: ProtoNotification): z.infer<typeof notificationPayload> {
  return {
    id: notification.id,
    type: notification.type,
    message: notification.message,
    read: notification.read,
    created_at: isoOf(notification.createdAt),
  };
}

/** A plan and cycle a checkout asks for (contract section 4, Billing), in billing.v1's words. */
export const CHECKOUT_PLAN_TO_PROTO = {
  basic: Plan.PLAN_BASIC,
  pro: Plan.PLAN_PRO,
  enterprise: Plan.PLAN_ENTERPRISE,
} as const;
export const CHECKOUT_CYCLE_TO_PROTO = {
  monthly: BillingCycle.BILLING_CYCLE_MONTHLY,
  annual: BillingCycle.BILLING_CYCLE_ANNUAL,
} as const;

const PLAN: Record<Plan, z.infer<typeof licensePayload>['plan'] | null> = {
  [Plan.PLAN_NONE]: 'none',
  [Plan.PLAN_BASIC]: 'basic',
  [Plan.PLAN_PRO]: 'pro',
  [Plan.PLAN_ENTERPRISE]: 'enterprise',
  [Plan.PLAN_UNSPECIFIED]: null,
  [Plan.UNRECOGNIZED]: null,
};
const STATUS: Record<LicenseStatus, z.infer<typeof licensePayload>['status'] | null> = {
  [LicenseStatus.LICENSE_STATUS_PENDING]: 'pending',
  [LicenseStatus.LICENSE_STATUS_ONBOARDING]: 'onboarding',
  [LicenseStatus.LICENSE_STATUS_ACTIVE]: 'active',
  [LicenseStatus.LICENSE_STATUS_CANCELED]: 'canceled',
  [LicenseStatus.LICENSE_STATUS_UNSPECIFIED]: null,
  [LicenseStatus.UNRECOGNIZED]: null,
};
const CYCLE: Record<BillingCycle, z.infer<typeof licensePayload>['billing_cycle'] | null> = {
  [BillingCycle.BILLING_CYCLE_MONTHLY]: 'monthly',
  [BillingCycle.BILLING_CYCLE_ANNUAL]: 'annual',
  [BillingCycle.BILLING_CYCLE_UNSPECIFIED]: null,
  [BillingCycle.UNRECOGNIZED]: null,
};

export function licenseToContract(license: ProtoLicense | undefined): z.infer<typeof licensePayload> {
  const plan = license && PLAN[license.plan];
  const status = license && STATUS[license.status];
  const cycle = license && CYCLE[license.billingCycle];
  if (!license || !plan || !status || !cycle)
    throw new AppError('INTERNAL', 'upstream returned an incomplete license');
  return { plan, status, billing_cycle: cycle, expires_at: isoOf(license.expiresAt) };
}

export function enrollmentKeyToContract(
  key: ProtoEnrollmentKey | undefined,
): z.infer<typeof enrollmentKeyPayload> {
  const present = required(key, 'enrollment key');
  return { key: present.key, created_at: isoOf(present.createdAt) };
}

export function enrollmentCodeToContract(code: ProtoEnrollmentCode): z.infer<typeof enrollmentCodePayload> {
  return { code: code.code, expires_at: isoOf(code.expiresAt) };
}

/** The answer to POST /api/enrollment-codes/email: the address the code went to, and until when it is valid. */
export function emailedEnrollmentCodeToContract(
  email: string,
  emailed: EmailEnrollmentCodeResponse,
): { email: string; expires_at: string } {
  return { email, expires_at: isoOf(emailed.expiresAt) };
}

const DEVICE_STATUS: Record<DeviceStatus, z.infer<typeof devicePayload>['status'] | null> = {
  [DeviceStatus.DEVICE_STATUS_ACTIVE]: 'active',
  [DeviceStatus.DEVICE_STATUS_DISABLED]: 'disabled',
  [DeviceStatus.DEVICE_STATUS_UNSPECIFIED]: null,
  [DeviceStatus.UNRECOGNIZED]: null,
};

export const DEVICE_STATUS_TO_PROTO: Record<z.infer<typeof devicePayload>['status'], DeviceStatus> = {
  active: DeviceStatus.DEVICE_STATUS_ACTIVE,
  disabled: DeviceStatus.DEVICE_STATUS_DISABLED,
};

/** A page of devices as the contract's JSON array, written straight from the gRPC messages: the schema serializer misses the device-page target (bench/enrollment.bench.ts). */
export function devicesToContractJson(devices: readonly ProtoDevice[]): string {
  let json = '[';
  for (let i = 0; i < devices.length; i++) {
    const device = devices[i] as ProtoDevice;
    const status = DEVICE_STATUS[device.status];
    if (!status) throw new AppError('INTERNAL', `upstream returned device status ${device.status}`);
    if (i > 0) json += ',';
    json +=
      `{"id":${JSON.stringify(device.id)},"name":${JSON.stringify(device.name)},` +
      `"machine_id":${JSON.stringify(device.machineId)},"status":"${status}",` +
      `"enrolled_at":"${isoOf(device.enrolledAt)}","last_seen_at":"${isoOf(device.lastSeenAt ?? device.enrolledAt)}",` +
      `"metadata":${metadataObjectJson(device.metadataJson)}}`;
  }
  return json + ']';
}

function metadataObjectJson(text: string): string {
  if (text === '') return '{}';
  if (text.charCodeAt(0) !== 0x7b || text.charCodeAt(text.length - 1) !== 0x7d) {
    throw new AppError('INTERNAL', 'upstream returned device metadata that is not a JSON object');
  }
  return text;
}

function isoOf(date: Date | undefined): string {
  return isoTimestamp(required(date, 'a timestamp'));
}
