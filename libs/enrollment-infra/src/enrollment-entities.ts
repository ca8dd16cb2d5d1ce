import { EntitySchema, type Opt } from '@mikro-orm/postgresql';
import { ProcessedEventEntity } from '@sts/db/processed-events';
import { DEVICE_STATUSES, type Device } from '@sts/enrollment-domain/enrollment-model';
import type { StoredEnrollmentCode, StoredEnrollmentKey } from '@sts/enrollment-domain/enrollment-ports';
import { OutboxEntity } from '@sts/outbox/outbox';

/**
 * The tables of the `enrollment` schema, as its migrations (enrollment-migrations.ts) leave them: the one
 * description the store queries by, checked against the migrated schema by enrollment-entities.int-spec.ts.
 * An `enum` property is a text column with PostgreSQL's `<table>_<column>_check` constraint listing the
 * values. Indexes with an `expression` are written as PostgreSQL prints them (`pg_get_indexdef`), which the
 * check compares; the trigram indexes name the operator class in this schema, where migration 0002 puts
 * pg_trgm in a database that does not have it yet.
 *
 * What MikroORM 6's metadata cannot describe, and the check therefore does not compare: the function
 * `enrollment.retry_unless` (migration 0001), the extension pg_trgm (0002), and `fillfactor = 70` of
 * `enrollment_codes` (0001).
 */

/** At most one current key per organization; the key is sealed (AES-256-GCM) and hashed (SHA-256). */
export const EnrollmentKeyEntity = new EntitySchema<StoredEnrollmentKey>({
  name: 'EnrollmentKey',
  tableName: 'enrollment_keys',
  properties: {
    orgId: { type: 'uuid', primary: true, fieldName: 'org_id' },
    keyHash: { type: 'character', length: 64, fieldName: 'key_hash', unique: 'enrollment_keys_key_hash_key' },
    keySealed: { type: 'text', fieldName: 'key_sealed' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
});

/**
 * A device as stored: the device, the SHA-256 of its current token, and an administrator's one-time
 * approval to re-enroll it without that token.
 */
export type DeviceRow = Device & { tokenHash: string; reEnrollmentAllowedUntil: Opt<Date> | null };

export const DeviceEntity = new EntitySchema<DeviceRow>({
  name: 'Device',
  tableName: 'devices',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'uuid', fieldName: 'org_id' },
    // A machine is enrolled in one organization at most: concurrent enrollments elsewhere collide here.
    machineId: { type: 'text', fieldName: 'machine_id', unique: 'devices_machine_id_key' },
    hostname: { type: 'text' },
    status: { enum: true, items: [...DEVICE_STATUSES], columnType: 'text' },
    metadata: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    tokenHash: { type: 'character', length: 64, fieldName: 'token_hash', unique: 'devices_token_hash_key' },
    enrolledAt: { type: 'datetime', fieldName: 'enrolled_at' },
    lastSeenAt: { type: 'datetime', fieldName: 'last_seen_at' },
    reEnrollmentAllowedUntil: { type: 'datetime', fieldName: 're_enrollment_allowed_until', nullable: true },
  },
  checks: [
    { name: 'devices_metadata_check', property: 'metadata', expression: `jsonb_typeof(metadata) = 'object'` },
  ],
  indexes: [
    // Keyset pages of an organization, all devices or one status.
    { name: 'devices_org_enrolled_idx', properties: ['orgId', 'enrolledAt', 'id'] },
    { name: 'devices_org_status_enrolled_idx', properties: ['orgId', 'status', 'enrolledAt', 'id'] },
    // `?q=` (any part of a hostname or machine id): trigram indexes with a 256 kB pending list (migration 0002).
    {
      name: 'devices_hostname_trgm_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING gin (hostname ${table.schema}.gin_trgm_ops) WITH (gin_pending_list_limit='256')`,
    },
    {
      name: 'devices_machine_id_trgm_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING gin (machine_id ${table.schema}.gin_trgm_ops) WITH (gin_pending_list_limit='256')`,
    },
  ],
});

/**
 * Codes are stored as HMAC-SHA256 only. No index on `consumedByDeviceId`, and room left in each page
 * (fillfactor 70, not described here): consuming a code is then a HOT update (no index changes).
 */
export const EnrollmentCodeEntity = new EntitySchema<StoredEnrollmentCode>({
  name: 'EnrollmentCode',
  tableName: 'enrollment_codes',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'uuid', fieldName: 'org_id' },
    codeHash: { type: 'character', length: 64, fieldName: 'code_hash' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    expiresAt: { type: 'datetime', fieldName: 'expires_at' },
    consumedAt: { type: 'datetime', fieldName: 'consumed_at', nullable: true },
    consumedByDeviceId: { type: 'uuid', fieldName: 'consumed_by_device_id', nullable: true },
  },
  uniques: [{ name: 'enrollment_codes_org_code_hash_key', properties: ['orgId', 'codeHash'] }],
});

export const ENROLLMENT_ENTITIES = [
  EnrollmentKeyEntity,
  DeviceEntity,
  EnrollmentCodeEntity,
  OutboxEntity,
  ProcessedEventEntity,
];
