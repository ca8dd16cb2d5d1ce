import {
  normalizeDeviceQuery,
  parseMetadataJson,
  validateDeviceInput,
} from '@sts/enrollment-domain/device-input';
import type { ListedDevice } from '@sts/enrollment-domain/enrollment-model';
import type { EnrollmentService } from '@sts/enrollment-domain/enrollment-service';
import { DEVICE_STATUS_FROM_PROTO, DEVICE_STATUS_TO_PROTO } from '@sts/grpc/proto-enums';
import { enumFrom, requireEmail, requireText, requireUuid, requireUuidField } from '@sts/grpc/request-checks';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import { toPage, toPageRequest } from '@sts/pagination/keyset-cursor';
import {
  DeviceStatus as ProtoDeviceStatus,
  type Device as ProtoDevice,
  type EnrollmentServiceService,
} from '@sts/proto/gen/enrollment/v1/enrollment';

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
    status: DEVICE_STATUS_TO_PROTO[device.status],
    enrolledAt: device.enrolledAt,
    lastSeenAt: device.lastSeenAt,
    metadataJson: device.metadataJson,
  };
}

/**
 * gRPC `enrollment.v1.EnrollmentService`: translation between the wire contract and the domain.
 * Organization ids come from the caller's verified context, so a missing or malformed one is a bug
 * upstream (VALIDATION_FAILED); device ids come from the client's path (DEVICE_NOT_FOUND).
 */
export function enrollmentGrpcHandlers(
  service: EnrollmentService,
): AsyncHandlers<typeof EnrollmentServiceService> {
  return {
    getEnrollmentKey: async (request) => {
      const key = await service.getEnrollmentKey(requireUuidField(request.orgId, 'org_id'));
      return { key: { key: key.key, createdAt: key.createdAt } };
    },
    rotateEnrollmentKey: async (request) => {
      const key = await service.rotateEnrollmentKey(requireUuidField(request.orgId, 'org_id'));
      return { key: { key: key.key, createdAt: key.createdAt } };
    },
    revokeEnrollmentKey: async (request) => {
      await service.revokeEnrollmentKey(requireUuidField(request.orgId, 'org_id'));
      return {};
    },
    createEnrollmentCodes: async (request) => {
      const codes = await service.createEnrollmentCodes(
        requireUuidField(request.orgId, 'org_id'),
        request.count === 0 ? 1 : request.count,
      );
      return { codes: codes.map((c) => ({ code: c.code, expiresAt: c.expiresAt })) };
    },
    emailEnrollmentCode: async (request) => {
      const orgId = requireUuidField(request.orgId, 'org_id');
      const email = requireEmail(request.email, 'email');
      const orgName = requireText(displayName(request.orgName), 'org_name');
      const { expiresAt } = await service.emailEnrollmentCode({
        orgId,
        email,
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
      const { allowedUntil } = await service.allowReEnrollment(
        requireUuidField(request.orgId, 'org_id'),
        requireUuid(request.deviceId, 'DEVICE_NOT_FOUND'),
      );
      return { allowedUntil };
    },
    listDevices: async (request) => {
      const orgId = requireUuidField(request.orgId, 'org_id');
      const page = toPageRequest(request.limit, request.cursor);
      const filter = {
        // The filter is optional: unspecified means any status.
        status:
          request.status === ProtoDeviceStatus.DEVICE_STATUS_UNSPECIFIED
            ? null
            : enumFrom(DEVICE_STATUS_FROM_PROTO, request.status, 'status'),
        query: normalizeDeviceQuery(request.query),
      };
      const rows = await service.listDevices(orgId, filter, page);
      const { items, nextCursor } = toPage(rows, page.limit, (d) => ({
        at: d.enrolledAt.toISOString(),
        id: d.id,
      }));
      return { devices: items.map(toProtoDevice), nextCursor };
    },
    getDevice: async (request) => {
      const device = await service.getDevice(
        requireUuidField(request.orgId, 'org_id'),
        requireUuid(request.deviceId, 'DEVICE_NOT_FOUND'),
      );
      return { device: toProtoDevice(device) };
    },
    disableDevice: async (request) => {
      await service.setDeviceStatus(
        requireUuidField(request.orgId, 'org_id'),
        requireUuid(request.deviceId, 'DEVICE_NOT_FOUND'),
        'disabled',
      );
      return {};
    },
    enableDevice: async (request) => {
      await service.setDeviceStatus(
        requireUuidField(request.orgId, 'org_id'),
        requireUuid(request.deviceId, 'DEVICE_NOT_FOUND'),
        'active',
      );
      return {};
    },
    deleteDevice: async (request) => {
      await service.deleteDevice(
        requireUuidField(request.orgId, 'org_id'),
        requireUuid(request.deviceId, 'DEVICE_NOT_FOUND'),
      );
      return {};
    },
    authenticateDevice: async (request) => {
      const device = await service.authenticateDevice(request.deviceToken);
      return {
        deviceId: device.deviceId,
        orgId: device.orgId,
        status: DEVICE_STATUS_TO_PROTO[device.status],
      };
    },
  };
}
