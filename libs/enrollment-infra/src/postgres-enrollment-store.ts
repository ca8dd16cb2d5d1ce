import { LockMode, type MikroORM } from '@mikro-orm/postgresql';
import { UnitOfWork, type WorkScope } from '@sts/db/unit-of-work';
import { isUuid } from '@sts/vocabulary/identifiers';
import type {
  Device,
  DeviceFilter,
  DeviceIdentity,
  DeviceStatus,
  ListedDevice,
} from '@sts/enrollment-domain/enrollment-model';
import type {
  CodeOutcome,
  CodeState,
  ConsumeCodeInput,
  DeviceSighting,
  EnrollmentRepositories,
  EnrollmentStore,
  EnrollmentTarget,
  StoredEnrollmentCode,
  StoredEnrollmentKey,
} from '@sts/enrollment-domain/enrollment-ports';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import { enqueueEvent, outboxInsertPart } from '@sts/outbox/outbox';
import { DeviceEntity, EnrollmentCodeEntity, EnrollmentKeyEntity } from './enrollment-entities';

/** A page's device as the raw page query returns it (`LISTED_DEVICE_COLUMNS`). */
interface ListedDeviceSqlRow {
  id: string;
  org_id: string;
  machine_id: string;
  hostname: string;
  status: DeviceStatus;
  metadata_json: string;
  enrolled_at_ms: number;
  last_seen_at_ms: number;
}

/**
 * A page's columns as the list passes them on: metadata as its JSON text, times as epoch
 * milliseconds (a float8 parses in a fifth of the time node-postgres takes for a timestamptz).
 */
const LISTED_DEVICE_COLUMNS =
  'id, org_id, machine_id, hostname, status, metadata::text as metadata_json, ' +
  '(extract(epoch from enrolled_at) * 1000)::float8 as enrolled_at_ms, ' +
  '(extract(epoch from last_seen_at) * 1000)::float8 as last_seen_at_ms';

/** A device's columns without its token hash and re-enrollment approval. */
const DEVICE_FIELDS: (keyof Device)[] = [
  'id',
  'orgId',
  'machineId',
  'hostname',
  'status',
  'metadata',
  'enrolledAt',
  'lastSeenAt',
];

/** EnrollmentStore over PostgreSQL (schema `enrollment`). `onCommitWithEvents` lets the outbox relay publish at once. */
export class PostgresEnrollmentStore implements EnrollmentStore {
  private readonly unit: UnitOfWork;

  constructor(orm: MikroORM, onCommitWithEvents?: () => void) {
    this.unit = new UnitOfWork(orm, { outbox: enqueueEvent, onCommitWithEvents });
  }

  transaction<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T> {
    return this.unit.transaction((scope) => work(new PostgresEnrollmentRepositories(scope)));
  }

  read<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T> {
    return this.unit.autocommit((scope) => work(new PostgresEnrollmentRepositories(scope)));
  }

  /**
   * Raw SQL because enrollment's throughput target (bench/enrollment.bench.ts: ≥ 500/s, 866–1,410/s
   * measured) wants one round trip.
   * One statement, atomic without BEGIN/COMMIT:
   * - `key`: the presented key is still the organization's (rotation and revocation win at once).
   * - `consumed`: the conditional update takes the code. Concurrent consumers queue on the row lock;
   *   after the winner commits, the others re-check `consumed_at is null` and match nothing.
   * - `written`: the device insert or re-enrollment update, only if the code was consumed. A machine
   *   id taken meanwhile fails the insert (unique violation); a device deleted meanwhile, or one that no
   *   longer accepts the caller's proof (token replaced, approval used or expired), makes the update
   *   match nothing, and `retry_unless` then fails the whole statement, so no code is spent.
   * - `event`: the outbox row (from the outbox library), only if the device was written.
   * - The last column says why a code did not match. It reads the statement's snapshot, so a code
   *   consumed by a transaction that committed while we waited for its lock still looks live there:
   *   that case is `used` too.
   */
  async consumeCode(input: ConsumeCodeInput): Promise<CodeOutcome> {
    const { keyHash, orgId, codeHash, deviceId, now, write, event } = input;
    let writeSql: string;
    let writeParams: unknown[];
    if (write.kind === 'insert') {
      const d = write.device;
      writeSql = `insert into enrollment.devices
          (id, org_id, machine_id, hostname, status, metadata, token_hash, enrolled_at, last_seen_at)
        select ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ? where exists (select 1 from consumed)
        returning id`;
      writeParams = [
        d.id,
        d.orgId,
        d.machineId,
        d.hostname,
        d.status,
        JSON.stringify(d.metadata),
        write.tokenHash,
        d.enrolledAt,
        d.lastSeenAt,
      ];
    } else {
      // The proof is checked again here: a token replaced or an approval used up meanwhile matches nothing.
      writeSql = `update enrollment.devices
        set hostname = ?, metadata = ?::jsonb, token_hash = ?, last_seen_at = ?, re_enrollment_allowed_until = null
        where id = ? and org_id = ? and exists (select 1 from consumed)
          and (token_hash = ? or re_enrollment_allowed_until > ?)
        returning id`;
      writeParams = [
        write.hostname,
        JSON.stringify(write.metadata),
        write.tokenHash,
        write.lastSeenAt,
        write.deviceId,
        orgId,
        write.presentedTokenHash,
        now,
      ];
    }
    const outboxRow = outboxInsertPart(
      'enrollment',
      event.type,
      event.data,
      'exists (select 1 from written)',
      now,
    );
    // A unique violation (the machine id taken meanwhile) or `retry_unless`'s serialization failure
    // comes out of `autocommit` as UniqueConflict: the statement changed nothing.
    return this.unit.autocommit(
      async ({ sql }): Promise<CodeOutcome> => {
        const row = await sql.one<{
          key_ok: boolean;
          consumed: boolean;
          state: 'used' | 'expired' | null;
        }>(
          `with key as (
               select 1 from enrollment.enrollment_keys where org_id = ? and key_hash = ?
             ), consumed as (
               update enrollment.enrollment_codes set consumed_at = ?, consumed_by_device_id = ?
               where org_id = ? and code_hash = ? and consumed_at is null and expires_at > ? and exists (select 1 from key)
               returning id
             ), written as (${writeSql}
             ), event as (${outboxRow.sql}
             )
             select exists (select 1 from key) as key_ok,
                    exists (select 1 from consumed) as consumed,
                    enrollment.retry_unless(
                      (select count(*) from consumed) = (select count(*) from event),
                      'device changed during enrollment') as complete,
                    (select case when c.expires_at <= ? and c.consumed_at is null then 'expired' else 'used' end
                       from enrollment.enrollment_codes c where c.org_id = ? and c.code_hash = ?) as state`,
          [
            orgId,
            keyHash,
            now,
            deviceId,
            orgId,
            codeHash,
            now,
            ...writeParams,
            ...outboxRow.params,
            now,
            orgId,
            codeHash,
          ],
        );
        if (!row) throw new Error('consume statement returned no row');
        if (!row.key_ok) return 'key-invalid';
        if (row.consumed) return 'consumed';
        return row.state ?? 'unknown';
      },
      { committedEvents: (outcome) => outcome === 'consumed' },
    );
  }
}

class PostgresEnrollmentRepositories implements EnrollmentRepositories {
  constructor(private readonly scope: WorkScope) {}

  async findKey(orgId: string): Promise<StoredEnrollmentKey | null> {
    if (!isUuid(orgId)) return null;
    const row = await this.scope.em.findOne(EnrollmentKeyEntity, { orgId });
    return row
      ? { orgId: row.orgId, keyHash: row.keyHash, keySealed: row.keySealed, createdAt: row.createdAt }
      : null;
  }

  async upsertKey(key: StoredEnrollmentKey): Promise<void> {
    await this.scope.em.upsert(EnrollmentKeyEntity, {
      orgId: key.orgId,
      keyHash: key.keyHash,
      keySealed: key.keySealed,
      createdAt: key.createdAt,
    });
  }

  async deleteKey(orgId: string): Promise<boolean> {
    if (!isUuid(orgId)) return false;
    return (await this.scope.em.nativeDelete(EnrollmentKeyEntity, { orgId })) > 0;
  }

  async insertCodes(codes: StoredEnrollmentCode[]): Promise<void> {
    if (codes.length === 0) return;
    await this.scope.em.insertMany(
      EnrollmentCodeEntity,
      codes.map((code) => ({
        id: code.id,
        orgId: code.orgId,
        codeHash: code.codeHash,
        createdAt: code.createdAt,
        expiresAt: code.expiresAt,
        consumedAt: null,
        consumedByDeviceId: null,
      })),
    );
  }

  async lockLiveCodeCount(orgId: string, now: Date): Promise<number> {
    if (!isUuid(orgId)) return 0;
    // Raw: a transaction-level advisory lock per organization, which the ORM does not express.
    await this.scope.sql.run(`select pg_advisory_xact_lock(hashtextextended(?, 0))`, [
      `enrollment-codes:${orgId}`,
    ]);
    return this.scope.em.count(EnrollmentCodeEntity, { orgId, consumedAt: null, expiresAt: { $gt: now } });
  }

  async purgeCodes(orgId: string, expiredBefore: Date): Promise<number> {
    if (!isUuid(orgId)) return 0;
    return this.scope.em.nativeDelete(EnrollmentCodeEntity, { orgId, expiresAt: { $lt: expiredBefore } });
  }

  async findEnrollmentTarget(
    keyHash: string,
    machineId: string,
    codeHash: string | null,
    deviceTokenHash: string | null,
    now: Date,
  ): Promise<EnrollmentTarget | null> {
    // Raw: the key, the machine's device and the code's state in one round trip on every enrollment
    // (bench/enrollment.bench.ts), with SQL expressions the ORM has no form for.
    const row = await this.scope.sql.one<{
      key_org_id: string;
      device_id: string | null;
      device_org_id: string | null;
      proven: boolean | null;
      code_state: CodeState | null;
    }>(
      `select k.org_id as key_org_id, d.id as device_id, d.org_id as device_org_id,
              coalesce(d.token_hash = ?, false) or coalesce(d.re_enrollment_allowed_until > ?, false) as proven,
              (select case when c.consumed_at is not null then 'used' when c.expires_at <= ? then 'expired' else 'live' end
                 from enrollment.enrollment_codes c where c.org_id = k.org_id and c.code_hash = ?) as code_state
       from enrollment.enrollment_keys k
       left join enrollment.devices d on d.machine_id = ?
       where k.key_hash = ?`,
      [deviceTokenHash, now, now, codeHash ?? '', machineId, keyHash],
    );
    if (!row) return null;
    return {
      orgId: row.key_org_id,
      existing:
        row.device_id && row.device_org_id
          ? { id: row.device_id, orgId: row.device_org_id, proven: row.proven === true }
          : null,
      code: codeHash ? (row.code_state ?? 'unknown') : 'unknown',
    };
  }

  async lockDevice(orgId: string, deviceId: string): Promise<Device | null> {
    if (!isUuid(orgId) || !isUuid(deviceId)) return null;
    const row = await this.scope.em.findOne(
      DeviceEntity,
      { orgId, id: deviceId },
      { fields: DEVICE_FIELDS, lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    return row ? toDevice(row) : null;
  }

  async setDeviceStatus(orgId: string, deviceId: string, status: DeviceStatus): Promise<void> {
    await this.scope.em.nativeUpdate(DeviceEntity, { orgId, id: deviceId }, { status });
  }

  async allowReEnrollment(orgId: string, deviceId: string, until: Date): Promise<void> {
    await this.scope.em.nativeUpdate(
      DeviceEntity,
      { orgId, id: deviceId },
      { reEnrollmentAllowedUntil: until },
    );
  }

  async deleteDevice(orgId: string, deviceId: string): Promise<void> {
    const em = this.scope.em;
    if ((await em.nativeDelete(DeviceEntity, { orgId, id: deviceId })) === 0) return;
    // Codes keep no reference to a device that is gone (there is no foreign key: no index to maintain).
    await em.nativeUpdate(
      EnrollmentCodeEntity,
      { orgId, consumedByDeviceId: deviceId },
      { consumedByDeviceId: null },
    );
  }

  async findDevice(orgId: string, deviceId: string): Promise<ListedDevice | null> {
    if (!isUuid(orgId) || !isUuid(deviceId)) return null;
    // Raw: the list's columns, so that one device reads exactly as the list gives it (metadata's text too).
    const [row] = await this.scope.sql.all<ListedDeviceSqlRow>(
      `select ${LISTED_DEVICE_COLUMNS} from enrollment.devices where org_id = ? and id = ?`,
      [orgId, deviceId],
    );
    return row ? toListedDevice(row) : null;
  }

  async listDevices(orgId: string, filter: DeviceFilter, page: PageRequest): Promise<ListedDevice[]> {
    if (!isUuid(orgId) || (page.after && !isUuid(page.after.id))) return [];
    // Raw: the device page's keyset query (bench/enrollment.bench.ts: p99 21–26 ms at 500 pages/s, target
    // < 50 ms, docs/benchmarks.md); the query builder's form of it has not been measured against it yet.
    const { sql, params } = listDevicesQuery(orgId, filter, page);
    const rows = await this.scope.sql.all<ListedDeviceSqlRow>(sql, params);
    return rows.map(toListedDevice);
  }

  async findDeviceByTokenHash(tokenHash: string): Promise<DeviceIdentity | null> {
    const row = await this.scope.em.findOne(
      DeviceEntity,
      { tokenHash },
      { fields: ['id', 'orgId', 'status'] },
    );
    return row ? { deviceId: row.id, orgId: row.orgId, status: row.status } : null;
  }

  async markSeen(sightings: readonly DeviceSighting[]): Promise<number> {
    const valid = sightings.filter((s) => isUuid(s.orgId) && isUuid(s.deviceId));
    if (valid.length === 0) return 0;
    // Raw: one statement for many devices (an update from a VALUES list), so last_seen_at costs one
    // write per flush of the telemetry consumer, not one per batch.
    return this.scope.sql.run(
      `update enrollment.devices d set last_seen_at = v.at
       from (values ${valid.map(() => '(?::uuid, ?::uuid, ?::timestamptz)').join(', ')}) as v(org_id, id, at)
       where d.id = v.id and d.org_id = v.org_id and d.last_seen_at < v.at`,
      valid.flatMap((s) => [s.orgId, s.deviceId, s.at]),
    );
  }

  emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void> {
    return this.scope.emit(type, data);
  }
}

/** A page of an organization's devices (placeholders `?`); exported so tests can inspect its plan. */
export function listDevicesQuery(
  orgId: string,
  filter: DeviceFilter,
  page: PageRequest,
): { sql: string; params: unknown[] } {
  const conditions = ['org_id = ?'];
  const params: unknown[] = [orgId];
  if (filter.status) {
    conditions.push('status = ?');
    params.push(filter.status);
  }
  if (filter.query) {
    // Served by the trigram indexes (migration 0002) from three characters on.
    const pattern = `%${escapeLike(filter.query)}%`;
    conditions.push(`(hostname ilike ? escape '\\' or machine_id ilike ? escape '\\')`);
    params.push(pattern, pattern);
  }
  if (page.after) {
    conditions.push('(enrolled_at, id) > (?, ?)');
    params.push(new Date(page.after.at), page.after.id);
  }
  params.push(page.limit + 1);
  const sql = `select ${LISTED_DEVICE_COLUMNS} from enrollment.devices where ${conditions.join(' and ')} order by enrolled_at, id limit ?`;
  return { sql, params };
}

/** `%`, `_` and the escape character itself match literally. */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function toDevice(row: Device): Device {
  return {
    id: row.id,
    orgId: row.orgId,
    machineId: row.machineId,
    hostname: row.hostname,
    status: row.status,
    metadata: row.metadata,
    enrolledAt: row.enrolledAt,
    lastSeenAt: row.lastSeenAt,
  };
}

function toListedDevice(row: ListedDeviceSqlRow): ListedDevice {
  return {
    id: row.id,
    orgId: row.org_id,
    machineId: row.machine_id,
    hostname: row.hostname,
    status: row.status,
    metadataJson: row.metadata_json,
    enrolledAt: new Date(row.enrolled_at_ms),
    lastSeenAt: new Date(row.last_seen_at_ms),
  };
}
