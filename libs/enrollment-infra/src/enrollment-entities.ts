import { EntitySchema } from '@mikro-orm/postgresql';
import type { DeviceMetadata, DeviceStatus } from '@sts/enrollment-domain/enrollment-model';

/** Row shapes of the enrollment schema, mapped by MikroORM. Hot paths use hand-written SQL over the same tables. */
export interface EnrollmentKeyRow {
  orgId: string;
  keyHash: string;
  keySealed: string;
  createdAt: Date;
}

export interface EnrollmentCodeRow {
  id: string;
  orgId: string;
  codeHash: string;
  createdAt: Date;
  expiresAt: Date;
  consumedAt: Date | null;
  consumedByDeviceId: string | null;
}

export interface DeviceRow {
  id: string;
  orgId: string;
  machineId: string;
  hostname: string;
  status: DeviceStatus;
  metadata: DeviceMetadata;
  tokenHash: string;
  enrolledAt: Date;
  lastSeenAt: Date;
}

export const EnrollmentKeyEntity = new EntitySchema<EnrollmentKeyRow>({
  name: 'EnrollmentKey',
  tableName: 'enrollment_keys',
  properties: {
    orgId: { type: 'uuid', primary: true, fieldName: 'org_id' },
    keyHash: { type: 'text', fieldName: 'key_hash' },
    keySealed: { type: 'text', fieldName: 'key_sealed' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
});

export const EnrollmentCodeEntity = new EntitySchema<EnrollmentCodeRow>({
  name: 'EnrollmentCode',
  tableName: 'enrollment_codes',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'uuid', fieldName: 'org_id' },
    codeHash: { type: 'text', fieldName: 'code_hash' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    expiresAt: { type: 'datetime', fieldName: 'expires_at' },
    consumedAt: { type: 'datetime', fieldName: 'consumed_at', nullable: true },
    consumedByDeviceId: { type: 'uuid', fieldName: 'consumed_by_device_id', nullable: true },
  },
});

export const DeviceEntity = new EntitySchema<DeviceRow>({
  name: 'Device',
  tableName: 'devices',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'uuid', fieldName: 'org_id' },
    machineId: { type: 'text', fieldName: 'machine_id' },
    hostname: { type: 'text' },
    status: { type: 'text' },
    metadata: { type: 'json' },
    tokenHash: { type: 'text', fieldName: 'token_hash' },
    enrolledAt: { type: 'datetime', fieldName: 'enrolled_at' },
    lastSeenAt: { type: 'datetime', fieldName: 'last_seen_at' },
  },
});

export const ENROLLMENT_ENTITIES = [EnrollmentKeyEntity, EnrollmentCodeEntity, DeviceEntity];
