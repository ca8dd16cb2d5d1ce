import { randomBytes } from 'node:crypto';
import { SEALING_CONTEXTS } from '@sts/events/event-catalogue';
import { hashSecret, openSealedSecret } from '@sts/crypto/secrets';
import { AppError } from '@sts/errors/app-error';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import type { ErrorCode } from '@sts/errors/error-code';
import type * as EnrollmentSecrets from './enrollment-secrets';
import { deriveEnrollmentKeyring, hashEnrollmentCode } from './enrollment-secrets';
import { EnrollmentService, type EnrollDeviceInput } from './enrollment-service';
import { InMemoryEnrollmentStore, ManualClock, RecordingIds } from './test/in-memory-enrollment-store';

/** Codes the generator hands out next (then random ones again). */
const mockScriptedCodes: string[] = [];
jest.mock('./enrollment-secrets', () => {
  const actual = jest.requireActual<typeof EnrollmentSecrets>('./enrollment-secrets');
  return {
    ...actual,
    generateEnrollmentCode: () => mockScriptedCodes.shift() ?? actual.generateEnrollmentCode(),
  };
});

const ORG_A = '11111111-1111-4111-8111-111111111111';
const ORG_B = '22222222-2222-4222-8222-222222222222';
const HOUR = 3_600_000;

async function codeOf(promise: Promise<unknown>): Promise<ErrorCode> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(error instanceof AppError)) throw new Error(`expected an AppError, got ${String(error)}`);
  return error.code;
}

async function errorOf(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(error instanceof AppError)) throw new Error(`expected an AppError, got ${String(error)}`);
  return error;
}

describe('enrollment service', () => {
  const master = randomBytes(32);
  const keyring = deriveEnrollmentKeyring(master);
  const eventSealingKey = randomBytes(32);
  let store: InMemoryEnrollmentStore;
  let clock: ManualClock;
  let service: EnrollmentService;

  beforeEach(() => {
    store = new InMemoryEnrollmentStore();
    clock = new ManualClock();
    service = new EnrollmentService(store, settings, clock, new RecordingIds());
  });

  /** ENROLLMENT_MAX_LIVE_CODES as small as these tests need to reach it. */
  const MAX_LIVE_CODES = 250;
  const settings = { keyring, eventSealingKey, maxLiveCodes: MAX_LIVE_CODES };
  const coldService = () => new EnrollmentService(store, settings, clock, new RecordingIds());

  async function setUp(orgId = ORG_A) {
    const { key } = await service.rotateEnrollmentKey(orgId);
    const codes = await service.createEnrollmentCodes(orgId, 5);
    return { key, codes: codes.map((c) => c.code) };
  }

  const enrollment = (
    key: string,
    code: string,
    overrides: Partial<EnrollDeviceInput> = {},
  ): EnrollDeviceInput => ({
    enrollmentKey: key,
    code,
    machineId: 'machine-1',
    hostname: 'laptop-01',
    metadata: { os: 'linux', arch: 'x64' },
    ...overrides,
  });

  describe('enrollment key', () => {
    it('is not found before it is created', async () => {
      expect(await codeOf(service.getEnrollmentKey(ORG_A))).toBe('ENROLLMENT_KEY_NOT_FOUND');
    });

    it('is created, shown again, and stored only sealed and hashed', async () => {
      const created = await service.rotateEnrollmentKey(ORG_A);
      expect(created.key).toMatch(/^sts_ek_[A-Za-z0-9_-]{43}$/);
      expect(await service.getEnrollmentKey(ORG_A)).toEqual(created);
      const stored = store.state.keys.get(ORG_A)!;
      expect(stored.keyHash).toBe(hashSecret(created.key));
      expect(JSON.stringify(stored)).not.toContain(created.key);
      expect(openSealedSecret(stored.keySealed, keyring.keySealing, `enrollment-key:${ORG_A}`)).toBe(
        created.key,
      );
      // Bound to its organization: the same row under another org does not open.
      expect(() =>
        openSealedSecret(stored.keySealed, keyring.keySealing, `enrollment-key:${ORG_B}`),
      ).toThrow();
    });

    it('rotation replaces the key at once; revocation blocks enrollments; devices keep working', async () => {
      const { key: first, codes } = await setUp();
      const enrolled = await service.enrollDevice(enrollment(first, codes[0]!));

      const { key: second } = await service.rotateEnrollmentKey(ORG_A);
      expect(second).not.toBe(first);
      expect((await service.getEnrollmentKey(ORG_A)).key).toBe(second);
      expect(await codeOf(service.enrollDevice(enrollment(first, codes[1]!, { machineId: 'm2' })))).toBe(
        'ENROLLMENT_KEY_INVALID',
      );
      await service.enrollDevice(enrollment(second, codes[1]!, { machineId: 'm2' }));

      await service.revokeEnrollmentKey(ORG_A);
      await service.revokeEnrollmentKey(ORG_A); // idempotent
      expect(await codeOf(service.getEnrollmentKey(ORG_A))).toBe('ENROLLMENT_KEY_NOT_FOUND');
      expect(await codeOf(service.enrollDevice(enrollment(second, codes[2]!, { machineId: 'm3' })))).toBe(
        'ENROLLMENT_KEY_INVALID',
      );

      expect(await service.authenticateDevice(enrolled.deviceToken)).toEqual({
        deviceId: enrolled.deviceId,
        orgId: ORG_A,
        status: 'active',
      });
    });
  });

  describe('codes', () => {
    it('default to the count asked for, expire in 24 hours, and are stored as HMACs only', async () => {
      const codes = await service.createEnrollmentCodes(ORG_A, 3);
      expect(codes).toHaveLength(3);
      expect(new Set(codes.map((c) => c.code)).size).toBe(3);
      for (const { code, expiresAt } of codes) {
        expect(code).toMatch(/^[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}$/);
        expect(expiresAt).toEqual(new Date(clock.now().getTime() + 24 * HOUR));
      }
      const stored = [...store.state.codes.values()];
      expect(stored.map((c) => c.codeHash).sort()).toEqual(
        codes.map((c) => hashEnrollmentCode(c.code, keyring.codeHmac)).sort(),
      );
      const dump = JSON.stringify(stored);
      for (const { code } of codes) {
        expect(dump).not.toContain(code);
        expect(dump).not.toContain(code.replace('-', ''));
      }
    });

    it('are at most 100 per request', async () => {
      expect(await service.createEnrollmentCodes(ORG_A, 100)).toHaveLength(100);
      for (const count of [0, -1, 101, 1.5]) {
        const error = (await service
          .createEnrollmentCodes(ORG_A, count)
          .catch((e: unknown) => e)) as AppError;
        expect(error.code).toBe('VALIDATION_FAILED');
        expect(error.message).toContain('100');
      }
    });

    const emailInput = (orgId: string) => ({
      orgId,
      email: 'a@b.test',
      requestedByName: 'Ann',
      orgName: 'Acme',
    });
    const expectCodeLimit = async (promise: Promise<unknown>) =>
      expect((await errorOf(promise)).code).toBe('ENROLLMENT_CODE_LIMIT');

    it('are at most ENROLLMENT_MAX_LIVE_CODES unused ones per organization, used and expired ones not counted (issue 41)', async () => {
      const { key } = await setUp(ORG_A);
      await service.createEnrollmentCodes(ORG_A, 100);
      const some = await service.createEnrollmentCodes(ORG_A, 100);
      const over = await errorOf(service.createEnrollmentCodes(ORG_A, 51));
      expect(over.code).toBe('ENROLLMENT_CODE_LIMIT');
      expect(over.message).toContain(`at most ${MAX_LIVE_CODES}`);
      // setUp's 5 and 200 more: 45 fit, and the refusal stored nothing.
      expect(await service.createEnrollmentCodes(ORG_A, 45)).toHaveLength(45);
      expect(store.state.codes.size).toBe(MAX_LIVE_CODES);
      await expectCodeLimit(service.emailEnrollmentCode(emailInput(ORG_A)));
      // Another organization has its own count; a used code frees its place.
      expect(await service.createEnrollmentCodes(ORG_B, 100)).toHaveLength(100);
      await service.enrollDevice(enrollment(key, some[0]!.code));
      expect(await service.createEnrollmentCodes(ORG_A, 1)).toHaveLength(1);
      await expectCodeLimit(service.createEnrollmentCodes(ORG_A, 1));
      // Expired codes free theirs.
      clock.advance(24 * HOUR);
      expect(await service.createEnrollmentCodes(ORG_A, 100)).toHaveLength(100);
    });

    it('name the count field when the count is out of range', async () => {
      expect((await errorOf(service.createEnrollmentCodes(ORG_A, 101))).fields).toEqual([
        { path: 'count', message: 'must be an integer between 1 and 100' },
      ]);
    });

    it('work once, in any case and spacing, and not after 24 hours', async () => {
      const { key, codes } = await setUp();
      await service.enrollDevice(enrollment(key, ` ${codes[0]!.toLowerCase().replace('-', ' ')} `));
      expect(await codeOf(service.enrollDevice(enrollment(key, codes[0]!, { machineId: 'm2' })))).toBe(
        'ENROLLMENT_CODE_USED',
      );

      clock.advance(24 * HOUR);
      expect(await codeOf(service.enrollDevice(enrollment(key, codes[1]!, { machineId: 'm2' })))).toBe(
        'ENROLLMENT_CODE_EXPIRED',
      );
      expect(await codeOf(service.enrollDevice(enrollment(key, '2222-2222', { machineId: 'm2' })))).toBe(
        'ENROLLMENT_CODE_INVALID',
      );
      expect(await codeOf(service.enrollDevice(enrollment(key, 'not a code', { machineId: 'm2' })))).toBe(
        'ENROLLMENT_CODE_INVALID',
      );
    });

    it('of one organization do not work with the key of another', async () => {
      const a = await setUp(ORG_A);
      const b = await setUp(ORG_B);
      expect(await codeOf(service.enrollDevice(enrollment(b.key, a.codes[0]!)))).toBe(
        'ENROLLMENT_CODE_INVALID',
      );
    });

    it('long expired are purged when new ones are made', async () => {
      await service.createEnrollmentCodes(ORG_A, 2);
      await service.createEnrollmentCodes(ORG_B, 1);
      clock.advance(24 * HOUR + 7 * 24 * HOUR + 1);
      await service.createEnrollmentCodes(ORG_A, 1);
      expect([...store.state.codes.values()].filter((c) => c.orgId === ORG_A)).toHaveLength(1);
      expect([...store.state.codes.values()].filter((c) => c.orgId === ORG_B)).toHaveLength(1);
    });

    it('are kept 7 days after they expire and purged after that', async () => {
      const codesOfA = () => [...store.state.codes.values()].filter((c) => c.orgId === ORG_A);
      await service.createEnrollmentCodes(ORG_A, 1);
      clock.advance(24 * HOUR + 7 * 24 * HOUR);
      await service.createEnrollmentCodes(ORG_A, 1);
      expect(codesOfA()).toHaveLength(2);
      clock.advance(1);
      await service.createEnrollmentCodes(ORG_A, 1);
      expect(codesOfA()).toHaveLength(2);
    });

    it('are generated again when one collides with a stored code of the organization', async () => {
      await store.transaction((repos) =>
        repos.insertCodes([
          {
            id: 'c0',
            orgId: ORG_A,
            codeHash: hashEnrollmentCode('AAAA-AAAA', keyring.codeHmac),
            createdAt: clock.now(),
            expiresAt: clock.now(),
            consumedAt: null,
            consumedByDeviceId: null,
          },
        ]),
      );
      mockScriptedCodes.push('AAAA-AAAA', 'BBBB-BBBB');
      expect((await service.createEnrollmentCodes(ORG_A, 1)).map((c) => c.code)).toEqual(['BBBB-BBBB']);
      expect(store.rollbacks).toBe(1);
    });

    it('give up after three attempts that all collide, storing nothing', async () => {
      await store.transaction((repos) =>
        repos.insertCodes([
          {
            id: 'c0',
            orgId: ORG_A,
            codeHash: hashEnrollmentCode('AAAA-AAAA', keyring.codeHmac),
            createdAt: clock.now(),
            expiresAt: clock.now(),
            consumedAt: null,
            consumedByDeviceId: null,
          },
        ]),
      );
      mockScriptedCodes.push('AAAA-AAAA', 'AAAA-AAAA', 'AAAA-AAAA', 'BBBB-BBBB');
      try {
        await expect(service.createEnrollmentCodes(ORG_A, 1)).rejects.toBeInstanceOf(UniqueConflict);
        expect(store.rollbacks).toBe(3);
        expect(store.state.codes.size).toBe(1);
      } finally {
        mockScriptedCodes.length = 0;
      }
    });
  });

  describe('e-mailed code', () => {
    it('needs a current key', async () => {
      expect(
        await codeOf(
          service.emailEnrollmentCode({
            orgId: ORG_A,
            email: 'a@b.test',
            requestedByName: 'Ann',
            orgName: 'Acme',
          }),
        ),
      ).toBe('ENROLLMENT_KEY_REQUIRED');
      expect(store.state.codes.size).toBe(0);
      expect(store.state.events).toHaveLength(0);
    });

    it('without a key tells the caller to create one first', async () => {
      const error = await errorOf(
        service.emailEnrollmentCode({
          orgId: ORG_A,
          email: 'a@b.test',
          requestedByName: 'Ann',
          orgName: 'Acme',
        }),
      );
      expect(error.code).toBe('ENROLLMENT_KEY_REQUIRED');
      expect(error.message).toBe('the organization has no enrollment key; create one first');
    });

    it('stores one code and emits it and the key sealed, for the mailer only', async () => {
      const { key } = await service.rotateEnrollmentKey(ORG_A);
      const { expiresAt } = await service.emailEnrollmentCode({
        orgId: ORG_A,
        email: ' Colleague@Example.TEST ',
        requestedByName: 'Ann',
        orgName: 'Acme',
      });
      expect(expiresAt).toEqual(new Date(clock.now().getTime() + 24 * HOUR));
      expect(store.state.codes.size).toBe(1);

      const [event] = store.eventsOf('enrollment_code.email_requested');
      expect(event).toMatchObject({
        org_id: ORG_A,
        org_name: 'Acme',
        email: 'colleague@example.test',
        requested_by_name: 'Ann',
        expires_at: expiresAt.toISOString(),
      });
      expect(JSON.stringify(event)).not.toContain(key);
      expect(event!.request_id).toEqual(expect.any(String));
      const code = openSealedSecret(
        event!.code_sealed,
        eventSealingKey,
        SEALING_CONTEXTS.enrollmentCode(event!),
      );
      expect(
        openSealedSecret(
          event!.enrollment_key_sealed,
          eventSealingKey,
          SEALING_CONTEXTS.enrollmentKey(event!),
        ),
      ).toBe(key);
      expect(() =>
        openSealedSecret(event!.code_sealed, eventSealingKey, SEALING_CONTEXTS.enrollmentKey(event!)),
      ).toThrow();
      // Bound to the recipient: the same message with another e-mail does not open.
      const redirected = { ...event!, email: 'attacker@evil.test' };
      expect(() =>
        openSealedSecret(event!.code_sealed, eventSealingKey, SEALING_CONTEXTS.enrollmentCode(redirected)),
      ).toThrow();
      expect([...store.state.codes.values()][0]!.codeHash).toBe(hashEnrollmentCode(code, keyring.codeHmac));

      const enrolled = await service.enrollDevice(enrollment(key, code));
      expect(enrolled.orgId).toBe(ORG_A);
    });
  });

  describe('enrolling a device', () => {
    it('creates an active device, issues a token, and emits device.enrolled', async () => {
      const { key, codes } = await setUp();
      const result = await service.enrollDevice(enrollment(key, codes[0]!));
      expect(result).toMatchObject({ orgId: ORG_A, reEnrolled: false });
      expect(result.deviceToken).toMatch(/^sts_dt_[A-Za-z0-9_-]{43}$/);

      const row = store.state.devices.get(result.deviceId)!;
      expect(row).toMatchObject({
        orgId: ORG_A,
        machineId: 'machine-1',
        hostname: 'laptop-01',
        status: 'active',
        metadata: { os: 'linux', arch: 'x64' },
      });
      expect(row.enrolledAt).toEqual(clock.now());
      expect(row.lastSeenAt).toEqual(clock.now());
      expect(row.tokenHash).toBe(hashSecret(result.deviceToken));
      const code = [...store.state.codes.values()].find((c) => c.consumedAt);
      expect(code?.consumedByDeviceId).toBe(result.deviceId);

      expect(store.eventsOf('device.enrolled')).toEqual([
        {
          org_id: ORG_A,
          device_id: result.deviceId,
          machine_id: 'machine-1',
          hostname: 'laptop-01',
          enrolled_at: clock.now().toISOString(),
          re_enrolled: false,
        },
      ]);
    });

    it('checks the key before anything else', async () => {
      const { codes } = await setUp();
      expect(await codeOf(service.enrollDevice(enrollment('', codes[0]!)))).toBe('ENROLLMENT_KEY_INVALID');
      expect(await codeOf(service.enrollDevice(enrollment('sts_ek_guess', codes[0]!)))).toBe(
        'ENROLLMENT_KEY_INVALID',
      );
      expect([...store.state.codes.values()].every((c) => c.consumedAt === null)).toBe(true);
    });

    it('accepts the key with surrounding whitespace', async () => {
      const { key, codes } = await setUp();
      await expect(service.enrollDevice(enrollment(` ${key}\n`, codes[0]!))).resolves.toMatchObject({
        orgId: ORG_A,
      });
    });

    it('refuses a key of the wrong shape without a lookup', async () => {
      const { codes } = await setUp();
      const reads = store.reads;
      for (const key of ['', 'sts_ek_guess', `sts_dt_${'a'.repeat(43)}`]) {
        expect(await codeOf(service.enrollDevice(enrollment(key, codes[0]!)))).toBe('ENROLLMENT_KEY_INVALID');
      }
      expect(store.reads).toBe(reads);
    });

    it('with the wrong key does not reveal anything about the code', async () => {
      const { codes } = await setUp();
      const { key: other } = await service.rotateEnrollmentKey(ORG_B);
      const wrong = `${other.slice(0, -1)}${other.endsWith('A') ? 'B' : 'A'}`;
      expect(await codeOf(service.enrollDevice(enrollment(wrong, 'bad')))).toBe('ENROLLMENT_KEY_INVALID');
      expect(await codeOf(service.enrollDevice(enrollment(wrong, codes[0]!)))).toBe('ENROLLMENT_KEY_INVALID');
    });

    it('re-enrolls a machine of the same organization with its device token: same id, new token, new hostname and metadata', async () => {
      const { key, codes } = await setUp();
      const first = await service.enrollDevice(enrollment(key, codes[0]!));
      await service.setDeviceStatus(ORG_A, first.deviceId, 'disabled');
      clock.advance(HOUR);
      const again = await service.enrollDevice(
        enrollment(key, codes[1]!, {
          hostname: 'renamed',
          metadata: { os: 'windows' },
          deviceToken: ` ${first.deviceToken} `,
        }),
      );

      expect(again).toMatchObject({ deviceId: first.deviceId, orgId: ORG_A, reEnrolled: true });
      expect(again.deviceToken).not.toBe(first.deviceToken);
      expect(await codeOf(service.authenticateDevice(first.deviceToken))).toBe('DEVICE_TOKEN_INVALID');
      expect(await service.authenticateDevice(again.deviceToken)).toEqual({
        deviceId: first.deviceId,
        orgId: ORG_A,
        status: 'disabled',
      });

      const row = store.state.devices.get(first.deviceId)!;
      expect(row).toMatchObject({ hostname: 'renamed', metadata: { os: 'windows' }, status: 'disabled' });
      expect(row.enrolledAt).toEqual(new Date(clock.now().getTime() - HOUR));
      expect(row.lastSeenAt).toEqual(clock.now());
      expect(store.state.devices.size).toBe(1);
      expect(store.eventsOf('device.enrolled').map((e) => e.re_enrolled)).toEqual([false, true]);
    });

    it('refuses to re-enroll a machine without proof that the caller is that device, changing nothing (issue 26)', async () => {
      const { key, codes } = await setUp();
      const first = await service.enrollDevice(enrollment(key, codes[0]!));
      const other = await service.enrollDevice(enrollment(key, codes[1]!, { machineId: 'machine-2' }));
      const before = structuredClone(store.state.devices.get(first.deviceId));
      const eventsBefore = store.state.events.length;
      // No token, another device's token, a token of the right shape that is nobody's, garbage.
      for (const deviceToken of [
        undefined,
        null,
        '',
        other.deviceToken,
        `sts_dt_${'A'.repeat(43)}`,
        'not a token',
      ]) {
        expect(
          await codeOf(
            service.enrollDevice(enrollment(key, codes[2]!, { hostname: 'attacker', deviceToken })),
          ),
        ).toBe('MACHINE_ALREADY_ENROLLED');
      }
      expect(store.state.devices.get(first.deviceId)).toEqual(before);
      expect(await service.authenticateDevice(first.deviceToken)).toMatchObject({ deviceId: first.deviceId });
      expect(store.state.events).toHaveLength(eventsBefore);
      // The code was not spent: it enrolls a new machine.
      await expect(
        service.enrollDevice(enrollment(key, codes[2]!, { machineId: 'machine-3' })),
      ).resolves.toMatchObject({ reEnrolled: false });
    });

    it('re-enrolls without the token once an administrator allowed it: once, within 1 hour', async () => {
      const { key, codes } = await setUp();
      const first = await service.enrollDevice(enrollment(key, codes[0]!));
      expect(await codeOf(service.allowReEnrollment(ORG_B, first.deviceId))).toBe('DEVICE_NOT_FOUND');
      expect(await codeOf(service.allowReEnrollment(ORG_A, 'not-a-device'))).toBe('DEVICE_NOT_FOUND');

      const { allowedUntil } = await service.allowReEnrollment(ORG_A, first.deviceId);
      expect(allowedUntil).toEqual(new Date(clock.now().getTime() + HOUR));
      const recovered = await service.enrollDevice(enrollment(key, codes[1]!, { hostname: 'reinstalled' }));
      expect(recovered).toMatchObject({ deviceId: first.deviceId, reEnrolled: true });
      expect(await codeOf(service.authenticateDevice(first.deviceToken))).toBe('DEVICE_TOKEN_INVALID');
      expect(store.state.devices.get(first.deviceId)).toMatchObject({
        hostname: 'reinstalled',
        reEnrollmentAllowedUntil: null,
      });
      // Used up.
      expect(await codeOf(service.enrollDevice(enrollment(key, codes[2]!)))).toBe('MACHINE_ALREADY_ENROLLED');
      // Expired after an hour (issue 26 review: a day let any valid code take the device for that long).
      await service.allowReEnrollment(ORG_A, first.deviceId);
      clock.advance(HOUR);
      const [fresh] = await service.createEnrollmentCodes(ORG_A, 1);
      expect(await codeOf(service.enrollDevice(enrollment(key, fresh!.code)))).toBe(
        'MACHINE_ALREADY_ENROLLED',
      );
      // Asking again opens a new hour, again for one re-enrollment.
      await service.allowReEnrollment(ORG_A, first.deviceId);
      clock.advance(HOUR - 1);
      await expect(service.enrollDevice(enrollment(key, fresh!.code))).resolves.toMatchObject({
        deviceId: first.deviceId,
        reEnrolled: true,
      });
    });

    it('checks the proof again in the write: a token replaced meanwhile refuses, with the code unused', async () => {
      const { key, codes } = await setUp();
      const first = await service.enrollDevice(enrollment(key, codes[0]!));
      // Another re-enrollment (the real agent's) replaces the token between this one's read and write.
      store.interleaveBeforeNextTransaction(async () => {
        store.state.devices.get(first.deviceId)!.tokenHash = hashSecret('sts_dt_replaced');
      });
      expect(
        await codeOf(
          coldService().enrollDevice(enrollment(key, codes[1]!, { deviceToken: first.deviceToken })),
        ),
      ).toBe('MACHINE_ALREADY_ENROLLED');
      expect(store.rollbacks).toBe(1);
      expect([...store.state.codes.values()].filter((c) => c.consumedAt)).toHaveLength(1);
      expect(store.eventsOf('device.enrolled')).toHaveLength(1);
    });

    it('refuses a machine enrolled in another organization and leaves the code unused', async () => {
      const a = await setUp(ORG_A);
      const b = await setUp(ORG_B);
      await service.enrollDevice(enrollment(a.key, a.codes[0]!));
      const eventsBefore = store.state.events.length;

      expect(await codeOf(service.enrollDevice(enrollment(b.key, b.codes[0]!)))).toBe(
        'MACHINE_ENROLLED_ELSEWHERE',
      );
      expect([...store.state.codes.values()].filter((c) => c.orgId === ORG_B && c.consumedAt)).toHaveLength(
        0,
      );
      expect(store.state.events).toHaveLength(eventsBefore);
      // An invalid code is reported as such first: only a code holder learns where the machine is.
      expect(await codeOf(service.enrollDevice(enrollment(b.key, '2222-2222')))).toBe(
        'ENROLLMENT_CODE_INVALID',
      );
      // The code still works for another machine.
      await service.enrollDevice(enrollment(b.key, b.codes[0]!, { machineId: 'other' }));
    });

    it('reports a bad or spent code before revealing that the machine is enrolled, also when the key is not remembered', async () => {
      const a = await setUp(ORG_A);
      const b = await setUp(ORG_B);
      await service.enrollDevice(enrollment(a.key, a.codes[0]!));
      await service.enrollDevice(enrollment(b.key, b.codes[0]!, { machineId: 'b-machine' }));
      expect(await codeOf(coldService().enrollDevice(enrollment(b.key, '2222-2222')))).toBe(
        'ENROLLMENT_CODE_INVALID',
      );
      expect(await codeOf(coldService().enrollDevice(enrollment(b.key, b.codes[0]!)))).toBe(
        'ENROLLMENT_CODE_USED',
      );
      expect(await codeOf(coldService().enrollDevice(enrollment(a.key, a.codes[0]!)))).toBe(
        'ENROLLMENT_CODE_USED',
      );
    });

    it('tells the caller how to proceed when the machine is enrolled elsewhere or already here', async () => {
      const a = await setUp(ORG_A);
      const b = await setUp(ORG_B);
      await service.enrollDevice(enrollment(a.key, a.codes[0]!));
      const elsewhere = await errorOf(service.enrollDevice(enrollment(b.key, b.codes[0]!)));
      expect(elsewhere.code).toBe('MACHINE_ENROLLED_ELSEWHERE');
      expect(elsewhere.message).toBe(
        'this machine is enrolled in another organization; delete it there first',
      );
      const here = await errorOf(service.enrollDevice(enrollment(a.key, a.codes[1]!)));
      expect(here.code).toBe('MACHINE_ALREADY_ENROLLED');
      expect(here.message).toContain('this machine is already enrolled in this organization');
      expect(here.message).toContain('POST /api/devices/{device_id}/re-enrollment');
    });

    it('gives exactly one success for concurrent enrollments with one code', async () => {
      const { key, codes } = await setUp();
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          service.enrollDevice(enrollment(key, codes[0]!, { machineId: `m-${i}` })),
        ),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      for (const o of outcomes)
        if (o.status === 'rejected') expect((o.reason as AppError).code).toBe('ENROLLMENT_CODE_USED');
      expect(store.state.devices.size).toBe(1);
    });

    it('takes one round trip for a new machine once the key is known, and checks the key in it', async () => {
      const { key, codes } = await setUp();
      await service.enrollDevice(enrollment(key, codes[0]!));
      const reads = store.reads;
      const second = await service.enrollDevice(enrollment(key, codes[1]!, { machineId: 'machine-2' }));
      expect(store.reads).toBe(reads);
      expect(second.reEnrolled).toBe(false);
      // A known machine goes the general way: same device, new token.
      const third = await service.enrollDevice(
        enrollment(key, codes[2]!, { machineId: 'machine-2', deviceToken: second.deviceToken }),
      );
      expect(third).toMatchObject({ deviceId: second.deviceId, reEnrolled: true });
      expect(store.state.devices.size).toBe(2);
    });

    it('refuses a spent or unknown code with a remembered key in the one write, without a read', async () => {
      const { key, codes } = await setUp();
      await service.enrollDevice(enrollment(key, codes[0]!));
      const reads = store.reads;
      expect(await codeOf(service.enrollDevice(enrollment(key, codes[0]!, { machineId: 'm2' })))).toBe(
        'ENROLLMENT_CODE_USED',
      );
      expect(await codeOf(service.enrollDevice(enrollment(key, '2222-2222', { machineId: 'm2' })))).toBe(
        'ENROLLMENT_CODE_INVALID',
      );
      expect(store.reads).toBe(reads);
    });

    it('remembers the organizations of several keys', async () => {
      const a = await setUp(ORG_A);
      const b = await setUp(ORG_B);
      await service.enrollDevice(enrollment(a.key, a.codes[0]!, { machineId: 'a-1' }));
      await service.enrollDevice(enrollment(b.key, b.codes[0]!, { machineId: 'b-1' }));
      const reads = store.reads;
      await service.enrollDevice(enrollment(a.key, a.codes[1]!, { machineId: 'a-2' }));
      await service.enrollDevice(enrollment(b.key, b.codes[1]!, { machineId: 'b-2' }));
      expect(store.reads).toBe(reads);
    });

    it('forgets all remembered organizations once 10 000 keys are remembered (bounded memory)', async () => {
      // White-box: reaching the bound through enrollments would take 10 000 keys.
      const hints = (service as unknown as { orgHints: Map<string, string> }).orgHints;
      for (let i = 0; i < 9_999; i++) hints.set(`key-hash-${i}`, ORG_B);
      const a = await setUp(ORG_A);
      const b = await setUp(ORG_B);
      await service.enrollDevice(enrollment(a.key, a.codes[0]!));
      expect(hints.size).toBe(10_000);
      await service.enrollDevice(enrollment(b.key, b.codes[0]!, { machineId: 'machine-2' }));
      expect(hints.size).toBe(1);
    });

    it('spends no retry when a remembered key meets a known machine: the general path gets all three attempts', async () => {
      const { key, codes } = await setUp();
      const first = await service.enrollDevice(enrollment(key, codes[0]!));
      const row = structuredClone(store.state.devices.get(first.deviceId)!);
      // The fast path's write (refused: the machine is known), then two lost races of the general path.
      store.interleaveBeforeNextTransaction(() => Promise.resolve());
      store.interleaveBeforeNextTransaction(() => {
        store.state.devices.delete(first.deviceId);
        return Promise.resolve();
      });
      store.interleaveBeforeNextTransaction(() => {
        store.state.devices.set(row.id, row);
        return Promise.resolve();
      });
      await expect(
        service.enrollDevice(enrollment(key, codes[1]!, { deviceToken: first.deviceToken })),
      ).resolves.toMatchObject({ deviceId: first.deviceId, reEnrolled: true });
      expect(store.rollbacks).toBe(3);
    });

    it('refuses the key when it is rotated between the read and the write', async () => {
      const { key, codes } = await setUp();
      store.interleaveBeforeNextTransaction(async () => {
        store.state.keys.set(ORG_A, { ...store.state.keys.get(ORG_A)!, keyHash: 'rotated' });
      });
      expect(await codeOf(coldService().enrollDevice(enrollment(key, codes[0]!)))).toBe(
        'ENROLLMENT_KEY_INVALID',
      );
      expect([...store.state.codes.values()].every((c) => c.consumedAt === null)).toBe(true);
    });

    /** What a concurrent enrollment that commits first leaves behind: the machine enrolled with one of the codes. */
    const concurrentWinner = (orgId: string, code: string, deviceId: string) => () => {
      const stored = [...store.state.codes.values()].find(
        (c) => c.orgId === orgId && c.codeHash === hashEnrollmentCode(code, keyring.codeHmac),
      )!;
      stored.consumedAt = clock.now();
      stored.consumedByDeviceId = deviceId;
      store.state.devices.set(deviceId, {
        id: deviceId,
        orgId,
        machineId: 'machine-1',
        hostname: 'winner',
        status: 'active',
        metadata: {},
        enrolledAt: clock.now(),
        lastSeenAt: clock.now(),
        tokenHash: 'winner-token',
        reEnrollmentAllowedUntil: null,
      });
      return Promise.resolve();
    };

    it('retries when the same new machine was enrolled concurrently in this organization, and then needs proof', async () => {
      const { key, codes } = await setUp();
      const winnerId = new RecordingIds().newId();
      store.interleaveBeforeNextCommit(concurrentWinner(ORG_A, codes[1]!, winnerId));
      // The machine is now the winner's device: this caller holds no proof of being it.
      expect(await codeOf(service.enrollDevice(enrollment(key, codes[0]!)))).toBe('MACHINE_ALREADY_ENROLLED');
      expect(store.state.devices.size).toBe(1);
      expect(store.state.devices.get(winnerId)?.tokenHash).toBe('winner-token');
      expect(store.rollbacks).toBe(1);
      expect([...store.state.codes.values()].filter((c) => c.consumedAt)).toHaveLength(1);
      expect(store.eventsOf('device.enrolled')).toHaveLength(0);
    });

    it('reports the other organization when a concurrent enrollment there won the machine', async () => {
      const a = await setUp(ORG_A);
      const b = await setUp(ORG_B);
      store.interleaveBeforeNextCommit(concurrentWinner(ORG_B, b.codes[0]!, new RecordingIds().newId()));
      expect(await codeOf(service.enrollDevice(enrollment(a.key, a.codes[0]!)))).toBe(
        'MACHINE_ENROLLED_ELSEWHERE',
      );
      expect([...store.state.codes.values()].filter((c) => c.orgId === ORG_A && c.consumedAt)).toHaveLength(
        0,
      );
      expect(store.eventsOf('device.enrolled')).toHaveLength(0);
    });

    it('enrolls anew when the device to re-enroll is deleted meanwhile, consuming the code once', async () => {
      const { key, codes } = await setUp();
      const first = await service.enrollDevice(enrollment(key, codes[0]!));
      store.interleaveBeforeNextTransaction(() => {
        store.state.devices.delete(first.deviceId);
        return Promise.resolve();
      });
      // A fresh instance knows no organizations yet, so it reads first and then writes.
      const again = await coldService().enrollDevice(
        enrollment(key, codes[1]!, { deviceToken: first.deviceToken }),
      );
      expect(again.reEnrolled).toBe(false);
      expect(again.deviceId).not.toBe(first.deviceId);
      expect(store.rollbacks).toBe(1);
      const consumer = [...store.state.codes.values()].find(
        (c) => c.codeHash === hashEnrollmentCode(codes[1]!, keyring.codeHmac),
      );
      expect(consumer?.consumedByDeviceId).toBe(again.deviceId);
    });
  });

  describe('devices', () => {
    async function enrollMany(n: number, orgId = ORG_A) {
      const { key } = await service.rotateEnrollmentKey(orgId);
      const codes = await service.createEnrollmentCodes(orgId, n);
      const results = [];
      for (let i = 0; i < n; i++) {
        clock.advance(1_000);
        results.push(
          await service.enrollDevice(
            enrollment(key, codes[i]!.code, { machineId: `${orgId}-m${i}`, hostname: `host-${i}` }),
          ),
        );
      }
      return results;
    }

    it('are disabled and enabled idempotently, with one event per actual change', async () => {
      const [device] = await enrollMany(1);
      await service.setDeviceStatus(ORG_A, device!.deviceId, 'disabled');
      await service.setDeviceStatus(ORG_A, device!.deviceId, 'disabled');
      expect((await service.authenticateDevice(device!.deviceToken)).status).toBe('disabled');
      await service.setDeviceStatus(ORG_A, device!.deviceId, 'active');
      await service.setDeviceStatus(ORG_A, device!.deviceId, 'active');
      expect(store.eventsOf('device.disabled')).toEqual([
        { org_id: ORG_A, device_id: device!.deviceId, hostname: 'host-0', at: clock.now().toISOString() },
      ]);
      expect(store.eventsOf('device.enabled')).toHaveLength(1);
    });

    it('are read one by one within their organization only', async () => {
      const [device] = await enrollMany(1);
      const [theirs] = await enrollMany(1, ORG_B);
      expect(await service.getDevice(ORG_A, device!.deviceId)).toMatchObject({
        id: device!.deviceId,
        orgId: ORG_A,
        hostname: 'host-0',
        status: 'active',
      });
      for (const deviceId of [theirs!.deviceId, '33333333-3333-4333-8333-333333333333'])
        expect(await codeOf(service.getDevice(ORG_A, deviceId))).toBe('DEVICE_NOT_FOUND');
    });

    it('emit device.disabled when disabled and device.enabled when enabled again', async () => {
      const [device] = await enrollMany(1);
      await service.setDeviceStatus(ORG_A, device!.deviceId, 'disabled');
      await service.setDeviceStatus(ORG_A, device!.deviceId, 'active');
      expect(store.state.events.map((e) => e.type)).toEqual([
        'device.enrolled',
        'device.disabled',
        'device.enabled',
      ]);
    });

    it('are seen at the latest of their sightings, all devices in one write', async () => {
      const [one, two] = await enrollMany(2);
      const at = (ms: number) => new Date(clock.now().getTime() + ms);
      const reads = store.reads;
      expect(
        await service.recordSightings([
          { orgId: ORG_A, deviceId: one!.deviceId, at: at(1_000) },
          { orgId: ORG_A, deviceId: one!.deviceId, at: at(3_000) },
          { orgId: ORG_A, deviceId: two!.deviceId, at: at(5_000) },
          { orgId: ORG_A, deviceId: one!.deviceId, at: at(2_000) },
        ]),
      ).toBe(2);
      expect(store.reads).toBe(reads + 1);
      expect(store.state.devices.get(one!.deviceId)?.lastSeenAt).toEqual(at(3_000));
      expect(store.state.devices.get(two!.deviceId)?.lastSeenAt).toEqual(at(5_000));
    });

    it('are not written to when there are no sightings', async () => {
      const reads = store.reads;
      expect(await service.recordSightings([])).toBe(0);
      expect(store.reads).toBe(reads);
    });

    it('of another organization, or unknown, are not found', async () => {
      const [device] = await enrollMany(1);
      for (const id of [device!.deviceId, 'not-a-uuid', '33333333-3333-4333-8333-333333333333']) {
        expect(await codeOf(service.setDeviceStatus(ORG_B, id, 'disabled'))).toBe('DEVICE_NOT_FOUND');
        expect(await codeOf(service.deleteDevice(ORG_B, id))).toBe('DEVICE_NOT_FOUND');
      }
      expect(store.state.devices.get(device!.deviceId)?.status).toBe('active');
    });

    it('are deleted with their token, and the machine may enroll again as a new device', async () => {
      const [device] = await enrollMany(1);
      await service.deleteDevice(ORG_A, device!.deviceId);
      expect(store.eventsOf('device.deleted')).toEqual([
        {
          org_id: ORG_A,
          device_id: device!.deviceId,
          machine_id: `${ORG_A}-m0`,
          hostname: 'host-0',
          at: clock.now().toISOString(),
        },
      ]);
      expect(await codeOf(service.authenticateDevice(device!.deviceToken))).toBe('DEVICE_TOKEN_INVALID');
      expect([...store.state.codes.values()].some((c) => c.consumedByDeviceId === device!.deviceId)).toBe(
        false,
      );
      expect(await codeOf(service.deleteDevice(ORG_A, device!.deviceId))).toBe('DEVICE_NOT_FOUND');

      const { key } = await service.getEnrollmentKey(ORG_A);
      const [code] = await service.createEnrollmentCodes(ORG_A, 1);
      const again = await service.enrollDevice(enrollment(key, code!.code, { machineId: `${ORG_A}-m0` }));
      expect(again.reEnrolled).toBe(false);
      expect(again.deviceId).not.toBe(device!.deviceId);
    });

    it('are listed by enrollment time, paged, filtered by status and searched', async () => {
      const devices = await enrollMany(5);
      await enrollMany(2, ORG_B);
      await service.setDeviceStatus(ORG_A, devices[1]!.deviceId, 'disabled');

      const first = await service.listDevices(
        ORG_A,
        { status: null, query: null },
        { limit: 2, after: null },
      );
      expect(first.map((d) => d.hostname)).toEqual(['host-0', 'host-1', 'host-2']);
      const after = { at: first[1]!.enrolledAt.toISOString(), id: first[1]!.id };
      const second = await service.listDevices(ORG_A, { status: null, query: null }, { limit: 2, after });
      expect(second.map((d) => d.hostname)).toEqual(['host-2', 'host-3', 'host-4']);

      expect(
        (
          await service.listDevices(ORG_A, { status: 'disabled', query: null }, { limit: 50, after: null })
        ).map((d) => d.hostname),
      ).toEqual(['host-1']);
      expect(
        (
          await service.listDevices(ORG_A, { status: 'active', query: 'HOST-3' }, { limit: 50, after: null })
        ).map((d) => d.hostname),
      ).toEqual(['host-3']);
      expect(
        (
          await service.listDevices(ORG_A, { status: null, query: `${ORG_A}-M4` }, { limit: 50, after: null })
        ).map((d) => d.hostname),
      ).toEqual(['host-4']);
      expect(
        await service.listDevices(ORG_A, { status: null, query: `${ORG_B}` }, { limit: 50, after: null }),
      ).toEqual([]);
    });
  });

  describe('device tokens', () => {
    it('refuse anything that is not a current token', async () => {
      for (const token of ['', 'sts_dt_x', `sts_ek_${'a'.repeat(43)}`, `sts_dt_${'a'.repeat(43)}`]) {
        expect(await codeOf(service.authenticateDevice(token))).toBe('DEVICE_TOKEN_INVALID');
      }
    });

    it('refuse a token of the wrong shape without a lookup', async () => {
      const reads = store.reads;
      for (const token of ['', 'sts_dt_x', `sts_ek_${'a'.repeat(43)}`]) {
        expect(await codeOf(service.authenticateDevice(token))).toBe('DEVICE_TOKEN_INVALID');
      }
      expect(store.reads).toBe(reads);
    });

    it('accept the current token with surrounding whitespace', async () => {
      const { key, codes } = await setUp();
      const enrolled = await service.enrollDevice(enrollment(key, codes[0]!));
      expect(await service.authenticateDevice(` ${enrolled.deviceToken}\n`)).toMatchObject({
        deviceId: enrolled.deviceId,
      });
    });
  });
});
