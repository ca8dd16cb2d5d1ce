import { UniqueConflict } from '@sts/errors/unique-conflict';
import { parseEventData, type EventData, type EventType } from '@sts/events/event-catalogue';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import type { Device, DeviceIdentity, ListedDevice } from '../enrollment-model';
import type {
  CodeOutcome,
  CodeState,
  ConsumeCodeInput,
  EnrollmentRepositories,
  EnrollmentStore,
  StoredEnrollmentCode,
  StoredEnrollmentKey,
} from '../enrollment-ports';

/** A device row as stored: the device plus the SHA-256 of its current token and its re-enrollment approval. */
export interface DeviceRow extends Device {
  tokenHash: string;
  /** Until when an administrator's approval lets the device re-enroll without its token (null: none). */
  reEnrollmentAllowedUntil: Date | null;
}

export interface RecordedEvent<Type extends EventType = EventType> {
  type: Type;
  data: EventData<Type>;
}

export interface EnrollmentState {
  /** By organization id (one current key per organization). */
  keys: Map<string, StoredEnrollmentKey>;
  codes: Map<string, StoredEnrollmentCode>;
  devices: Map<string, DeviceRow>;
  /** The outbox: events of committed transactions, in order. */
  events: RecordedEvent[];
}

type Table = 'keys' | 'codes' | 'devices';
const TABLES: Table[] = ['keys', 'codes', 'devices'];

const emptyState = (): EnrollmentState => ({
  keys: new Map(),
  codes: new Map(),
  devices: new Map(),
  events: [],
});

/**
 * The enrollment ports in memory, with the rules of the PostgreSQL store (`PostgresEnrollmentStore`):
 * - lookups are scoped by organization; unique keys as in the schema: key hash, (org, code hash),
 *   device machine id (global), device token hash;
 * - a transaction works on a copy of the state and commits only when its work succeeds, so a throwing
 *   transaction leaves nothing behind (rows or events). Transactions run one at a time; a unique key
 *   broken at commit is a {@link UniqueConflict}, as the real store reports PostgreSQL's unique violation;
 * - `read` works on the committed state directly; rows handed out are copies.
 */
export class InMemoryEnrollmentStore implements EnrollmentStore {
  state: EnrollmentState = emptyState();
  commits = 0;
  rollbacks = 0;
  /** How many reads ran (round trips of the hot path). */
  reads = 0;

  private queue: Promise<unknown> = Promise.resolve();
  private beforeCommitHooks: ((committed: EnrollmentRepositories) => Promise<void>)[] = [];
  private beforeStartHooks: (() => Promise<void>)[] = [];

  eventsOf<Type extends EventType>(type: Type): EventData<Type>[] {
    return this.state.events
      .filter((event): event is RecordedEvent<Type> => event.type === type)
      .map((event) => event.data);
  }

  /**
   * Simulates a concurrent transaction that commits just before the next transaction of this store
   * does: `write` runs against the committed state at that moment, and the next commit is checked
   * against it (unique keys), as PostgreSQL would.
   */
  interleaveBeforeNextCommit(write: (committed: EnrollmentRepositories) => Promise<void>): void {
    this.beforeCommitHooks.push(write);
  }

  /** Simulates a concurrent transaction that commits just before the next transaction of this store starts. */
  interleaveBeforeNextTransaction(write: () => Promise<void>): void {
    this.beforeStartHooks.push(write);
  }

  transaction<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T> {
    const run = this.queue.then(() => this.runTransaction(work));
    this.queue = run.catch(() => undefined);
    return run;
  }

  read<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T> {
    this.reads += 1;
    return work(repositoriesOver(() => this.state));
  }

  /** Atomic like the one SQL statement: a transaction of its own that changes nothing unless all of it applies. */
  consumeCode(input: ConsumeCodeInput): Promise<CodeOutcome> {
    return this.transaction(async (repos) => {
      const working = this.working;
      if (!working) throw new Error('no working state');
      const { keyHash, orgId, codeHash, deviceId, now, write, event } = input;
      if (working.keys.get(orgId)?.keyHash !== keyHash) return 'key-invalid';
      const code = [...working.codes.values()].find((c) => c.orgId === orgId && c.codeHash === codeHash);
      const state = codeState(code, now);
      if (!code || state !== 'live') return state === 'live' ? 'unknown' : state;
      code.consumedAt = new Date(now);
      code.consumedByDeviceId = deviceId;
      if (write.kind === 'insert') {
        const { device, tokenHash } = write;
        if (working.devices.has(device.id)) throw new UniqueConflict(new Error('devices_pkey'));
        if ([...working.devices.values()].some((d) => d.machineId === device.machineId)) {
          throw new UniqueConflict(new Error('devices_machine_id_key'));
        }
        working.devices.set(device.id, {
          ...structuredClone(device),
          tokenHash,
          reEnrollmentAllowedUntil: null,
        });
      } else {
        const row = working.devices.get(write.deviceId);
        if (!row || row.orgId !== orgId)
          throw new UniqueConflict(new Error(`device ${write.deviceId} is gone`));
        if (!reEnrollmentProven(row, write.presentedTokenHash, now))
          throw new UniqueConflict(new Error(`device ${write.deviceId} no longer accepts this proof`));
        working.devices.set(row.id, {
          ...row,
          hostname: write.hostname,
          metadata: structuredClone(write.metadata),
          tokenHash: write.tokenHash,
          lastSeenAt: new Date(write.lastSeenAt),
          reEnrollmentAllowedUntil: null,
        });
      }
      await repos.emit(event.type, event.data);
      return 'consumed';
    });
  }

  /** The state the running transaction works on. */
  private working: EnrollmentState | null = null;

  private async runTransaction<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T> {
    const startHook = this.beforeStartHooks.shift();
    if (startHook) await startHook();
    const base = structuredClone(this.state);
    const working = structuredClone(this.state);
    let result: T;
    this.working = working;
    try {
      result = await work(repositoriesOver(() => working));
    } catch (error) {
      this.rollbacks += 1;
      throw error;
    } finally {
      this.working = null;
    }
    const hook = this.beforeCommitHooks.shift();
    if (hook) await hook(repositoriesOver(() => this.state));
    const merged = mergeChanges(this.state, base, working);
    const conflict = uniqueViolation(merged);
    if (conflict) {
      this.rollbacks += 1;
      throw new UniqueConflict(new Error(`duplicate key ${conflict}`));
    }
    this.state = merged;
    this.commits += 1;
    return result;
  }
}

function mergeChanges(
  committed: EnrollmentState,
  base: EnrollmentState,
  working: EnrollmentState,
): EnrollmentState {
  const merged = structuredClone(committed);
  for (const table of TABLES) {
    const before = base[table] as Map<string, unknown>;
    const after = working[table] as Map<string, unknown>;
    const target = merged[table] as Map<string, unknown>;
    for (const [id, row] of after) {
      if (!before.has(id) || JSON.stringify(before.get(id)) !== JSON.stringify(row))
        target.set(id, structuredClone(row));
    }
    for (const id of before.keys()) if (!after.has(id)) target.delete(id);
  }
  merged.events.push(...structuredClone(working.events.slice(base.events.length)));
  return merged;
}

function uniqueViolation(state: EnrollmentState): string | null {
  const keys: [string, Iterable<string>][] = [
    ['enrollment_keys_key_hash_key', [...state.keys.values()].map((k) => k.keyHash)],
    ['enrollment_codes_org_code_hash_key', [...state.codes.values()].map((c) => `${c.orgId}|${c.codeHash}`)],
    ['devices_machine_id_key', [...state.devices.values()].map((d) => d.machineId)],
    ['devices_token_hash_key', [...state.devices.values()].map((d) => d.tokenHash)],
  ];
  for (const [name, values] of keys) {
    const seen = new Set<string>();
    for (const value of values) {
      if (seen.has(value)) return name;
      seen.add(value);
    }
  }
  return null;
}

/** The caller presented the device's current token, or an administrator's approval is live. */
function reEnrollmentProven(row: DeviceRow, presentedTokenHash: string | null, now: Date): boolean {
  return (
    (presentedTokenHash !== null && row.tokenHash === presentedTokenHash) ||
    (row.reEnrollmentAllowedUntil !== null && row.reEnrollmentAllowedUntil.getTime() > now.getTime())
  );
}

function codeState(code: StoredEnrollmentCode | undefined, now: Date): CodeState {
  if (!code) return 'unknown';
  if (code.consumedAt) return 'used';
  return code.expiresAt.getTime() <= now.getTime() ? 'expired' : 'live';
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const byEnrolledThenId = (a: Device, b: Device) =>
  a.enrolledAt.getTime() - b.enrolledAt.getTime() || compare(a.id, b.id);

function toDevice(row: DeviceRow): Device {
  const { tokenHash: _tokenHash, reEnrollmentAllowedUntil: _allowed, ...device } = structuredClone(row);
  return device;
}

function toListedDevice(row: DeviceRow): ListedDevice {
  const {
    tokenHash: _tokenHash,
    reEnrollmentAllowedUntil: _allowed,
    metadata,
    ...device
  } = structuredClone(row);
  return { ...device, metadataJson: JSON.stringify(metadata) };
}

function repositoriesOver(current: () => EnrollmentState): EnrollmentRepositories {
  const s = current;
  const copy = <Row>(row: Row): Row => structuredClone(row);
  const deviceOf = (orgId: string, deviceId: string): DeviceRow | null => {
    const row = s().devices.get(deviceId);
    return row && row.orgId === orgId ? row : null;
  };

  return {
    findKey: async (orgId) => {
      const key = s().keys.get(orgId);
      return key ? copy(key) : null;
    },
    upsertKey: async (key) => {
      if ([...s().keys.values()].some((k) => k.keyHash === key.keyHash && k.orgId !== key.orgId)) {
        throw new UniqueConflict(new Error('enrollment_keys_key_hash_key'));
      }
      s().keys.set(key.orgId, copy(key));
    },
    deleteKey: async (orgId) => s().keys.delete(orgId),

    insertCodes: async (codes) => {
      for (const code of codes) {
        if (s().codes.has(code.id)) throw new UniqueConflict(new Error('enrollment_codes_pkey'));
        if ([...s().codes.values()].some((c) => c.orgId === code.orgId && c.codeHash === code.codeHash)) {
          throw new UniqueConflict(new Error('enrollment_codes_org_code_hash_key'));
        }
        s().codes.set(code.id, copy(code));
      }
    },
    lockLiveCodeCount: async (orgId, now) =>
      [...s().codes.values()].filter(
        (code) =>
          code.orgId === orgId && code.consumedAt === null && code.expiresAt.getTime() > now.getTime(),
      ).length,
    purgeCodes: async (orgId, expiredBefore) => {
      let purged = 0;
      for (const [id, code] of s().codes) {
        if (code.orgId === orgId && code.expiresAt.getTime() < expiredBefore.getTime()) {
          s().codes.delete(id);
          purged += 1;
        }
      }
      return purged;
    },

    findEnrollmentTarget: async (keyHash, machineId, codeHash, deviceTokenHash, now) => {
      const key = [...s().keys.values()].find((k) => k.keyHash === keyHash);
      if (!key) return null;
      const existing = [...s().devices.values()].find((d) => d.machineId === machineId);
      const code = codeHash
        ? [...s().codes.values()].find((c) => c.orgId === key.orgId && c.codeHash === codeHash)
        : undefined;
      return {
        orgId: key.orgId,
        existing: existing
          ? {
              id: existing.id,
              orgId: existing.orgId,
              proven: reEnrollmentProven(existing, deviceTokenHash, now),
            }
          : null,
        code: codeState(code, now),
      };
    },

    lockDevice: async (orgId, deviceId) => {
      const row = deviceOf(orgId, deviceId);
      return row ? toDevice(row) : null;
    },
    setDeviceStatus: async (orgId, deviceId, status) => {
      const row = deviceOf(orgId, deviceId);
      if (row) row.status = status;
    },
    allowReEnrollment: async (orgId, deviceId, until) => {
      const row = deviceOf(orgId, deviceId);
      if (row) row.reEnrollmentAllowedUntil = new Date(until);
    },
    deleteDevice: async (orgId, deviceId) => {
      if (!deviceOf(orgId, deviceId)) return;
      s().devices.delete(deviceId);
      for (const code of s().codes.values())
        if (code.consumedByDeviceId === deviceId) code.consumedByDeviceId = null;
    },
    findDevice: async (orgId, deviceId) => {
      const row = deviceOf(orgId, deviceId);
      return row ? toListedDevice(row) : null;
    },
    listDevices: async (orgId, filter, page: PageRequest) => {
      const query = filter.query?.toLowerCase() ?? null;
      return [...s().devices.values()]
        .filter((d) => d.orgId === orgId)
        .filter((d) => !filter.status || d.status === filter.status)
        .filter(
          (d) =>
            !query || d.hostname.toLowerCase().includes(query) || d.machineId.toLowerCase().includes(query),
        )
        .sort(byEnrolledThenId)
        .filter((d) => {
          if (!page.after) return true;
          const position = new Date(page.after.at).getTime();
          const t = d.enrolledAt.getTime();
          return t > position || (t === position && d.id > page.after.id);
        })
        .slice(0, page.limit + 1)
        .map(toListedDevice);
    },
    findDeviceByTokenHash: async (tokenHash): Promise<DeviceIdentity | null> => {
      const row = [...s().devices.values()].find((d) => d.tokenHash === tokenHash);
      return row ? { deviceId: row.id, orgId: row.orgId, status: row.status } : null;
    },

    markSeen: async (sightings) => {
      let moved = 0;
      for (const sighting of sightings) {
        const row = s().devices.get(sighting.deviceId);
        if (!row || row.orgId !== sighting.orgId || row.lastSeenAt >= sighting.at) continue;
        row.lastSeenAt = new Date(sighting.at);
        moved++;
      }
      return moved;
    },

    emit: async <Type extends EventType>(type: Type, data: EventData<Type>) => {
      // The outbox validates against the event catalogue before writing, so must we.
      s().events.push({ type, data: copy(parseEventData(type, data)) });
    },
  };
}

export { ManualClock, RecordingIds } from '@sts/testing/test-clock';
