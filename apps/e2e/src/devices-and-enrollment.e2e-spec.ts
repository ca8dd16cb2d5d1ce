import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { DeviceStatus, EnrollmentServiceService } from '@sts/proto/gen/enrollment/v1/enrollment';
import { eventually, startSystem, type SystemUnderTest } from './system-under-test';

const run = promisify(execFile);

interface Device {
  id: string;
  name: string;
  machine_id: string;
  status: 'active' | 'disabled';
  enrolled_at: string;
  last_seen_at: string;
  metadata: Record<string, unknown>;
}
interface Enrolled {
  device_id: string;
  org_id: string;
  device_token: string;
  re_enrolled: boolean;
}
interface Problem {
  code: string;
  status: number;
  errors?: { path: string; message: string }[];
}

const CODE_FORMAT = /^[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}-[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe('enrollment and devices, end to end', () => {
  let system: SystemUnderTest;
  let admin: string;
  let orgId: string;
  let enrollment: ReturnType<typeof createPromiseClient<typeof EnrollmentServiceService>>;

  beforeAll(async () => {
    system = await startSystem();
    admin = await system.tokenFor('root@devices.test', { name: 'Root' });
    orgId = (await system.api<{ org: { id: string } }>('GET', '/api/session', { token: admin })).body.org.id;
    enrollment = createPromiseClient(
      EnrollmentServiceService,
      system.grpcAddresses.enrollment,
      5_000,
      system.serviceAuth.as('enrollment'),
    );
  });

  afterAll(async () => {
    enrollment?.close();
    await system?.stop();
  });

  const newKey = async (token = admin) =>
    (await system.api<{ key: string }>('POST', '/api/enrollment-key', { token })).body.key;
  const newCodes = async (count: number, token = admin) =>
    (
      await system.api<{ codes: { code: string; expires_at: string }[] }>('POST', '/api/enrollment-codes', {
        token,
        body: { count },
      })
    ).body.codes.map((c) => c.code);
  const enroll = (key: string | undefined, body: Record<string, unknown>) =>
    system.api<Enrolled & Problem>('POST', '/api/device/enroll', {
      body,
      headers: key === undefined ? {} : { 'x-enrollment-key': key },
    });
  const devices = async (query = '', token = admin) =>
    (await system.api<Device[]>('GET', `/api/devices${query}`, { token })).body;

  it('manages the enrollment key: none, create, read, rotate, revoke', async () => {
    expect((await system.api<Problem>('GET', '/api/enrollment-key', { token: admin })).body.code).toBe(
      'ENROLLMENT_KEY_NOT_FOUND',
    );
    const created = await system.api<{ key: string; created_at: string }>('POST', '/api/enrollment-key', {
      token: admin,
    });
    expect(created.status).toBe(200);
    expect(created.body.key).toMatch(/^sts_ek_[A-Za-z0-9_-]{43}$/);
    expect(created.body.created_at).toMatch(ISO);
    expect((await system.api('GET', '/api/enrollment-key', { token: admin })).body).toEqual(created.body);
    const rotated = await newKey();
    expect(rotated).not.toBe(created.body.key);
    expect((await system.api('DELETE', '/api/enrollment-key', { token: admin })).status).toBe(204);
    expect((await system.api('GET', '/api/enrollment-key', { token: admin })).status).toBe(404);
  });

  it('generates one-time codes in the contract format, 24 hours to live, count 1 to 100', async () => {
    const response = await system.api<{ codes: { code: string; expires_at: string }[] }>(
      'POST',
      '/api/enrollment-codes',
      { token: admin, body: { count: 3 } },
    );
    expect(response.status).toBe(200);
    expect(response.body.codes).toHaveLength(3);
    for (const code of response.body.codes) {
      expect(code.code).toMatch(CODE_FORMAT);
      const ttl = Date.parse(code.expires_at) - Date.now();
      expect(ttl).toBeGreaterThan(23.9 * 3_600_000);
      expect(ttl).toBeLessThanOrEqual(24 * 3_600_000);
    }
    expect(
      (await system.api<{ codes: unknown[] }>('POST', '/api/enrollment-codes', { token: admin })).body.codes,
    ).toHaveLength(1);
    for (const count of [0, 101, 2.5, '3', -1]) {
      const bad = await system.api<Problem>('POST', '/api/enrollment-codes', {
        token: admin,
        body: { count },
      });
      expect([count, bad.status, bad.body.code]).toEqual([count, 400, 'VALIDATION_FAILED']);
    }
  });

  it('enrolls a device; it is listed and read by id with every contract field, and announced in the feed by hostname', async () => {
    const key = await newKey();
    const [code] = await newCodes(1);
    const enrolled = await enroll(key, {
      code,
      machine_id: 'machine-alpha',
      hostname: 'alpha.corp',
      metadata: { os: 'linux', arch: 'x64' },
    });
    expect(enrolled.status).toBe(200);
    expect(enrolled.body).toEqual({
      device_id: expect.any(String),
      org_id: orgId,
      device_token: expect.stringMatching(/^sts_dt_/),
      re_enrolled: false,
    });

    const device = (await devices()).find((d) => d.id === enrolled.body.device_id);
    expect(device).toEqual({
      id: enrolled.body.device_id,
      name: 'alpha.corp',
      machine_id: 'machine-alpha',
      status: 'active',
      enrolled_at: expect.stringMatching(ISO),
      last_seen_at: expect.stringMatching(ISO),
      metadata: { os: 'linux', arch: 'x64' },
    });
    const read = await system.api<Device>('GET', `/api/devices/${enrolled.body.device_id}`, { token: admin });
    expect([read.status, read.body]).toEqual([200, device]);
    const item = await eventually(async () => {
      const feed = await system.api<{ type: string; message: string }[]>('GET', '/api/notifications', {
        token: admin,
      });
      return feed.body.find((n) => n.type === 'device.enrolled' && n.message.includes('alpha.corp'));
    });
    expect(item.message).toContain('alpha.corp');
  });

  it('refuses missing, wrong, rotated-away and revoked keys with 401, and bad codes with 400', async () => {
    const key = await newKey();
    const [code] = await newCodes(1);
    const body = { code, machine_id: 'machine-keys', hostname: 'keys', metadata: {} };
    expect((await enroll(undefined, body)).body.code).toBe('ENROLLMENT_KEY_INVALID');
    expect((await enroll(undefined, body)).status).toBe(401);
    expect((await enroll('sts_ek_wrong', body)).status).toBe(401);
    const rotated = await newKey();
    expect((await enroll(key, body)).status).toBe(401);
    expect((await enroll(rotated, { ...body, code: 'ZZZZ-ZZZZ' })).body.code).toBe('ENROLLMENT_CODE_INVALID');
    expect((await enroll(rotated, { ...body, code: 'not a code at all' })).status).toBe(400);
    expect((await enroll(rotated, body)).status).toBe(200);
    expect((await enroll(rotated, body)).body.code).toBe('ENROLLMENT_CODE_USED');
    await system.api('DELETE', '/api/enrollment-key', { token: admin });
    const [another] = await newCodes(1);
    expect((await enroll(rotated, { ...body, code: another })).status).toBe(401);
  });

  it('consumes a code exactly once under concurrent enrollments', async () => {
    const key = await newKey();
    const [code] = await newCodes(1);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        enroll(key, { code, machine_id: `racer-${i}`, hostname: `racer-${i}`, metadata: {} }),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 400).every((r) => r.body.code === 'ENROLLMENT_CODE_USED')).toBe(
      true,
    );
    expect(results.filter((r) => r.status === 400)).toHaveLength(19);
    expect((await devices('?q=racer-')).length).toBe(1);
  });

  it('re-enrolls a machine with its device token: same device id, new token (the old one stops), new hostname and metadata', async () => {
    const key = await newKey();
    const [first, second] = await newCodes(2);
    const one = await enroll(key, {
      code: first,
      machine_id: 'machine-re',
      hostname: 'before',
      metadata: { v: 1 },
    });
    const two = await system.api<Enrolled>('POST', '/api/device/enroll', {
      body: { code: second, machine_id: 'machine-re', hostname: 'after', metadata: { v: 2 } },
      headers: { 'x-enrollment-key': key, 'x-device-token': one.body.device_token },
    });
    expect(two.status).toBe(200);
    expect(two.body.device_id).toBe(one.body.device_id);
    expect(two.body.re_enrolled).toBe(true);
    expect(two.body.device_token).not.toBe(one.body.device_token);
    await expect(enrollment.authenticateDevice({ deviceToken: one.body.device_token })).rejects.toMatchObject(
      { code: 'DEVICE_TOKEN_INVALID' },
    );
    expect((await enrollment.authenticateDevice({ deviceToken: two.body.device_token })).deviceId).toBe(
      one.body.device_id,
    );
    const device = (await devices('?q=machine-re'))[0];
    expect([device?.name, device?.metadata]).toEqual(['after', { v: 2 }]);
    // The admins see it: the real agent, if it was not this one, has just been cut off.
    const revoked = await eventually(async () => {
      const feed = await system.api<{ type: string; message: string }[]>('GET', '/api/notifications', {
        token: admin,
      });
      return feed.body.find(
        (item) =>
          item.message === 'Device "after" was enrolled again; its previous device token no longer works',
      );
    });
    expect(revoked.type).toBe('device.enrolled');
  });

  it('does not let a code holder who knows a machine id take the device over (issue 26)', async () => {
    const key = await newKey();
    const [first, second, third] = await newCodes(3);
    const real = await enroll(key, {
      code: first,
      machine_id: 'machine-victim',
      hostname: 'victim',
      metadata: { os: 'linux' },
    });
    expect(real.status).toBe(200);
    // The machine id is what GET /api/devices shows an ANALYST; a fresh code, no device credential.
    const takeover = await enroll(key, {
      code: second,
      machine_id: 'machine-victim',
      hostname: 'attacker',
      metadata: { os: 'evil' },
    });
    expect([takeover.status, takeover.body.code]).toEqual([409, 'MACHINE_ALREADY_ENROLLED']);
    expect(takeover.headers.get('content-type')).toContain('application/problem+json');
    // Another device's token is no proof either.
    const other = await enroll(key, {
      code: second,
      machine_id: 'machine-bystander',
      hostname: 'b',
      metadata: {},
    });
    const withOtherToken = await system.api<Problem>('POST', '/api/device/enroll', {
      body: { code: third, machine_id: 'machine-victim', hostname: 'attacker', metadata: {} },
      headers: { 'x-enrollment-key': key, 'x-device-token': other.body.device_token },
    });
    expect([withOtherToken.status, withOtherToken.body.code]).toEqual([409, 'MACHINE_ALREADY_ENROLLED']);
    // The real agent keeps working and the device keeps its name and metadata.
    const auth = await enrollment.authenticateDevice({ deviceToken: real.body.device_token });
    expect(auth.deviceId).toBe(real.body.device_id);
    const device = (await devices('?q=machine-victim'))[0];
    expect([device?.id, device?.name, device?.metadata]).toEqual([
      real.body.device_id,
      'victim',
      { os: 'linux' },
    ]);
    // The refused attempt spent nothing: the code still enrolls a new machine.
    expect(
      (await enroll(key, { code: third, machine_id: 'machine-new', hostname: 'n', metadata: {} })).status,
    ).toBe(200);
  });

  it('lets an ORG_ADMIN bring back a device that lost its credential: same device, once (issue 26)', async () => {
    const key = await newKey();
    const [first, second, third] = await newCodes(3);
    const lost = await enroll(key, {
      code: first,
      machine_id: 'machine-reinstalled',
      hostname: 'before',
      metadata: {},
    });
    const body = { machine_id: 'machine-reinstalled', hostname: 'reinstalled', metadata: { os: 'linux' } };
    expect((await enroll(key, { ...body, code: second })).body.code).toBe('MACHINE_ALREADY_ENROLLED');

    const stranger = await system.tokenFor('mallory@elsewhere.test', { name: 'Mallory' });
    const foreign = await system.api<Problem>('POST', `/api/devices/${lost.body.device_id}/re-enrollment`, {
      token: stranger,
    });
    expect([foreign.status, foreign.body.code]).toEqual([404, 'DEVICE_NOT_FOUND']);
    const approved = await system.api<{ device_id: string; allowed_until: string }>(
      'POST',
      `/api/devices/${lost.body.device_id}/re-enrollment`,
      { token: admin },
    );
    expect(approved.status).toBe(200);
    expect(approved.body.device_id).toBe(lost.body.device_id);
    const approvedFor = Date.parse(approved.body.allowed_until) - Date.now();
    expect(approvedFor).toBeGreaterThan(0.9 * 3_600_000);
    expect(approvedFor).toBeLessThanOrEqual(3_600_000);

    const recovered = await enroll(key, { ...body, code: second });
    expect(recovered.status).toBe(200);
    expect(recovered.body).toMatchObject({ device_id: lost.body.device_id, re_enrolled: true });
    await expect(
      enrollment.authenticateDevice({ deviceToken: lost.body.device_token }),
    ).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    expect((await enrollment.authenticateDevice({ deviceToken: recovered.body.device_token })).deviceId).toBe(
      lost.body.device_id,
    );
    expect((await devices('?q=machine-reinstalled'))[0]?.name).toBe('reinstalled');
    // The approval was used up.
    expect((await enroll(key, { ...body, code: third })).body.code).toBe('MACHINE_ALREADY_ENROLLED');
  });

  it('keeps enrolled devices working through key rotation and revocation', async () => {
    const key = await newKey();
    const [code] = await newCodes(1);
    const enrolled = await enroll(key, {
      code,
      machine_id: 'machine-survivor',
      hostname: 'survivor',
      metadata: {},
    });
    await newKey();
    await system.api('DELETE', '/api/enrollment-key', { token: admin });
    const auth = await enrollment.authenticateDevice({ deviceToken: enrolled.body.device_token });
    expect([auth.deviceId, auth.status]).toEqual([
      enrolled.body.device_id,
      DeviceStatus.DEVICE_STATUS_ACTIVE,
    ]);
    expect((await devices('?q=survivor'))[0]?.status).toBe('active');
  });

  it('answers 409 for a machine enrolled in another organization and leaves that code usable', async () => {
    const key = await newKey();
    const [code] = await newCodes(1);
    expect(
      (await enroll(key, { code, machine_id: 'machine-shared', hostname: 'shared', metadata: {} })).status,
    ).toBe(200);

    const other = await system.tokenFor('boss@other.test', { name: 'Other Boss' });
    await system.api('GET', '/api/session', { token: other });
    const otherKey = await newKey(other);
    const [otherCode] = await newCodes(1, other);
    const conflict = await enroll(otherKey, {
      code: otherCode,
      machine_id: 'machine-shared',
      hostname: 'shared',
      metadata: {},
    });
    expect([conflict.status, conflict.body.code]).toEqual([409, 'MACHINE_ENROLLED_ELSEWHERE']);
    expect(
      (
        await enroll(otherKey, {
          code: otherCode,
          machine_id: 'machine-fresh',
          hostname: 'fresh',
          metadata: {},
        })
      ).status,
    ).toBe(200);
  });

  it('disables, enables and deletes devices with roles and tenant isolation', async () => {
    const key = await newKey();
    const [code] = await newCodes(1);
    const { device_id } = (
      await enroll(key, { code, machine_id: 'machine-life', hostname: 'lifecycle', metadata: {} })
    ).body;

    expect((await system.api('POST', `/api/devices/${device_id}/disable`, { token: admin })).status).toBe(
      204,
    );
    expect((await devices('?status=disabled')).map((d) => d.id)).toContain(device_id);
    expect((await devices('?status=active')).map((d) => d.id)).not.toContain(device_id);
    await eventually(async () => {
      const feed = await system.api<{ type: string; message: string }[]>('GET', '/api/notifications', {
        token: admin,
      });
      return feed.body.find((n) => n.type === 'device.disabled' && n.message.includes('lifecycle'));
    });
    expect((await system.api('POST', `/api/devices/${device_id}/enable`, { token: admin })).status).toBe(204);
    expect((await devices('?q=LIFECYCLE'))[0]?.status).toBe('active');

    const stranger = await system.tokenFor('eve@elsewhere.test', { name: 'Eve' });
    for (const [method, path] of [
      ['GET', `/api/devices/${device_id}`],
      ['POST', `/api/devices/${device_id}/disable`],
      ['POST', `/api/devices/${device_id}/enable`],
      ['DELETE', `/api/devices/${device_id}`],
    ] as const) {
      const response = await system.api<Problem>(method, path, { token: stranger });
      expect([method, path, response.status, response.body.code]).toEqual([
        method,
        path,
        404,
        'DEVICE_NOT_FOUND',
      ]);
    }
    expect((await devices('', stranger)).map((d) => d.id)).not.toContain(device_id);

    const invite = await system.api<{ id: string }>('POST', '/api/invites', {
      token: admin,
      body: { email: 'ana@devices.test', role: 'ANALYST' },
    });
    const mail = await system.mail.waitFor((m) => m.to.includes('ana@devices.test'), 10_000);
    const token = /sts_inv_[A-Za-z0-9_-]{43}/.exec(mail.text ?? '')![0];
    expect(invite.status).toBe(201);
    await system.api('POST', '/api/invites/accept', { body: { token } });
    const analyst = await system.tokenFor('ana@devices.test', { name: 'Ana' });
    expect((await system.api('POST', `/api/devices/${device_id}/disable`, { token: analyst })).status).toBe(
      204,
    );
    const seen = await system.api<Device>('GET', `/api/devices/${device_id}`, { token: analyst });
    expect([seen.status, seen.body.status]).toEqual([200, 'disabled']);
    expect((await system.api('POST', `/api/devices/${device_id}/enable`, { token: analyst })).status).toBe(
      204,
    );
    const forbidden = await system.api<Problem>('DELETE', `/api/devices/${device_id}`, { token: analyst });
    expect([forbidden.status, forbidden.body.code]).toEqual([403, 'FORBIDDEN']);
    expect((await system.api('GET', '/api/enrollment-key', { token: analyst })).status).toBe(403);

    expect((await system.api('DELETE', `/api/devices/${device_id}`, { token: admin })).status).toBe(204);
    expect((await system.api('DELETE', `/api/devices/${device_id}`, { token: admin })).status).toBe(404);
    expect((await system.api('GET', `/api/devices/${device_id}`, { token: admin })).status).toBe(404);
    expect((await devices('?q=lifecycle')).length).toBe(0);
  });

  it('holds at most 10,000 unused codes per organization, and says so (issue 41)', async () => {
    const owner = await system.tokenFor('owner@many-codes.test', { name: 'Many Codes' });
    await system.api('GET', '/api/session', { token: owner });
    const key = await newKey(owner);
    const [first] = await newCodes(100, owner);
    for (let call = 1; call < 100; call++) expect((await newCodes(100, owner)).length).toBe(100);
    const refused = await system.api<Problem & { detail: string }>('POST', '/api/enrollment-codes', {
      token: owner,
      body: { count: 1 },
    });
    expect([refused.status, refused.body.code]).toEqual([400, 'ENROLLMENT_CODE_LIMIT']);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.body.detail).toContain('at most 10000');
    // Another organization is not concerned; a code used frees its place.
    expect(await newCodes(1)).toHaveLength(1);
    const enrolled = await enroll(key, {
      code: first,
      machine_id: 'm-many-codes',
      hostname: 'h',
      metadata: {},
    });
    expect(enrolled.status).toBe(200);
    expect(await newCodes(1, owner)).toHaveLength(1);
  });

  it('refuses hostile enrollment bodies with 4xx and enrolls nothing', async () => {
    /** Metadata nested `depth` objects deep (the top-level object is depth 1). */
    const nested = (depth: number): Record<string, unknown> =>
      depth <= 1 ? { leaf: true } : { inner: nested(depth - 1) };
    const key = await newKey();
    const [code] = await newCodes(1);
    const before = (await devices()).length;
    const cases: [unknown, number][] = [
      [{ code, machine_id: 'm-bad', hostname: 42, metadata: {} }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'ok', metadata: [] }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'ok', metadata: 'x' }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'line\nbreak', metadata: {} }, 400],
      [{ code, machine_id: '', hostname: 'ok', metadata: {} }, 400],
      [{ code, machine_id: 'x'.repeat(129), hostname: 'ok', metadata: {} }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'ok', metadata: { blob: 'x'.repeat(17 * 1024) } }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'ok', metadata: {}, admin: true }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'ok', metadata: { pad: 'x'.repeat(70 * 1024) } }, 413],
      [{ machine_id: 'm-bad', hostname: 'ok', metadata: {} }, 400],
      [{ code, machine_id: 42, hostname: 'ok', metadata: {} }, 400],
      [{ code, machine_id: 'machine-é', hostname: 'ok', metadata: {} }, 400],
      [{ code, machine_id: 'm-bad', hostname: '🖥'.repeat(256), metadata: {} }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'c1\u0085control', metadata: {} }, 400],
      [{ code, machine_id: 'm-bad', hostname: 'ok', metadata: nested(9) }, 400],
    ];
    for (const [body, status] of cases) {
      const response = await system.api<Problem>('POST', '/api/device/enroll', {
        body,
        headers: { 'x-enrollment-key': key },
      });
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
    }
    const malformed = await system.api<Problem>('POST', '/api/device/enroll', {
      rawBody: '{"code":',
      headers: { 'x-enrollment-key': key, 'content-type': 'application/json' },
    });
    expect(malformed.status).toBe(400);
    // Nesting JSON.parse takes but JSON.stringify cannot: a 400 before any call, never a 500 (issue 41).
    const deep = await system.api<Problem>('POST', '/api/device/enroll', {
      rawBody: `{"code":"${code}","machine_id":"m-deep","hostname":"ok","metadata":{"a":${'['.repeat(32_000)}${']'.repeat(32_000)}}}`,
      headers: { 'x-enrollment-key': key, 'content-type': 'application/json' },
    });
    expect([deep.status, deep.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect((await devices()).length).toBe(before);

    const unicode = await enroll(key, {
      code,
      machine_id: 'm-unicode',
      hostname: 'Ünïcødé-主机-🖥️',
      metadata: { note: 'café' },
    });
    expect(unicode.status).toBe(200);
    expect((await devices('?q=m-unicode'))[0]?.name).toBe('Ünïcødé-主机-🖥️');
  });

  it('e-mails a code with installation instructions, and needs a key to do so', async () => {
    await system.api('DELETE', '/api/enrollment-key', { token: admin });
    const missing = await system.api<Problem>('POST', '/api/enrollment-codes/email', {
      token: admin,
      body: { email: 'dev@devices.test' },
    });
    expect([missing.status, missing.body.code]).toEqual([409, 'ENROLLMENT_KEY_REQUIRED']);
    const key = await newKey();
    const sent = await system.api<{ email: string; expires_at: string }>(
      'POST',
      '/api/enrollment-codes/email',
      { token: admin, body: { email: 'Dev@Devices.test' } },
    );
    expect(sent.status).toBe(200);
    const mail = await system.mail.waitFor((m) => m.to.includes('dev@devices.test'), 10_000);
    const code = /[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}-[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}/.exec(
      mail.text ?? '',
    )?.[0];
    expect(code).toBeDefined();
    expect(mail.text).toContain(key);
    expect(mail.text).toContain('agent enroll');
    expect(mail.html).toContain(code);
    expect(
      (await enroll(key, { code, machine_id: 'm-mailed', hostname: 'mailed', metadata: {} })).status,
    ).toBe(200);
  });

  it("enrolls with the agent's enroll command against the running system", async () => {
    const key = await newKey();
    const [code] = await newCodes(1);
    const dir = await mkdtemp(join(tmpdir(), 'sts-agent-'));
    const config = join(dir, 'agent.json');
    try {
      const agent = (...args: string[]) =>
        run(process.execPath, ['--import', 'tsx', 'apps/agent/src/main.ts', ...args], {
          env: { ...process.env, STS_ENROLLMENT_KEY: key },
        });
      const enrolled = await agent(
        'enroll',
        '--server',
        system.gateway.url,
        '--code',
        code!,
        '--config',
        config,
        '--machine-id',
        'agent-e2e-machine',
        '--hostname',
        'agent-e2e',
      );
      expect(enrolled.stdout).not.toContain(key);
      const stored = JSON.parse(await readFile(config, 'utf8')) as {
        device_id: string;
        device_token: string;
      };
      expect(stored.device_token).toMatch(/^sts_dt_/);
      expect((await stat(config)).mode & 0o777).toBe(0o600);
      expect((await devices('?q=agent-e2e-machine'))[0]?.id).toBe(stored.device_id);

      const status = await agent('status', '--config', config, '--json');
      expect(JSON.parse(status.stdout)).toMatchObject({
        enrolled: true,
        device_id: stored.device_id,
        org_id: orgId,
      });

      const again = await agent(
        'enroll',
        '--server',
        system.gateway.url,
        '--code',
        code!,
        '--config',
        config,
        '--machine-id',
        'agent-e2e-machine',
        '--force',
      ).catch((e: { code: number; stderr: string }) => e);
      expect((again as { code: number }).code).toBe(11);
      expect((again as { stderr: string }).stderr).toMatch(/already been used|used/i);

      // With a fresh code, --force re-enrolls: the stored device token proves it is that device.
      const [fresh] = await newCodes(1);
      const reenrolled = await agent(
        'enroll',
        '--server',
        system.gateway.url,
        '--code',
        fresh!,
        '--config',
        config,
        '--machine-id',
        'agent-e2e-machine',
        '--force',
      );
      expect(reenrolled.stdout).toContain('same device id, new device token');
      const restored = JSON.parse(await readFile(config, 'utf8')) as typeof stored;
      expect(restored.device_id).toBe(stored.device_id);
      expect(restored.device_token).not.toBe(stored.device_token);
      // Without the config (a reinstall), the server refuses to hand the device over: exit 20.
      await rm(config);
      const [another] = await newCodes(1);
      const reinstalled = await agent(
        'enroll',
        '--server',
        system.gateway.url,
        '--code',
        another!,
        '--config',
        config,
        '--machine-id',
        'agent-e2e-machine',
      ).catch((e: { code: number; stderr: string }) => e);
      expect((reinstalled as { code: number }).code).toBe(20);
      expect((reinstalled as { stderr: string }).stderr).toContain('allow its re-enrollment');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("reports a per-application hash of this machine's id, never the raw /etc/machine-id (issue 26)", async () => {
    const raw = (await readFile('/etc/machine-id', 'utf8')).trim().toLowerCase();
    const key = await newKey();
    const [code] = await newCodes(1);
    const dir = await mkdtemp(join(tmpdir(), 'sts-agent-'));
    try {
      await run(
        process.execPath,
        [
          '--import',
          'tsx',
          'apps/agent/src/main.ts',
          'enroll',
          '--server',
          system.gateway.url,
          '--code',
          code!,
          '--config',
          join(dir, 'agent.json'),
          '--hostname',
          'hashed-id',
        ],
        { env: { ...process.env, STS_ENROLLMENT_KEY: key } },
      );
      const device = (await devices('?q=hashed-id'))[0];
      expect(device?.machine_id).toBe(
        createHmac('sha256', 'sts-agent/machine-id/v1').update(raw).digest('hex'),
      );
      expect(device?.machine_id).not.toContain(raw);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('shares one daily quota of e-mails to outsiders between invites and codes, and limits each recipient (issue 26)', async () => {
    // An organization of its own (anyone who signs in has one): 50 e-mails a day, 3 per recipient.
    const owner = await system.tokenFor('owner@quota.test', { name: 'Quota Owner' });
    await system.api('GET', '/api/session', { token: owner });
    await newKey(owner);
    const emailCode = (email: string) =>
      system.api<Problem>('POST', '/api/enrollment-codes/email', { token: owner, body: { email } });
    const invite = (email: string) =>
      system.api<Problem>('POST', '/api/invites', { token: owner, body: { email, role: 'ANALYST' } });
    const codeMailsTo = (email: string) =>
      system.mail.messages.filter((m) => m.to.includes(email) && (m.text ?? '').includes('agent enroll'));

    expect((await invite('pat@quota.test')).status).toBe(201);
    expect((await emailCode('pat@quota.test')).status).toBe(200);
    expect((await emailCode('Pat@Quota.test')).status).toBe(200);
    for (const refused of [await emailCode('pat@quota.test'), await invite('PAT@quota.test')]) {
      expect([refused.status, refused.body.code]).toEqual([429, 'RATE_LIMITED']);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
    }
    // Nothing went out for the refused code: the organization's next code e-mail comes after the two.
    expect((await emailCode('marker@quota.test')).status).toBe(200);
    await system.mail.waitFor((m) => m.to.includes('marker@quota.test'), 10_000);
    expect(codeMailsTo('pat@quota.test')).toHaveLength(2);

    // 4 taken; 46 more of both kinds fill the day.
    for (let i = 0; i < 46; i++) {
      const response =
        i % 8 === 0 ? await invite(`guest-${i}@quota.test`) : await emailCode(`ops-${i}@quota.test`);
      expect([i, response.status]).toEqual([i, i % 8 === 0 ? 201 : 200]);
    }
    const overInvite = await invite('late@quota.test');
    const overCode = await emailCode('late-code@quota.test');
    expect([overInvite.status, overInvite.body.code, overCode.status, overCode.body.code]).toEqual([
      429,
      'RATE_LIMITED',
      429,
      'RATE_LIMITED',
    ]);
    // Nothing half-written: the refused invite is not pending.
    const pending = await system.api<{ email: string }[]>('GET', '/api/invites?limit=200', { token: owner });
    expect(pending.body.map((i) => i.email)).not.toContain('late@quota.test');
    expect(pending.body).toHaveLength(7);
    // Another organization has its own quota.
    expect(
      (
        await system.api('POST', '/api/enrollment-codes/email', {
          token: admin,
          body: { email: 'late-code@quota.test' },
        })
      ).status,
    ).toBe(200);
  });
});
