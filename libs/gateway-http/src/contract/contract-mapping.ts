import { AppError } from '@sts/errors/app-error';
import {
  BILLING_CYCLE_FROM_PROTO,
  DEVICE_STATUS_FROM_PROTO as DEVICE_STATUS,
  LICENSE_STATUS_FROM_PROTO,
  PLAN_FROM_PROTO,
  INVITE_STATE_FROM_PROTO,
  ROLE_FROM_PROTO,
} from '@sts/grpc/proto-enums';
import type { License as ProtoLicense } from '@sts/proto/gen/billing/v1/billing';
import type {
  Role as ProtoRole,
  Invite as ProtoInvite,
  Member as ProtoMember,
} from '@sts/proto/gen/identity/v1/identity';
import type { Notification as ProtoNotification } from '@sts/proto/gen/notification/v1/notification';
import type {
  Device as ProtoDevice,
  EmailEnrollmentCodeResponse,
  EnrollmentCode as ProtoEnrollmentCode,
  EnrollmentKey as ProtoEnrollmentKey,
} from '@sts/proto/gen/enrollment/v1/enrollment';
import type { z } from 'zod';
import type {
  enrollmentCodePayload,
  enrollmentKeyPayload,
  invitePayload,
  licensePayload,
  memberPayload,
  notificationPayload,
  devicePayload,
} from './contract-schemas';
import type { Role } from './contract-schemas';
import { fromUpstreamEnum, required } from './upstream-answer';

/**
 * Translation between the gRPC contracts and the public REST contract's JSON shapes. Enum values go
 * through their one table in @sts/grpc/proto-enums (requests use its `*_TO_PROTO` side).
 */

export function roleFromProto(role: ProtoRole): Role {
  return fromUpstreamEnum(ROLE_FROM_PROTO, role, 'role');
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
    status: fromUpstreamEnum(INVITE_STATE_FROM_PROTO, invite.state, 'invite state'),
    accepted_at: invite.acceptedAt ? isoOf(invite.acceptedAt) : null,
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

export function licenseToContract(license: ProtoLicense | undefined): z.infer<typeof licensePayload> {
  const present = required(license, 'license');
  return {
    plan: fromUpstreamEnum(PLAN_FROM_PROTO, present.plan, 'plan'),
    status: fromUpstreamEnum(LICENSE_STATUS_FROM_PROTO, present.status, 'license status'),
    billing_cycle: fromUpstreamEnum(BILLING_CYCLE_FROM_PROTO, present.billingCycle, 'billing cycle'),
    expires_at: isoOf(present.expiresAt),
  };
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

/** A device as the contract's JSON object. */
export function deviceToContract(device: ProtoDevice): z.infer<typeof devicePayload> {
  const status = DEVICE_STATUS[device.status];
  if (!status) throw new AppError('INTERNAL', `upstream returned device status ${device.status}`);
  return {
    id: device.id,
    name: device.name,
    machine_id: device.machineId,
    status,
    enrolled_at: isoOf(device.enrolledAt),
    last_seen_at: isoOf(device.lastSeenAt ?? device.enrolledAt),
    metadata: metadataObject(device.metadataJson),
  };
}

function metadataObject(text: string): Record<string, unknown> {
  let metadata: unknown;
  try {
    metadata = text === '' ? {} : JSON.parse(text);
  } catch {
    metadata = undefined;
  }
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))
    throw new AppError('INTERNAL', 'upstream returned device metadata that is not a JSON object');
  return metadata as Record<string, unknown>;
}

function isoOf(date: Date | undefined): string {
  return required(date, 'a timestamp').toISOString();
}
