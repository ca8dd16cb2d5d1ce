import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { SEALING_CONTEXTS } from '@sts/events/event-catalogue';
import { loadConfig } from '@sts/config/load-config';
import { openSealedSecret } from '@sts/crypto/secrets';
import { deriveEnrollmentKeyring, hashEnrollmentCode } from '@sts/enrollment-domain/enrollment-secrets';
import type { AppError } from '@sts/errors/app-error';
import { eventSubject } from '@sts/events/subjects';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { eventually } from '@sts/testing/eventually';
import { testServiceAuth } from '@sts/testing/service-auth';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import {
  DeviceStatus,
  EnrollmentServiceService,
  type EnrollDeviceRequest,
} from '@sts/proto/gen/enrollment/v1/enrollment';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { Client } from 'pg';
import { enrollmentEnvSchema } from './enrollment-config';
import { listDevicesQuery } from './postgres-enrollment-store';
import { startEnrollmentService, type RunningService } from './start-enrollment-service';

const ANY = DeviceStatus.DEVICE_STATUS_UNSPECIFIED;
const CODE_PATTERN = /^[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}-[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}$/;

async function failure(promise: Promise<unknown>): Promise<AppError> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error as AppError,
  );
}

describe('enrollment service over gRPC with PostgreSQL and NATS', () => {
  const serviceAuth = testServiceAuth();
  const logger = createLogger('enrollment-int', 'silent');
  const sealingKey = randomBytes(32);
  const masterKey = randomBytes(32);
  const namespace = uniqueNatsNamespace();
  let database: TestDatabase;
  let service: RunningService;
  let nats: JetStreamConnection;
  let pg: Client;
  let client: ReturnType<typeof createPromiseClient<typeof EnrollmentServiceService>>;

  beforeAll(async () => {
    database = await createTestDatabase('enrollment');
    const config = loadConfig(enrollmentEnvSchema, {
      DATABASE_URL: database.url,
      NATS_NAMESPACE: namespace,
      SECRET_SEALING_KEY: sealingKey.toString('base64'),
      ENROLLMENT_KEY_ENCRYPTION_KEY: masterKey.toString('base64'),
      GRPC_PORT: '0',
      ...serviceAuth.envOf('enrollment'),
    });
    service = await startEnrollmentService(config, logger);
    client = createPromiseClient(
      EnrollmentServiceService,
      `127.0.0.1:${service.grpcPort}`,
      10_000,
      serviceAuth.as('enrollment'),
    );
    nats = await connectJetStream({ url: config.NATS_URL, name: 'enrollment-int', logger });
    pg = new Client({ connectionString: database.url });
    await pg.connect();
  });

  afterAll(async () => {
    client?.close();
    await pg?.end();
    await service?.stop();
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await database?.drop();
  });

  async function query<Row extends object>(sql: string, params: unknown[] = []): Promise<Row[]> {
    return (await pg.query<Row>(sql, params)).rows;
  }

  async function count(sql: string, params: unknown[] = []): Promise<number> {
    const [row] = await query<{ n: string }>(sql, params);
    return Number(row!.n);
  }

  /** A fresh organization with a key and `n` codes. */
  async function organization(n = 3): Promise<{ orgId: string; key: string; codes: string[] }> {
    const orgId = randomUUID();
    const { key } = await client.rotateEnrollmentKey({ orgId });
    const { codes } = await client.createEnrollmentCodes({ orgId, count: n });
    return { orgId, key: key!.key, codes: codes.map((c) => c.code) };
  }

  const enroll = (key: string, code: string, overrides: Partial<EnrollDeviceRequest> = {}) =>
    client.enrollDevice({
      enrollmentKey: key,
      code,
      machineId: `machine-${randomUUID()}`,
      hostname: 'laptop-01',
      metadataJson: JSON.stringify({ os: 'linux', arch: 'x64' }),
      deviceToken: '',
      ...overrides,
    });

  describe('enrollment key', () => {
    it('is created, read back, rotated and revoked; enrolled devices keep working throughout', async () => {
      const orgId = randomUUID();
      expect((await failure(client.getEnrollmentKey({ orgId }))).code).toBe('ENROLLMENT_KEY_NOT_FOUND');

      const { key: created } = await client.rotateEnrollmentKey({ orgId });
      expect(created!.key).toMatch(/^sts_ek_[A-Za-z0-9_-]{43}$/);
      expect((await client.getEnrollmentKey({ orgId })).key).toEqual(created);

      // At rest: sealed and hashed, never plain.
      const [stored] = await query<{ key_hash: string; key_sealed: string }>(
        `select key_hash, key_sealed from enrollment.enrollment_keys where org_id = $1`,
        [orgId],
      );
      expect(stored!.key_hash).toBe(createHash('sha256').update(created!.key).digest('hex'));
      expect(stored!.key_sealed).not.toContain(created!.key);
      expect(
        openSealedSecret(
          stored!.key_sealed,
          deriveEnrollmentKeyring(masterKey).keySealing,
          `enrollment-key:${orgId}`,
        ),
      ).toBe(created!.key);

      const { codes } = await client.createEnrollmentCodes({ orgId, count: 4 });
      const device = await enroll(created!.key, codes[0]!.code);

      const { key: rotated } = await client.rotateEnrollmentKey({ orgId });
      expect(rotated!.key).not.toBe(created!.key);
      expect((await client.getEnrollmentKey({ orgId })).key!.key).toBe(rotated!.key);
      expect((await failure(enroll(created!.key, codes[1]!.code))).code).toBe('ENROLLMENT_KEY_INVALID');
      await enroll(rotated!.key, codes[1]!.code);
      expect((await client.authenticateDevice({ deviceToken: device.deviceToken })).deviceId).toBe(
        device.deviceId,
      );

      await client.revokeEnrollmentKey({ orgId });
      await client.revokeEnrollmentKey({ orgId });
      expect((await failure(client.getEnrollmentKey({ orgId }))).code).toBe('ENROLLMENT_KEY_NOT_FOUND');
      expect((await failure(enroll(rotated!.key, codes[2]!.code))).code).toBe('ENROLLMENT_KEY_INVALID');
      expect(await client.authenticateDevice({ deviceToken: device.deviceToken })).toEqual({
        deviceId: device.deviceId,
        orgId,
        status: DeviceStatus.DEVICE_STATUS_ACTIVE,
      });
      // The refused attempts consumed nothing.
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where org_id = $1 and consumed_at is not null`,
          [orgId],
        ),
      ).toBe(2);
    });

    it('refuses missing and malformed keys', async () => {
      const { codes } = await organization(1);
      for (const key of ['', 'sts_ek_', 'Bearer x', `sts_ek_${'A'.repeat(43)}`]) {
        expect((await failure(enroll(key, codes[0]!))).code).toBe('ENROLLMENT_KEY_INVALID');
      }
    });
  });

  describe('codes', () => {
    it('have the contract format, default to one, stop at 100, and live 24 hours', async () => {
      const orgId = randomUUID();
      const before = Date.now();
      const one = await client.createEnrollmentCodes({ orgId, count: 0 });
      expect(one.codes).toHaveLength(1);
      expect(one.codes[0]!.code).toMatch(CODE_PATTERN);
      const ttl = one.codes[0]!.expiresAt!.getTime() - before;
      expect(ttl).toBeGreaterThanOrEqual(24 * 3_600_000 - 1_000);
      expect(ttl).toBeLessThanOrEqual(24 * 3_600_000 + 5_000);

      const hundred = await client.createEnrollmentCodes({ orgId, count: 100 });
      expect(new Set(hundred.codes.map((c) => c.code)).size).toBe(100);
      for (const count of [101, -1]) {
        const error = await failure(client.createEnrollmentCodes({ orgId, count }));
        expect(error.code).toBe('VALIDATION_FAILED');
        expect(error.message).toContain('100');
      }
      expect(
        await count(`select count(*) as n from enrollment.enrollment_codes where org_id = $1`, [orgId]),
      ).toBe(101);
    });

    it('are stored as HMACs under a key outside the database, never in plain text', async () => {
      const orgId = randomUUID();
      const { codes } = await client.createEnrollmentCodes({ orgId, count: 10 });
      const rows = await query<Record<string, unknown>>(
        `select * from enrollment.enrollment_codes where org_id = $1`,
        [orgId],
      );
      const dump = JSON.stringify(rows);
      const hmacKey = deriveEnrollmentKeyring(masterKey).codeHmac;
      for (const { code } of codes) {
        expect(dump).not.toContain(code);
        expect(dump).not.toContain(code.replace('-', ''));
        expect(dump).not.toContain(createHash('sha256').update(code).digest('hex'));
        expect(rows.some((r) => r.code_hash === hashEnrollmentCode(code, hmacKey))).toBe(true);
      }
    });

    it('are accepted in any case and spacing, once; expired and unknown ones are refused', async () => {
      const { key, codes } = await organization(3);
      await enroll(key, `  ${codes[0]!.toLowerCase().replace('-', ' ')} `);
      expect((await failure(enroll(key, codes[0]!))).code).toBe('ENROLLMENT_CODE_USED');

      await pg.query(
        `update enrollment.enrollment_codes set expires_at = now() - interval '1 second' where code_hash = $1`,
        [hashEnrollmentCode(codes[1]!, deriveEnrollmentKeyring(masterKey).codeHmac)],
      );
      expect((await failure(enroll(key, codes[1]!))).code).toBe('ENROLLMENT_CODE_EXPIRED');
      expect((await failure(enroll(key, '2345-6789'))).code).toBe('ENROLLMENT_CODE_INVALID');
      expect((await failure(enroll(key, ''))).code).toBe('ENROLLMENT_CODE_INVALID');
      expect((await failure(enroll(key, 'DROP TABLE'))).code).toBe('ENROLLMENT_CODE_INVALID');
      await enroll(key, codes[2]!);
    });

    it('give exactly one success when 20 agents race with one code', async () => {
      const { orgId, key, codes } = await organization(1);
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => enroll(key, codes[0]!, { machineId: `racer-${orgId}-${i}` })),
      );
      const winners = outcomes.filter(
        (o): o is PromiseFulfilledResult<Awaited<ReturnType<typeof enroll>>> => o.status === 'fulfilled',
      );
      expect(winners).toHaveLength(1);
      for (const o of outcomes)
        if (o.status === 'rejected') expect((o.reason as AppError).code).toBe('ENROLLMENT_CODE_USED');
      expect(await count(`select count(*) as n from enrollment.devices where org_id = $1`, [orgId])).toBe(1);
      const [code] = await query<{ consumed_by_device_id: string }>(
        `select consumed_by_device_id from enrollment.enrollment_codes where org_id = $1`,
        [orgId],
      );
      expect(code!.consumed_by_device_id).toBe(winners[0]!.value.deviceId);
    });
  });

  describe('enrolling', () => {
    it('creates the device and publishes device.enrolled through the outbox to JetStream', async () => {
      const { orgId, key, codes } = await organization(1);
      const result = await enroll(key, codes[0]!, { machineId: 'published-machine', hostname: 'Büro-PC 💻' });
      expect(result).toMatchObject({ orgId, reEnrolled: false });
      expect(result.deviceToken).toMatch(/^sts_dt_[A-Za-z0-9_-]{43}$/);
      const [row] = await query<{ token_hash: string }>(
        `select token_hash from enrollment.devices where id = $1`,
        [result.deviceId],
      );
      expect(row!.token_hash).toBe(createHash('sha256').update(result.deviceToken).digest('hex'));

      const stream = `${namespace.toUpperCase()}_EVENTS`;
      const data = await eventually(async () => {
        const message = await nats.jsm.streams
          .getMessage(stream, { last_by_subj: eventSubject(namespace, 'device.enrolled') })
          .catch(() => null);
        const published = message?.json<{ data: Record<string, unknown> }>().data;
        return published?.device_id === result.deviceId ? published : undefined;
      });
      expect(data).toMatchObject({
        org_id: orgId,
        machine_id: 'published-machine',
        hostname: 'Büro-PC 💻',
        re_enrolled: false,
      });
    });

    it('re-enrolls a machine in the same organization with its token: same id, new token, hostname and metadata replaced', async () => {
      const { orgId, key, codes } = await organization(2);
      const first = await enroll(key, codes[0]!, {
        machineId: 'reenroll-1',
        hostname: 'old-name',
        metadataJson: '{"os":"linux","extra":true}',
      });
      const [before] = await query<{ enrolled_at: Date }>(
        `select enrolled_at from enrollment.devices where id = $1`,
        [first.deviceId],
      );
      const again = await enroll(key, codes[1]!, {
        machineId: 'reenroll-1',
        hostname: 'new-name',
        metadataJson: '{"os":"windows"}',
        deviceToken: first.deviceToken,
      });

      expect(again).toMatchObject({ deviceId: first.deviceId, orgId, reEnrolled: true });
      expect((await failure(client.authenticateDevice({ deviceToken: first.deviceToken }))).code).toBe(
        'DEVICE_TOKEN_INVALID',
      );
      expect((await client.authenticateDevice({ deviceToken: again.deviceToken })).deviceId).toBe(
        first.deviceId,
      );

      const { devices } = await client.listDevices({ orgId, limit: 0, cursor: '', status: ANY, query: '' });
      expect(devices).toHaveLength(1);
      expect(devices[0]).toMatchObject({
        id: first.deviceId,
        name: 'new-name',
        machineId: 'reenroll-1',
        status: DeviceStatus.DEVICE_STATUS_ACTIVE,
      });
      expect(JSON.parse(devices[0]!.metadataJson)).toEqual({ os: 'windows' });
      expect(devices[0]!.enrolledAt).toEqual(before!.enrolled_at);
      expect(
        await count(
          `select count(*) as n from enrollment.outbox where type = 'device.enrolled' and envelope->'data'->>'device_id' = $1 and (envelope->'data'->>'re_enrolled')::boolean`,
          [first.deviceId],
        ),
      ).toBe(1);
    });

    it('refuses a re-enrollment without proof (409 MACHINE_ALREADY_ENROLLED), and takes an administrator approval once', async () => {
      const { orgId, key, codes } = await organization(3);
      const first = await enroll(key, codes[0]!, { machineId: 'reenroll-proof', hostname: 'real' });
      const row = () =>
        query<{ hostname: string; token_hash: string; re_enrollment_allowed_until: Date | null }>(
          `select hostname, token_hash, re_enrollment_allowed_until from enrollment.devices where id = $1`,
          [first.deviceId],
        );
      const [before] = await row();
      const refused = await failure(enroll(key, codes[1]!, { machineId: 'reenroll-proof', hostname: 'x' }));
      expect([refused.code, refused.httpStatus]).toEqual(['MACHINE_ALREADY_ENROLLED', 409]);
      expect(await row()).toEqual([before]);
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where org_id = $1 and consumed_at is null`,
          [orgId],
        ),
      ).toBe(2);

      expect(
        (await failure(client.allowReEnrollment({ orgId: randomUUID(), deviceId: first.deviceId }))).code,
      ).toBe('DEVICE_NOT_FOUND');
      const { allowedUntil } = await client.allowReEnrollment({ orgId, deviceId: first.deviceId });
      // An hour, not a day: while it lasts any valid code takes the device.
      expect(allowedUntil!.getTime() - Date.now()).toBeGreaterThan(0.9 * 3_600_000);
      expect(allowedUntil!.getTime() - Date.now()).toBeLessThanOrEqual(3_600_000);
      const recovered = await enroll(key, codes[1]!, {
        machineId: 'reenroll-proof',
        hostname: 'reinstalled',
      });
      expect(recovered).toMatchObject({ deviceId: first.deviceId, reEnrolled: true });
      expect((await row())[0]).toMatchObject({ hostname: 'reinstalled', re_enrollment_allowed_until: null });
      expect((await failure(enroll(key, codes[2]!, { machineId: 'reenroll-proof' }))).code).toBe(
        'MACHINE_ALREADY_ENROLLED',
      );
    });

    it('lets exactly one of concurrent re-enrollments through on one approval, spending one code (issue 26)', async () => {
      const { orgId, key, codes } = await organization(7);
      const first = await enroll(key, codes[0]!, { machineId: 'reenroll-race', hostname: 'real' });
      await client.allowReEnrollment({ orgId, deviceId: first.deviceId });
      // Six enrollments of the machine id, each with a valid code of its own, none with the device token.
      const outcomes = await Promise.allSettled(
        codes
          .slice(1)
          .map((code, i) => enroll(key, code, { machineId: 'reenroll-race', hostname: `race-${i}` })),
      );
      const won = outcomes.filter((o) => o.status === 'fulfilled');
      const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [(o.reason as AppError).code] : []));
      expect(won).toHaveLength(1);
      expect(won[0]!.value).toMatchObject({ deviceId: first.deviceId, reEnrolled: true });
      expect(refused).toEqual(Array<string>(5).fill('MACHINE_ALREADY_ENROLLED'));
      // The approval went with the re-enrollment it let through, and only that one's code was spent.
      const [row] = await query<{ re_enrollment_allowed_until: Date | null }>(
        `select re_enrollment_allowed_until from enrollment.devices where id = $1`,
        [first.deviceId],
      );
      expect(row!.re_enrollment_allowed_until).toBeNull();
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where org_id = $1 and consumed_at is not null`,
          [orgId],
        ),
      ).toBe(2);
    });

    it('answers 409 for a machine of another organization and leaves the code unused', async () => {
      const a = await organization(1);
      const b = await organization(1);
      await enroll(a.key, a.codes[0]!, { machineId: 'taken-machine' });

      expect((await failure(enroll(b.key, b.codes[0]!, { machineId: 'taken-machine' }))).code).toBe(
        'MACHINE_ENROLLED_ELSEWHERE',
      );
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where org_id = $1 and consumed_at is null`,
          [b.orgId],
        ),
      ).toBe(1);
      expect(await count(`select count(*) as n from enrollment.devices where org_id = $1`, [b.orgId])).toBe(
        0,
      );
      expect(
        await count(`select count(*) as n from enrollment.outbox where envelope->'data'->>'org_id' = $1`, [
          b.orgId,
        ]),
      ).toBe(0);
      await enroll(b.key, b.codes[0]!, { machineId: 'free-machine' });
    });

    it('puts a machine enrolled concurrently by two organizations in exactly one of them', async () => {
      const a = await organization(5);
      const b = await organization(5);
      const attempts = [
        ...a.codes.map((code) => ({ org: a, code })),
        ...b.codes.map((code) => ({ org: b, code })),
      ];
      const outcomes = await Promise.allSettled(
        attempts.map(({ org, code }) => enroll(org.key, code, { machineId: 'contested-machine' })),
      );

      const [owner] = await query<{ org_id: string }>(
        `select org_id from enrollment.devices where machine_id = 'contested-machine'`,
      );
      const winner = owner!.org_id === a.orgId ? a : b;
      const loser = winner === a ? b : a;
      // One agent of the winner enrolled the machine; the others hold no proof of being that device.
      const codeOf = (outcome: PromiseSettledResult<unknown>) =>
        outcome.status === 'rejected' ? (outcome.reason as AppError).code : 'enrolled';
      const ofWinner = outcomes.filter((_, i) => attempts[i]!.org === winner).map(codeOf);
      expect(ofWinner.sort()).toEqual([...Array<string>(4).fill('MACHINE_ALREADY_ENROLLED'), 'enrolled']);
      const ofLoser = outcomes.filter((_, i) => attempts[i]!.org === loser).map(codeOf);
      expect(ofLoser).toEqual(Array<string>(5).fill('MACHINE_ENROLLED_ELSEWHERE'));
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where org_id = $1 and consumed_at is null`,
          [loser.orgId],
        ),
      ).toBe(5);
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where org_id = $1 and consumed_at is null`,
          [winner.orgId],
        ),
      ).toBe(4);
    });

    it('stores quotes, backslashes, question marks and unicode exactly as reported', async () => {
      const { orgId, key, codes } = await organization(1);
      const machineId = `m'?\\"$1;--${orgId}`;
      const hostname = `O'Brien\\PC? $1 "quoted" 💻 Ünïcødé`;
      const metadata = { "k'?": "v\\'?$2", nested: { emoji: '😀', list: [1, 'two', null, true] } };
      const result = await enroll(key, codes[0]!, {
        machineId,
        hostname,
        metadataJson: JSON.stringify(metadata),
      });
      const { devices } = await client.listDevices({
        orgId,
        limit: 0,
        cursor: '',
        status: ANY,
        query: `'brien\\pc?`,
      });
      expect(devices).toHaveLength(1);
      expect(devices[0]).toMatchObject({ id: result.deviceId, name: hostname, machineId });
      expect(JSON.parse(devices[0]!.metadataJson)).toEqual(metadata);
    });

    it('validates what the agent reports', async () => {
      const { orgId, key, codes } = await organization(1);
      const cases: [Partial<EnrollDeviceRequest>, string][] = [
        [{ machineId: '' }, 'machine_id'],
        [{ machineId: 'x'.repeat(129) }, 'machine_id'],
        [{ hostname: '' }, 'hostname'],
        [{ hostname: 'a\u0000b' }, 'hostname'],
        [{ hostname: 'x'.repeat(256) }, 'hostname'],
        [{ metadataJson: '[1,2]' }, 'metadata'],
        [{ metadataJson: '"text"' }, 'metadata'],
        [{ metadataJson: '{not json' }, 'metadata'],
        [{ metadataJson: JSON.stringify({ blob: 'x'.repeat(17_000) }) }, 'metadata'],
        [
          { metadataJson: '{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":1}}}}}}}}}' },
          'metadata.a.b.c.d.e.f.g.h',
        ],
        [{ metadataJson: '{"a":"\\u0000"}' }, 'metadata.a'],
      ];
      for (const [overrides, path] of cases) {
        const error = await failure(enroll(key, codes[0]!, overrides));
        expect(error.code).toBe('VALIDATION_FAILED');
        expect(error.fields.map((f) => f.path)).toContain(path);
      }
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where org_id = $1 and consumed_at is null`,
          [orgId],
        ),
      ).toBe(1);
      // Empty metadata is an empty object.
      const ok = await enroll(key, codes[0]!, { metadataJson: '' });
      const [row] = await query<{ metadata: unknown }>(
        `select metadata from enrollment.devices where id = $1`,
        [ok.deviceId],
      );
      expect(row!.metadata).toEqual({});
    });
  });

  describe('e-mailed codes', () => {
    it('need a key, and carry the code and the key sealed in the event', async () => {
      const orgId = randomUUID();
      const request = {
        orgId,
        email: ' New.Colleague@Example.TEST ',
        requestedByName: 'Ann Admin',
        orgName: 'Acme',
      };
      expect((await failure(client.emailEnrollmentCode(request))).code).toBe('ENROLLMENT_KEY_REQUIRED');
      expect((await failure(client.emailEnrollmentCode({ ...request, email: 'not-an-email' }))).code).toBe(
        'VALIDATION_FAILED',
      );

      const { key } = await client.rotateEnrollmentKey({ orgId });
      const { expiresAt } = await client.emailEnrollmentCode(request);
      const [row] = await query<{ envelope: { data: Record<string, string> } }>(
        `select envelope from enrollment.outbox where type = 'enrollment_code.email_requested' and envelope->'data'->>'org_id' = $1`,
        [orgId],
      );
      const data = row!.envelope.data;
      expect(data).toMatchObject({
        email: 'new.colleague@example.test',
        org_name: 'Acme',
        requested_by_name: 'Ann Admin',
        expires_at: expiresAt!.toISOString(),
      });
      expect(JSON.stringify(data)).not.toContain(key!.key);
      const recipient = { org_id: data.org_id!, email: data.email!, request_id: data.request_id! };
      const code = openSealedSecret(
        data.code_sealed!,
        sealingKey,
        SEALING_CONTEXTS.enrollmentCode(recipient),
      );
      expect(code).toMatch(CODE_PATTERN);
      expect(JSON.stringify(data)).not.toContain(code);
      expect(
        openSealedSecret(data.enrollment_key_sealed!, sealingKey, SEALING_CONTEXTS.enrollmentKey(recipient)),
      ).toBe(key!.key);

      expect(
        await count(`select count(*) as n from enrollment.enrollment_codes where org_id = $1`, [orgId]),
      ).toBe(1);
      expect((await enroll(key!.key, code)).orgId).toBe(orgId);
    });
  });

  describe('devices', () => {
    it('are read, disabled, enabled and deleted only within their organization', async () => {
      const a = await organization(1);
      const b = await organization(1);
      const device = await enroll(a.key, a.codes[0]!, { machineId: 'isolated-machine' });
      const other = await enroll(b.key, b.codes[0]!);

      for (const deviceId of [device.deviceId, 'not-a-uuid', '', randomUUID()]) {
        for (const call of [
          client.getDevice,
          client.disableDevice,
          client.enableDevice,
          client.deleteDevice,
        ]) {
          expect((await failure(call({ orgId: b.orgId, deviceId }))).code).toBe('DEVICE_NOT_FOUND');
        }
      }
      const listedByB = await client.listDevices({
        orgId: b.orgId,
        limit: 0,
        cursor: '',
        status: ANY,
        query: 'isolated',
      });
      expect(listedByB.devices).toEqual([]);
      expect(
        (
          await client.listDevices({ orgId: b.orgId, limit: 0, cursor: '', status: ANY, query: '' })
        ).devices.map((d) => d.id),
      ).toEqual([other.deviceId]);

      await client.disableDevice({ orgId: a.orgId, deviceId: device.deviceId });
      await client.disableDevice({ orgId: a.orgId, deviceId: device.deviceId });
      expect((await client.authenticateDevice({ deviceToken: device.deviceToken })).status).toBe(
        DeviceStatus.DEVICE_STATUS_DISABLED,
      );
      // One device reads as the list gives it.
      const { device: read } = await client.getDevice({ orgId: a.orgId, deviceId: device.deviceId });
      const listed = await client.listDevices({
        orgId: a.orgId,
        limit: 0,
        cursor: '',
        status: ANY,
        query: '',
      });
      expect(read).toEqual(listed.devices[0]);
      expect(read).toMatchObject({
        id: device.deviceId,
        machineId: 'isolated-machine',
        status: DeviceStatus.DEVICE_STATUS_DISABLED,
      });
      await client.enableDevice({ orgId: a.orgId, deviceId: device.deviceId });
      await client.enableDevice({ orgId: a.orgId, deviceId: device.deviceId });
      expect((await client.authenticateDevice({ deviceToken: device.deviceToken })).status).toBe(
        DeviceStatus.DEVICE_STATUS_ACTIVE,
      );
      const eventsOf = (type: string) =>
        count(
          `select count(*) as n from enrollment.outbox where type = $1 and envelope->'data'->>'device_id' = $2`,
          [type, device.deviceId],
        );
      expect(await eventsOf('device.disabled')).toBe(1);
      expect(await eventsOf('device.enabled')).toBe(1);

      await client.deleteDevice({ orgId: a.orgId, deviceId: device.deviceId });
      expect(await eventsOf('device.deleted')).toBe(1);
      expect((await failure(client.authenticateDevice({ deviceToken: device.deviceToken }))).code).toBe(
        'DEVICE_TOKEN_INVALID',
      );
      expect((await failure(client.deleteDevice({ orgId: a.orgId, deviceId: device.deviceId }))).code).toBe(
        'DEVICE_NOT_FOUND',
      );
      expect((await failure(client.getDevice({ orgId: a.orgId, deviceId: device.deviceId }))).code).toBe(
        'DEVICE_NOT_FOUND',
      );
      expect(
        await count(
          `select count(*) as n from enrollment.enrollment_codes where consumed_by_device_id = $1`,
          [device.deviceId],
        ),
      ).toBe(0);
      expect((await client.authenticateDevice({ deviceToken: other.deviceToken })).deviceId).toBe(
        other.deviceId,
      );
    });

    it('are listed in enrollment order, paged by cursor, filtered by status and searched literally', async () => {
      const { orgId, key, codes } = await organization(7);
      const hostnames = ['alpha', 'beta', 'gamma_1', 'gammax1', '100%', '1000', 'Delta'];
      const enrolled = [];
      for (let i = 0; i < hostnames.length; i++) {
        enrolled.push(
          await enroll(key, codes[i]!, { hostname: hostnames[i]!, machineId: `list-${orgId}-${i}` }),
        );
      }
      await client.disableDevice({ orgId, deviceId: enrolled[1]!.deviceId });
      await client.disableDevice({ orgId, deviceId: enrolled[6]!.deviceId });

      const seen: string[] = [];
      let cursor = '';
      let pages = 0;
      do {
        const page = await client.listDevices({ orgId, limit: 3, cursor, status: ANY, query: '' });
        seen.push(...page.devices.map((d) => d.name));
        cursor = page.nextCursor;
        pages += 1;
      } while (cursor);
      expect(seen).toEqual(hostnames);
      expect(pages).toBe(3);

      const names = async (status: DeviceStatus, q: string) =>
        (await client.listDevices({ orgId, limit: 0, cursor: '', status, query: q })).devices.map(
          (d) => d.name,
        );
      expect(await names(DeviceStatus.DEVICE_STATUS_DISABLED, '')).toEqual(['beta', 'Delta']);
      expect(await names(DeviceStatus.DEVICE_STATUS_ACTIVE, '')).toEqual([
        'alpha',
        'gamma_1',
        'gammax1',
        '100%',
        '1000',
      ]);
      expect(await names(ANY, 'GAMMA_')).toEqual(['gamma_1']);
      expect(await names(ANY, '0%')).toEqual(['100%']);
      expect(await names(ANY, 'delta')).toEqual(['Delta']);
      expect(await names(DeviceStatus.DEVICE_STATUS_ACTIVE, 'delta')).toEqual([]);
      expect(await names(ANY, `list-${orgId}-0`)).toEqual(['alpha']);
      expect(await names(ANY, '\\')).toEqual([]);

      const unknownStatus = await failure(
        client.listDevices({ orgId, limit: 0, cursor: '', status: DeviceStatus.UNRECOGNIZED, query: '' }),
      );
      expect(unknownStatus.code).toBe('VALIDATION_FAILED');
      const badCursor = await failure(
        client.listDevices({ orgId, limit: 0, cursor: 'garbage', status: ANY, query: '' }),
      );
      expect(badCursor.code).toBe('VALIDATION_FAILED');
      const forgedCursor = Buffer.from(JSON.stringify([new Date().toISOString(), "x' or 1=1"])).toString(
        'base64url',
      );
      expect(
        (await failure(client.listDevices({ orgId, limit: 0, cursor: forgedCursor, status: ANY, query: '' })))
          .code,
      ).toBe('VALIDATION_FAILED');
      expect(
        (await failure(client.listDevices({ orgId, limit: 201, cursor: '', status: ANY, query: '' }))).code,
      ).toBe('VALIDATION_FAILED');
    });

    it('search a large organization through the trigram indexes, not by reading all its devices', async () => {
      const { orgId, key, codes } = await organization(1);
      await query(
        `insert into enrollment.devices (id, org_id, machine_id, hostname, status, token_hash, enrolled_at, last_seen_at)
         select gen_random_uuid(), $1, md5(random()::text), 'ws-' || lpad(n::text, 5, '0'), 'active',
                encode(sha256(gen_random_uuid()::text::bytea), 'hex'), now(), now()
           from generate_series(1, 20000) as n`,
        [orgId],
      );
      const needle = await enroll(key, codes[0]!, {
        hostname: 'Reception-Kiosk',
        machineId: `kiosk-${orgId}`,
      });
      // ANALYZE only: no VACUUM flushes the indexes' pending lists (as on a machine without autovacuum).
      await query('analyze enrollment.devices');

      const plan = async (q: string) => {
        const { sql, params } = listDevicesQuery(
          orgId,
          { status: null, query: q },
          { limit: 50, after: null },
        );
        let n = 0;
        const [row] = await query<{ 'QUERY PLAN': unknown }>(
          `explain (format json) ${sql.replace(/\?/g, () => `$${++n}`)}`,
          params,
        );
        return JSON.stringify(row!['QUERY PLAN']);
      };
      for (const q of ['kiosk', 'RECEPTION', `kiosk-${orgId.slice(0, 8)}`, 'ws-0421']) {
        const text = await plan(q);
        expect(text).toContain('devices_hostname_trgm_idx');
        expect(text).toContain('devices_machine_id_trgm_idx');
        expect(text).not.toContain('Seq Scan');
      }
      const names = async (q: string) =>
        (await client.listDevices({ orgId, limit: 0, cursor: '', status: ANY, query: q })).devices.map(
          (d) => d.id,
        );
      expect(await names('ECEPTION-KIO')).toEqual([needle.deviceId]);
      expect(await names(`SK-${orgId.toUpperCase()}`)).toEqual([needle.deviceId]);
      expect((await names('ws-0421')).length).toBe(10);
    });

    it('need an organization id at the boundary', async () => {
      for (const orgId of ['', 'not-a-uuid']) {
        expect((await failure(client.rotateEnrollmentKey({ orgId }))).code).toBe('VALIDATION_FAILED');
        expect(
          (await failure(client.listDevices({ orgId, limit: 0, cursor: '', status: ANY, query: '' }))).code,
        ).toBe('VALIDATION_FAILED');
      }
    });
  });
});
