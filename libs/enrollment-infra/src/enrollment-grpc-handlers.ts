import { invalidField } from '@sts/errors/app-error';
import { isUuid } from '@sts/vocabulary/identifiers';
import {
  normalizeDeviceQuery,
  parseMetadataJson,
  validateDeviceInput,
} from '@sts/enrollment-domain/device-input';
import type { DeviceStatus, ListedDevice } from '@sts/enrollment-domain/enrollment-model';
import type { EnrollmentService } from '@sts/enrollment-domain/enrollment-service';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import { toPage, toPageRequest, type PageRequest } from '@sts/pagination/keyset-cursor';
import {
  DeviceStatus as ProtoDeviceStatus,
  type Device as ProtoDevice,
  type EnrollmentServiceService,
} from '@sts/proto/gen/enrollment/v1/enrollment';
import { z } from 'zod';

const STATUS_TO_PROTO: Record<DeviceStatus, ProtoDeviceStatus> = {
  active: ProtoDeviceStatus.DEVICE_STATUS_ACTIVE,
  disabled: ProtoDeviceStatus.DEVICE_STATUS_DISABLED,
};

/** The status filter: unspecified means any. */
function statusFilterFromProto(status: ProtoDeviceStatus): DeviceStatus | null {
  switch (status) {
    case ProtoDeviceStatus.DEVICE_STATUS_UNSPECIFIED:
      return null;
    case ProtoDeviceStatus.DEVICE_STATUS_ACTIVE:
      return 'active';
    case ProtoDeviceStatus.DEVICE_STATUS_DISABLED:
      return 'disabled';
    default:
      throw invalidField('status', 'must be active or disabled');
  }
}

/** Organization ids come from the caller's verified context; anything but one of ours is a bug upstream. */
function requireOrgId(value: string): string {
  if (!value) throw invalidField('org_id', 'is required');
  if (!isUuid(value)) throw invalidField('org_id', 'must be an organization id');
  return value;
}

function pageFrom(limit: number, cursor: string): PageRequest {
  const page = toPageRequest(limit, cursor);
  if (page.after && !isUuid(page.after.id)) throw invalidField('cursor', 'invalid cursor');
  return page;
}

const emailSchema = z.email().max(254);
const NAME_MAX_LENGTH = 200;

/** Names shown in an e-mail: control characters become spaces, length is bounded. */
function displayName(value: string): string {
  return [...value.replace(/\p{Cc}/gu, ' ').trim()].slice(0, NAME_MAX_LENGTH).join('');
}

function toProtoDevice(device: ListedDevice): ProtoDevice {
  return {
    id: device.id,
    name: device.hostname,
    machineId: device.machineId,
    status: STATUS_TO_PROTO[device.status],
    enrolledAt: device.enrolledAt,
    lastSeenAt: device.lastSeenAt,
    metadataJson: device.metadataJson,
  };
}

/** gRPC `enrollment.v1.EnrollmentService`: translation between the wire contract and the domain. */
export function enrollmentGrpcHandlers(
  service: EnrollmentService,
): AsyncHandlers<typeof EnrollmentServiceService> {
  return {
    getEnrollmentKey: async (request) => {
      const key = await service.getEnrollmentKey(requireOrgId(request.orgId));
      return { key: { key: key.key, createdAt: key.createdAt } };
    },
    rotateEnrollmentKey: async (request) => {
      const key = await service.rotateEnrollmentKey(requireOrgId(request.orgId));
      return { key: { key: key.key, createdAt: key.createdAt } };
    },
    revokeEnrollmentKey: async (request) => {
      await service.revokeEnrollmentKey(requireOrgId(request.orgId));
      return {};
    },
    createEnrollmentCodes: async (request) => {
      const codes = await service.createEnrollmentCodes(
        requireOrgId(request.orgId),
        request.count === 0 ? 1 : request.count,
      );
      return { codes: codes.map((c) => ({ code: c.code, expiresAt: c.expiresAt })) };
    },
    emailEnrollmentCode: async (request) => {
      const orgId = requireOrgId(request.orgId);
      const email = emailSchema.safeParse(request.email.trim());
      if (!email.success) throw invalidField('email', 'must be an e-mail address');
      const orgName = displayName(request.orgName);
      if (!orgName) throw invalidField('org_name', 'is required');
      const { expiresAt } = await service.emailEnrollmentCode({
        orgId,
        email: email.data,
        requestedByName: displayName(request.requestedByName) || orgName,
        orgName,
      });
      return { expiresAt };
    },
    enrollDevice: async (request) => {
      const device = validateDeviceInput({
        machineId: request.machineId,
        hostname: request.hostname,
        metadata: parseMetadataJson(request.metadataJson),
      });
      const result = await service.enrollDevice({
        enrollmentKey: request.enrollmentKey,
        code: request.code,
        deviceToken: request.deviceToken || null,
        ...device,
      });
      return {
        deviceId: result.deviceId,
        orgId: result.orgId,
        deviceToken: result.deviceToken,
        reEnrolled: result.reEnrolled,
      };
    },
    allowReEnrollment: async (request) => {
      const { allowedUntil } = await service.allowReEnrollment(requireOrgId(request.orgId), request.deviceId);
      return { allowedUntil };
    },
    listDevices: async (request) => {
      const orgId = requireOrgId(request.orgId);
      const page = pageFrom(request.limit, request.cursor);
      const filter = {
        status: statusFilterFromProto(request.status),
        query: normalizeDeviceQuery(request.query),
      };
      const rows = await service.listDevices(orgId, filter, page);
      const { items, nextCursor } = toPage(rows, page.limit, (d) => ({
        at: d.enrolledAt.toISOString(),
        id: d.id,
      }));
      return { devices: items.map(toProtoDevice), nextCursor };
    },
    disableDevice: async (request) => {
      await service.setDeviceStatus(requireOrgId(request.orgId), request.deviceId, 'disabled');
      return {};
    },
    enableDevice: async (request) => {
      await service.setDeviceStatus(requireOrgId(request.orgId), request.deviceId, 'active');
      return {};
    },
    deleteDevice: async (request) => {
      await service.deleteDevice(requireOrgId(request.orgId), request.deviceId);
      return {};
    },
    authenticateDevice: async (request) => {
      const device = await service.authenticateDevice(request.deviceToken);
      return { deviceId: device.deviceId, orgId: device.orgId, status: STATUS_TO_PROTO[device.status] };
    },
  };
}
