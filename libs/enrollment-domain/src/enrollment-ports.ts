import type { EventData, EventType } from '@sts/events/event-catalogue';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import type {
  Device,
  DeviceFilter,
  DeviceIdentity,
  DeviceMetadata,
  DeviceStatus,
  ListedDevice,
} from './enrollment-model';

/** The organization's current enrollment key as stored: sealed (to show it again) and hashed (to find it). */
export interface StoredEnrollmentKey {
  orgId: string;
  /** SHA-256 (hex) of the key; unique. */
  keyHash: string;
  /** AES-256-GCM of the key (`sealSecret`, context `enrollment-key:<org_id>`). */
  keySealed: string;
  createdAt: Date;
}

export interface StoredEnrollmentCode {
  id: string;
  orgId: string;
  /** HMAC-SHA256 (hex) of the canonical code; unique per organization. The code itself is never stored. */
  codeHash: string;
  createdAt: Date;
  expiresAt: Date;
  consumedAt: Date | null;
  consumedByDeviceId: string | null;
}

/** Where a code stands at a moment: `live` is unconsumed and unexpired. */
export type CodeState = 'live' | 'unknown' | 'expired' | 'used';

/** What an enrollment attempt needs to know, read in one round trip. */
export interface EnrollmentTarget {
  /** The organization whose current key was presented. */
  orgId: string;
  /**
   * The device with the presented machine id, in whatever organization it is. `proven`: the caller may
   * re-enroll it (the presented device token is its current one, or an administrator's approval is live).
   */
  existing: (Pick<Device, 'id' | 'orgId'> & { proven: boolean }) | null;
  /** The presented code in that organization (`unknown` when there is none, or no code was given). */
  code: CodeState;
}

/**
 * How consuming a code went: consumed now, or why not. `key-invalid`: the key no longer names the
 * organization (rotated or revoked meanwhile, or a stale guess of the caller); nothing changed.
 */
export type CodeOutcome = 'consumed' | 'unknown' | 'expired' | 'used' | 'key-invalid';

/** The device change that goes with consuming the code; applied only if the code was consumed. */
export type DeviceWrite =
  | { kind: 'insert'; device: Device; tokenHash: string }
  | {
      kind: 're-enroll';
      deviceId: string;
      hostname: string;
      metadata: DeviceMetadata;
      tokenHash: string;
      lastSeenAt: Date;
      /**
       * SHA-256 of the device token the caller presented (null: none). The write applies only while the
       * device still has this token or a live re-enrollment approval, and it uses the approval up.
       */
      presentedTokenHash: string | null;
    };

/** An event as handed to the outbox. */
export type OutboxEvent = { [Type in EventType]: { type: Type; data: EventData<Type> } }[EventType];

export interface ConsumeCodeInput {
  /** The presented key, checked again in the same atomic step: it must still be `orgId`'s current key. */
  keyHash: string;
  orgId: string;
  codeHash: string;
  /** Recorded as the code's consumer. */
  deviceId: string;
  now: Date;
  write: DeviceWrite;
  /** Written to the outbox with the device. */
  event: OutboxEvent;
}

/** A device was heard from (a telemetry batch accepted) at `at`. */
export interface DeviceSighting {
  orgId: string;
  deviceId: string;
  at: Date;
}

export interface EnrollmentRepositories {
  findKey(orgId: string): Promise<StoredEnrollmentKey | null>;
  /** Creates the organization's key or replaces the current one. */
  upsertKey(key: StoredEnrollmentKey): Promise<void>;
  /** Returns false when there was none. */
  deleteKey(orgId: string): Promise<boolean>;

  /** Throws `UniqueConflict` (`@sts/errors/unique-conflict`) when a code hash already exists in the organization. */
  insertCodes(codes: StoredEnrollmentCode[]): Promise<void>;
  /** Deletes the organization's codes that expired before `expiredBefore`; returns how many. */
  purgeCodes(orgId: string, expiredBefore: Date): Promise<number>;
  /**
   * Locks the organization's issuing of codes until the transaction ends (concurrent issuers, on any replica,
   * queue here) and counts its live codes: unused and not expired at `now`.
   */
  lockLiveCodeCount(orgId: string, now: Date): Promise<number>;

  /**
   * Null when no organization has a key with this hash. Otherwise the key's organization, the device
   * with this machine id (in any organization) and the state of the code (`codeHash` null: `unknown`).
   * `deviceTokenHash` (null: none presented) and `now` decide whether the device is `proven`.
   */
  findEnrollmentTarget(
    keyHash: string,
    machineId: string,
    codeHash: string | null,
    deviceTokenHash: string | null,
    now: Date,
  ): Promise<EnrollmentTarget | null>;

  /** Scoped by organization: a device of another organization is simply not found. */
  /** The device, locked until the transaction ends. */
  lockDevice(orgId: string, deviceId: string): Promise<Device | null>;
  setDeviceStatus(orgId: string, deviceId: string, status: DeviceStatus): Promise<void>;
  /** Lets the device be re-enrolled without its token until `until` (once; the re-enrollment clears it). */
  allowReEnrollment(orgId: string, deviceId: string, until: Date): Promise<void>;
  /** Deletes the device and clears the references of codes it consumed. */
  deleteDevice(orgId: string, deviceId: string): Promise<void>;
  /** The device as listed, without locking it. */
  findDevice(orgId: string, deviceId: string): Promise<ListedDevice | null>;
  /** Ordered by (enrolledAt, id); returns up to `page.limit + 1` rows. */
  listDevices(orgId: string, filter: DeviceFilter, page: PageRequest): Promise<ListedDevice[]>;
  findDeviceByTokenHash(tokenHash: string): Promise<DeviceIdentity | null>;
  /**
   * Moves each device's `last_seen_at` forward to `at` (never back), in one statement; devices
   * deleted meanwhile are skipped. Returns how many devices moved.
   */
  markSeen(sightings: readonly DeviceSighting[]): Promise<number>;

  /** Writes an event to the outbox of this transaction. */
  emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void>;
}

export interface EnrollmentStore {
  /** Runs work in one transaction; events emitted inside are published only if it commits. */
  transaction<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T>;
  /** Runs reads without a transaction. */
  read<T>(work: (repositories: EnrollmentRepositories) => Promise<T>): Promise<T>;
  /**
   * The write of an enrollment, atomic on its own (one statement in SQL, no surrounding transaction,
   * so the hot path costs one round trip): if `keyHash` is still the organization's key, consumes a
   * live code of the organization and, only if it was consumed, applies `write` and puts `event` in
   * the outbox. Of concurrent consumers of one code
   * exactly one gets `consumed`, the others `used`. Throws `UniqueConflict` (`@sts/errors/unique-conflict`), with nothing
   * changed, when the machine id was enrolled concurrently, or the device to re-enroll is gone or no
   * longer accepts the caller's proof (its token changed, its approval was used or expired).
   */
  consumeCode(input: ConsumeCodeInput): Promise<CodeOutcome>;
}

export interface Clock {
  now(): Date;
}

export interface IdGenerator {
  newId(): string;
}
