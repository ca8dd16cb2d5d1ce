import { generateSecret, hashSecret, openSealedSecret, sealSecret } from '@sts/crypto/secrets';
import { SEALING_CONTEXTS } from '@sts/events/event-catalogue';
import { AppError } from '@sts/errors/app-error';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import type { DeviceInput } from './device-input';
import {
  CODE_RETENTION_AFTER_EXPIRY_MS,
  ENROLLMENT_CODE_TTL_MS,
  MAX_CODES_PER_REQUEST,
  RE_ENROLLMENT_APPROVAL_TTL_MS,
  type DeviceFilter,
  type DeviceIdentity,
  type DeviceStatus,
  type EnrollmentKey,
  type EnrollmentResult,
  type IssuedEnrollmentCode,
  type ListedDevice,
} from './enrollment-model';
import type {
  Clock,
  CodeOutcome,
  CodeState,
  DeviceSighting,
  DeviceWrite,
  EnrollmentRepositories,
  EnrollmentStore,
  EnrollmentTarget,
  IdGenerator,
  StoredEnrollmentCode,
} from './enrollment-ports';
import {
  DEVICE_TOKEN_PREFIX,
  ENROLLMENT_KEY_PREFIX,
  enrollmentKeyContext,
  generateEnrollmentCode,
  hashEnrollmentCode,
  looksLikeDeviceToken,
  looksLikeEnrollmentKey,
  normalizeEnrollmentCode,
  type EnrollmentKeyring,
} from './enrollment-secrets';

export interface EnrollmentSettings {
  /** Derived from ENROLLMENT_KEY_ENCRYPTION_KEY (`deriveEnrollmentKeyring`). */
  keyring: EnrollmentKeyring;
  /** SECRET_SEALING_KEY: seals the code and the key for their trip through the outbox to the mailer. */
  eventSealingKey: Buffer;
  /** ENROLLMENT_MAX_LIVE_CODES: the most unused, unexpired codes an organization may hold at once. */
  maxLiveCodes: number;
}

/** What the agent presents; the device part already checked by `validateDeviceInput` (in the gRPC handler). */
export interface EnrollDeviceInput extends DeviceInput {
  enrollmentKey: string;
  code: string;
  /** The device token of the agent's current enrollment, if it has one (proof for a re-enrollment). */
  deviceToken?: string | null;
}

export interface EmailCodeInput {
  orgId: string;
  /** Validated by the caller; stored and sent lower-cased. */
  email: string;
  requestedByName: string;
  orgName: string;
}

/** How often a transaction that lost a unique-key race is tried again. */
const MAX_ATTEMPTS = 3;
/** Enrollment keys (by hash) whose organization is remembered for the one-round-trip path. */
const ORG_HINTS_MAX = 10_000;

export class EnrollmentService {
  /**
   * Key hash → organization, learnt from enrollments. Only a guess: the write checks that the key
   * is still the organization's, so a rotated or revoked key is never honoured from here.
   */
  private readonly orgHints = new Map<string, string>();

  constructor(
    private readonly store: EnrollmentStore,
    private readonly settings: EnrollmentSettings,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  async getEnrollmentKey(orgId: string): Promise<EnrollmentKey> {
    const stored = await this.store.read((repos) => repos.findKey(orgId));
    if (!stored) throw new AppError('ENROLLMENT_KEY_NOT_FOUND');
    return { orgId, key: this.openKey(orgId, stored.keySealed), createdAt: stored.createdAt };
  }

  /** Creates the key or replaces the current one, which stops working at once. Devices are not affected. */
  async rotateEnrollmentKey(orgId: string): Promise<EnrollmentKey> {
    const key = generateSecret(ENROLLMENT_KEY_PREFIX);
    const createdAt = this.clock.now();
    await this.store.transaction((repos) =>
      repos.upsertKey({
        orgId,
        keyHash: hashSecret(key),
        keySealed: sealSecret(key, this.settings.keyring.keySealing, enrollmentKeyContext(orgId)),
        createdAt,
      }),
    );
    return { orgId, key, createdAt };
  }

  /** Blocks enrollments until a new key exists. Idempotent. Devices are not affected. */
  async revokeEnrollmentKey(orgId: string): Promise<void> {
    await this.store.transaction((repos) => repos.deleteKey(orgId));
  }

  /** `count` one-time codes, each valid for 24 hours. The codes exist in plain text only in the answer. */
  async createEnrollmentCodes(orgId: string, count: number): Promise<IssuedEnrollmentCode[]> {
    if (!Number.isInteger(count) || count < 1 || count > MAX_CODES_PER_REQUEST) {
      throw new AppError('VALIDATION_FAILED', `count must be between 1 and ${MAX_CODES_PER_REQUEST}`, {
        fields: [{ path: 'count', message: `must be an integer between 1 and ${MAX_CODES_PER_REQUEST}` }],
      });
    }
    return this.withRetry(() =>
      this.store.transaction(async (repos) => {
        const now = this.clock.now();
        await repos.purgeCodes(orgId, new Date(now.getTime() - CODE_RETENTION_AFTER_EXPIRY_MS));
        return this.issueCodes(repos, orgId, count, now);
      }),
    );
  }

  /**
   * One code for a colleague, e-mailed with installation instructions by the notification service.
   * The code and the enrollment key travel sealed in `enrollment_code.email_requested`.
   */
  async emailEnrollmentCode(input: EmailCodeInput): Promise<{ expiresAt: Date }> {
    return this.withRetry(() =>
      this.store.transaction(async (repos) => {
        const stored = await repos.findKey(input.orgId);
        if (!stored)
          throw new AppError(
            'ENROLLMENT_KEY_REQUIRED',
            'the organization has no enrollment key; create one first',
          );
        const key = this.openKey(input.orgId, stored.keySealed);
        const [issued] = await this.issueCodes(repos, input.orgId, 1, this.clock.now());
        if (!issued) throw new Error('no code issued');
        const recipient = {
          org_id: input.orgId,
          email: input.email.trim().toLowerCase(),
          request_id: this.ids.newId(),
        };
        await repos.emit('enrollment_code.email_requested', {
          org_id: recipient.org_id,
          org_name: input.orgName,
          email: recipient.email,
          requested_by_name: input.requestedByName,
          expires_at: issued.expiresAt.toISOString(),
          request_id: recipient.request_id,
          code_sealed: sealSecret(
            issued.code,
            this.settings.eventSealingKey,
            SEALING_CONTEXTS.enrollmentCode(recipient),
          ),
          enrollment_key_sealed: sealSecret(
            key,
            this.settings.eventSealingKey,
            SEALING_CONTEXTS.enrollmentKey(recipient),
          ),
        });
        return { expiresAt: issued.expiresAt };
      }),
    );
  }

  /**
   * The key names the organization; the code is consumed (at most once, ever); the device is created,
   * or re-enrolled when its machine id is already in this organization (same id, new token, new
   * hostname and metadata) and the caller proves it may: it presents that device's current token, or
   * an administrator allowed the re-enrollment (`allowReEnrollment`). Without proof it is refused
   * (MACHINE_ALREADY_ENROLLED): a code and a machine id, which analysts see, never take a device over.
   * `device.enrolled` goes to the outbox with the write. A machine enrolled in another organization is
   * refused. Failures (wrong key, bad code, machine elsewhere, no proof) write nothing and leave the
   * code unused. Hot path: one atomic write when the key's organization is remembered from an earlier
   * enrollment; otherwise one read first.
   */
  async enrollDevice(input: EnrollDeviceInput): Promise<EnrollmentResult> {
    const device: DeviceInput = input;
    const presentedKey = input.enrollmentKey.trim();
    if (!looksLikeEnrollmentKey(presentedKey)) throw new AppError('ENROLLMENT_KEY_INVALID');
    const keyHash = hashSecret(presentedKey);
    const code = normalizeEnrollmentCode(input.code);
    const codeHash = code ? hashEnrollmentCode(code, this.settings.keyring.codeHmac) : null;
    // Anything that cannot be a device token proves nothing; it is not an error of its own.
    const presentedToken = input.deviceToken?.trim() ?? '';
    const presentedTokenHash = looksLikeDeviceToken(presentedToken) ? hashSecret(presentedToken) : null;

    let attempt = 0;
    return this.withRetry(async () => {
      attempt += 1;
      const now = this.clock.now();
      // Fast path (one round trip): the key's organization is known from an earlier enrollment, and
      // the machine is new. The write checks both; if either guess is wrong, it changes nothing and
      // the general path below reads what is needed first.
      const hintedOrgId = attempt === 1 && codeHash ? this.orgHints.get(keyHash) : undefined;
      if (hintedOrgId && codeHash) {
        const outcome = await this.writeEnrollment(
          keyHash,
          hintedOrgId,
          codeHash,
          null,
          null,
          device,
          now,
        ).catch((error: unknown) => {
          if (error instanceof UniqueConflict) return null; // the machine is known: take the general path
          throw error;
        });
        if (outcome === 'key-invalid') this.orgHints.delete(keyHash);
        else if (outcome) return outcome;
      }

      const target = await this.store.read((repos) =>
        repos.findEnrollmentTarget(keyHash, device.machineId, codeHash, presentedTokenHash, now),
      );
      if (!target) throw new AppError('ENROLLMENT_KEY_INVALID');
      this.rememberOrg(keyHash, target.orgId);
      // The code is checked before the machine: only a holder of a valid code learns that the
      // machine is enrolled elsewhere.
      throwUnlessLive(target.code);
      if (!codeHash) throw new AppError('ENROLLMENT_CODE_INVALID');
      const { orgId, existing } = target;
      if (existing && existing.orgId !== orgId) {
        throw new AppError(
          'MACHINE_ENROLLED_ELSEWHERE',
          'this machine is enrolled in another organization; delete it there first',
        );
      }
      if (existing && !existing.proven) {
        throw new AppError(
          'MACHINE_ALREADY_ENROLLED',
          'this machine is already enrolled in this organization; re-enrolling it needs its current device ' +
            'token, or an administrator allowing its re-enrollment (POST /api/devices/{device_id}/re-enrollment)',
        );
      }
      const outcome = await this.writeEnrollment(
        keyHash,
        orgId,
        codeHash,
        existing,
        presentedTokenHash,
        device,
        now,
      );
      // The key was rotated or revoked between our read and our write.
      if (outcome === 'key-invalid') throw new AppError('ENROLLMENT_KEY_INVALID');
      return outcome;
    });
  }

  /**
   * Consumes the code for a new device (`existing` null) or a re-enrollment, with the device write and
   * `device.enrolled` in the same atomic step. Throws the code's error when it did not apply. The
   * re-enrollment is checked again by the write (`presentedTokenHash` or a live approval).
   */
  private async writeEnrollment(
    keyHash: string,
    orgId: string,
    codeHash: string,
    existing: EnrollmentTarget['existing'],
    presentedTokenHash: string | null,
    device: DeviceInput,
    now: Date,
  ): Promise<EnrollmentResult | 'key-invalid'> {
    const deviceToken = generateSecret(DEVICE_TOKEN_PREFIX);
    const tokenHash = hashSecret(deviceToken);
    const deviceId = existing ? existing.id : this.ids.newId();
    const write: DeviceWrite = existing
      ? {
          kind: 're-enroll',
          deviceId,
          hostname: device.hostname,
          metadata: device.metadata,
          tokenHash,
          lastSeenAt: now,
          presentedTokenHash,
        }
      : {
          kind: 'insert',
          tokenHash,
          device: {
            id: deviceId,
            orgId,
            machineId: device.machineId,
            hostname: device.hostname,
            status: 'active',
            metadata: device.metadata,
            enrolledAt: now,
            lastSeenAt: now,
          },
        };
    const reEnrolled = existing !== null;
    const outcome = await this.store.consumeCode({
      keyHash,
      orgId,
      codeHash,
      deviceId,
      now,
      write,
      event: {
        type: 'device.enrolled',
        data: {
          org_id: orgId,
          device_id: deviceId,
          machine_id: device.machineId,
          hostname: device.hostname,
          enrolled_at: now.toISOString(),
          re_enrolled: reEnrolled,
        },
      },
    });
    if (outcome === 'key-invalid') return outcome;
    // Another agent consumed the code between a read and this write, or it was never live.
    throwUnlessLive(outcome);
    return { deviceId, orgId, deviceToken, reEnrolled };
  }

  private rememberOrg(keyHash: string, orgId: string): void {
    if (this.orgHints.size >= ORG_HINTS_MAX) this.orgHints.clear();
    this.orgHints.set(keyHash, orgId);
  }

  async listDevices(orgId: string, filter: DeviceFilter, page: PageRequest): Promise<ListedDevice[]> {
    return this.store.read((repos) => repos.listDevices(orgId, filter, page));
  }

  /** One device of the organization; DEVICE_NOT_FOUND for an id it does not have. */
  async getDevice(orgId: string, deviceId: string): Promise<ListedDevice> {
    const device = await this.store.read((repos) => repos.findDevice(orgId, deviceId));
    if (!device) throw new AppError('DEVICE_NOT_FOUND');
    return device;
  }

  /** Idempotent; `device.disabled` / `device.enabled` only when the status actually changes. */
  async setDeviceStatus(orgId: string, deviceId: string, status: DeviceStatus): Promise<void> {
    await this.store.transaction(async (repos) => {
      const device = await repos.lockDevice(orgId, deviceId);
      if (!device) throw new AppError('DEVICE_NOT_FOUND');
      if (device.status === status) return;
      await repos.setDeviceStatus(orgId, deviceId, status);
      const data = {
        org_id: orgId,
        device_id: deviceId,
        hostname: device.hostname,
        at: this.clock.now().toISOString(),
      };
      await repos.emit(status === 'disabled' ? 'device.disabled' : 'device.enabled', data);
    });
  }

  /**
   * An administrator vouches for the next enrollment of this device's machine id: within
   * {@link RE_ENROLLMENT_APPROVAL_TTL_MS}, one enrollment with a valid code re-enrolls it (same device id,
   * new token) without the device token, which a reinstall has lost. Asking again renews the window.
   */
  async allowReEnrollment(orgId: string, deviceId: string): Promise<{ allowedUntil: Date }> {
    const allowedUntil = new Date(this.clock.now().getTime() + RE_ENROLLMENT_APPROVAL_TTL_MS);
    await this.store.transaction(async (repos) => {
      if (!(await repos.lockDevice(orgId, deviceId))) throw new AppError('DEVICE_NOT_FOUND');
      await repos.allowReEnrollment(orgId, deviceId, allowedUntil);
    });
    return { allowedUntil };
  }

  /** Irreversible: the token stops working at once; `device.deleted` has its telemetry purged elsewhere. */
  async deleteDevice(orgId: string, deviceId: string): Promise<void> {
    await this.store.transaction(async (repos) => {
      const device = await repos.lockDevice(orgId, deviceId);
      if (!device) throw new AppError('DEVICE_NOT_FOUND');
      await repos.deleteDevice(orgId, deviceId);
      await repos.emit('device.deleted', {
        org_id: orgId,
        device_id: deviceId,
        machine_id: device.machineId,
        hostname: device.hostname,
        at: this.clock.now().toISOString(),
      });
    });
  }

  /**
   * Devices were heard from: `last_seen_at` follows, the latest sighting per device, in one write.
   * Called by the telemetry consumer with everything it took since its last call.
   */
  async recordSightings(sightings: readonly DeviceSighting[]): Promise<number> {
    const latest = new Map<string, DeviceSighting>();
    for (const sighting of sightings) {
      const known = latest.get(sighting.deviceId);
      if (!known || known.at < sighting.at) latest.set(sighting.deviceId, sighting);
    }
    if (latest.size === 0) return 0;
    return this.store.read((repos) => repos.markSeen([...latest.values()]));
  }

  /** Who a device token belongs to. Disabled devices are reported as such; the caller decides. */
  async authenticateDevice(deviceToken: string): Promise<DeviceIdentity> {
    const token = deviceToken.trim();
    if (!looksLikeDeviceToken(token)) throw new AppError('DEVICE_TOKEN_INVALID');
    const identity = await this.store.read((repos) => repos.findDeviceByTokenHash(hashSecret(token)));
    if (!identity) throw new AppError('DEVICE_TOKEN_INVALID');
    return identity;
  }

  private async issueCodes(
    repos: EnrollmentRepositories,
    orgId: string,
    count: number,
    now: Date,
  ): Promise<IssuedEnrollmentCode[]> {
    const live = await repos.lockLiveCodeCount(orgId, now);
    if (live + count > this.settings.maxLiveCodes) {
      throw new AppError(
        'ENROLLMENT_CODE_LIMIT',
        `the organization has ${live} unused codes and may hold at most ${this.settings.maxLiveCodes}; ` +
          'use them or wait until they expire (24 hours after they were made)',
      );
    }
    const expiresAt = new Date(now.getTime() + ENROLLMENT_CODE_TTL_MS);
    const codes = new Set<string>();
    while (codes.size < count) codes.add(generateEnrollmentCode());
    const issued = [...codes].map((code) => ({ code, expiresAt }));
    const stored: StoredEnrollmentCode[] = issued.map(({ code }) => ({
      id: this.ids.newId(),
      orgId,
      codeHash: hashEnrollmentCode(code, this.settings.keyring.codeHmac),
      createdAt: now,
      expiresAt,
      consumedAt: null,
      consumedByDeviceId: null,
    }));
    await repos.insertCodes(stored);
    return issued;
  }

  private openKey(orgId: string, sealed: string): string {
    return openSealedSecret(sealed, this.settings.keyring.keySealing, enrollmentKeyContext(orgId));
  }

  /** Runs a transaction again when it lost a race on a unique key (the loser rolled back entirely). */
  private async withRetry<T>(run: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (error) {
        if (!(error instanceof UniqueConflict) || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  }
}

function throwUnlessLive(state: CodeState | Exclude<CodeOutcome, 'key-invalid'>): void {
  if (state === 'unknown') throw new AppError('ENROLLMENT_CODE_INVALID');
  if (state === 'expired') throw new AppError('ENROLLMENT_CODE_EXPIRED');
  if (state === 'used') throw new AppError('ENROLLMENT_CODE_USED');
}
