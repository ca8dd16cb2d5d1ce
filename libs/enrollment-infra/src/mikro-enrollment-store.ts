import {
  DeadlockException,
  UniqueConstraintViolationException,
  type EntityManager,
  type MikroORM,
} from '@mikro-orm/postgresql';
import { sqlRunner, type SqlRunner } from '@sts/db/sql-runner';
import { isUuid } from '@sts/vocabulary/identifiers';
import type {
  Device,
  DeviceFilter,
  DeviceIdentity,
  DeviceMetadata,
  DeviceStatus,
  ListedDevice,
} from '@sts/enrollment-domain/enrollment-model';
import {
  UniqueConflict,
  type CodeOutcome,
  type CodeState,
  type ConsumeCodeInput,
  type DeviceSighting,
  type EnrollmentRepositories,
  type EnrollmentStore,
  type EnrollmentTarget,
  type StoredEnrollmentCode,
  type StoredEnrollmentKey,
} from '@sts/enrollment-domain/enrollment-ports';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import { enqueueEvent, outboxInsertPart } from '@sts/outbox/outbox';

/** Raw rows: MikroORM has node-postgres hand timestamps over as text. */
interface DeviceSqlRow {
  id: string;
  org_id: string;
  machine_id: string;
  hostname: string;
  status: DeviceStatus;
  metadata: DeviceMetadata;
  enrolled_at: string;
  last_seen_at: string;
}

const DEVICE_COLUMNS = 'id, org_id, machine_id, hostname, status, metadata, enrolled_at, last_seen_at';

interface ListedDeviceSqlRow extends Omit<DeviceSqlRow, 'metadata' | 'enrolled_at' | 'last_seen_at'> {
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

/** EnrollmentStore over PostgreSQL (schema `enrollment`). `onCommitWithEvents` lets the outbox relay publish at once. */
export class MikroEnrollmentStore implements EnrollmentStore {
  constructor(
    private readonly orm: MikroORM,
    private readonly onCommitWithEvents: () => void = () => undefined,
  ) {}

  async transaction<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T> {
    const counters = { emitted: 0 };
    try {
      const result = await this.orm.em
        .fork()
        .transactional((tx) => work(new EnrollmentRepositoriesSql(tx, counters)));
      if (counters.emitted > 0) this.onCommitWithEvents();
      return result;
    } catch (error) {
      if (isUniqueViolation(error)) throw new UniqueConflict(error);
      throw error;
    }
  }

  read<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T> {
    return work(new EnrollmentRepositoriesSql(this.orm.em.fork(), { emitted: 0 }));
  }

  /**
   * Raw SQL because enrollment's throughput target (bench/enrollment.bench.ts) wants one round trip.
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
    const em = this.orm.em.fork();
    try {
      const row = await sqlRunner(em).one<{
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
      if (row.consumed) {
        this.onCommitWithEvents();
        return 'consumed';
      }
      return row.state ?? 'unknown';
    } catch (error) {
      if (isUniqueViolation(error) || isRetryable(error)) throw new UniqueConflict(error);
      throw error;
    }
  }
}

class EnrollmentRepositoriesSql implements EnrollmentRepositories {
  private readonly sql: SqlRunner;

  constructor(
    private readonly em: EntityManager,
    private readonly counters: { emitted: number },
  ) {
    this.sql = sqlRunner(em);
  }

  async findKey(orgId: string): Promise<StoredEnrollmentKey | null> {
    if (!isUuid(orgId)) return null;
    const row = await this.sql.one<{
      org_id: string;
      key_hash: string;
      key_sealed: string;
      created_at: string;
    }>(`select org_id, key_hash, key_sealed, created_at from enrollment.enrollment_keys where org_id = ?`, [
      orgId,
    ]);
    return row
      ? {
          orgId: row.org_id,
          keyHash: row.key_hash,
          keySealed: row.key_sealed,
          createdAt: new Date(row.created_at),
        }
      : null;
  }

  async upsertKey(key: StoredEnrollmentKey): Promise<void> {
    await this.sql.run(
      `insert into enrollment.enrollment_keys (org_id, key_hash, key_sealed, created_at) values (?, ?, ?, ?)
       on conflict (org_id) do update
         set key_hash = excluded.key_hash, key_sealed = excluded.key_sealed, created_at = excluded.created_at`,
      [key.orgId, key.keyHash, key.keySealed, key.createdAt],
    );
  }

  async deleteKey(orgId: string): Promise<boolean> {
    if (!isUuid(orgId)) return false;
    return (await this.sql.run(`delete from enrollment.enrollment_keys where org_id = ?`, [orgId])) > 0;
  }

  async insertCodes(codes: StoredEnrollmentCode[]): Promise<void> {
    if (codes.length === 0) return;
    const params: unknown[] = [];
    for (const c of codes) params.push(c.id, c.orgId, c.codeHash, c.createdAt, c.expiresAt);
    await this.sql.run(
      `insert into enrollment.enrollment_codes (id, org_id, code_hash, created_at, expires_at)
       values ${codes.map(() => '(?, ?, ?, ?, ?)').join(', ')}`,
      params,
    );
  }

  async purgeCodes(orgId: string, expiredBefore: Date): Promise<number> {
    if (!isUuid(orgId)) return 0;
    return this.sql.run(`delete from enrollment.enrollment_codes where org_id = ? and expires_at < ?`, [
      orgId,
      expiredBefore,
    ]);
  }

  async findEnrollmentTarget(
    keyHash: string,
    machineId: string,
    codeHash: string | null,
    deviceTokenHash: string | null,
    now: Date,
  ): Promise<EnrollmentTarget | null> {
    const row = await this.sql.one<{
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
    const row = await this.sql.one<DeviceSqlRow>(
      `select ${DEVICE_COLUMNS} from enrollment.devices where org_id = ? and id = ? for update`,
      [orgId, deviceId],
    );
    return row ? toDevice(row) : null;
  }

  async setDeviceStatus(orgId: string, deviceId: string, status: DeviceStatus): Promise<void> {
    await this.sql.run(`update enrollment.devices set status = ? where org_id = ? and id = ?`, [
      status,
      orgId,
      deviceId,
    ]);
  }

  async allowReEnrollment(orgId: string, deviceId: string, until: Date): Promise<void> {
    await this.sql.run(
      `update enrollment.devices set re_enrollment_allowed_until = ? where org_id = ? and id = ?`,
      [until, orgId, deviceId],
    );
  }

  async deleteDevice(orgId: string, deviceId: string): Promise<void> {
    await this.sql.run(
      `with gone as (delete from enrollment.devices where org_id = ? and id = ? returning id)
       update enrollment.enrollment_codes set consumed_by_device_id = null
       where org_id = ? and consumed_by_device_id in (select id from gone)`,
      [orgId, deviceId, orgId],
    );
  }

  async listDevices(orgId: string, filter: DeviceFilter, page: PageRequest): Promise<ListedDevice[]> {
    if (!isUuid(orgId) || (page.after && !isUuid(page.after.id))) return [];
    const { sql, params } = listDevicesQuery(orgId, filter, page);
    const rows = await this.sql.all<ListedDeviceSqlRow>(sql, params);
    return rows.map(toListedDevice);
  }

  async findDeviceByTokenHash(tokenHash: string): Promise<DeviceIdentity | null> {
    const row = await this.sql.one<{ id: string; org_id: string; status: DeviceStatus }>(
      `select id, org_id, status from enrollment.devices where token_hash = ?`,
      [tokenHash],
    );
    return row ? { deviceId: row.id, orgId: row.org_id, status: row.status } : null;
  }

  async markSeen(sightings: readonly DeviceSighting[]): Promise<number> {
    const valid = sightings.filter((s) => isUuid(s.orgId) && isUuid(s.deviceId));
    if (valid.length === 0) return 0;
    // Raw: one statement for many devices (an update from a VALUES list), so last_seen_at costs one
    // write per flush of the telemetry consumer, not one per batch.
    return this.sql.run(
      `update enrollment.devices d set last_seen_at = v.at
       from (values ${valid.map(() => '(?::uuid, ?::uuid, ?::timestamptz)').join(', ')}) as v(org_id, id, at)
       where d.id = v.id and d.org_id = v.org_id and d.last_seen_at < v.at`,
      valid.flatMap((s) => [s.orgId, s.deviceId, s.at]),
    );
  }

  async emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void> {
    await enqueueEvent(this.em, type, data);
    this.counters.emitted += 1;
  }
}

function isUniqueViolation(error: unknown): boolean {
  return error instanceof UniqueConstraintViolationException;
}

/** serialization_failure (as `enrollment.retry_unless` raises it) or a deadlock: worth another try. */
function isRetryable(error: unknown): boolean {
  return error instanceof DeadlockException;
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

// Rows are mapped field by field. `{ ...identityColumns(row), metadataJson, ... }` gave every device
// object hidden classes (maps) of its own in Node 20's V8 (a spread followed by new keys does that),
// ~25 KB of them per page for the young-generation collector to copy and promote: 115 MB promoted in
// 8 s at 500 pages/s and 12.6 ms median pauses, against 3.5 MB now (bench/enrollment-store-gc.ts).
function toDevice(row: DeviceSqlRow): Device {
  return {
    id: row.id,
    orgId: row.org_id,
    machineId: row.machine_id,
    hostname: row.hostname,
    status: row.status,
    metadata: row.metadata,
    enrolledAt: new Date(row.enrolled_at),
    lastSeenAt: new Date(row.last_seen_at),
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
