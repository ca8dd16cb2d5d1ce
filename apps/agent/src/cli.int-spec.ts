import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@sts/testing/free-port';
import { EXIT, runCli, type AgentDeps } from './cli';

/**
 * `agent enroll` / `agent status` through runCli against a local HTTP server that speaks the
 * contract of POST /api/device/enroll (problem+json errors with our stable codes, Retry-After),
 * with knobs for the failures a real deployment can produce (slow, broken, redirecting).
 */

const KEY = `stsek_${randomBytes(16).toString('hex')}`;
/** /etc/machine-id, and what the agent reports for it (HMAC-SHA256 keyed with the application id). */
const RAW_MACHINE_ID = '3d1219c7c4c5404aaa1f6d2a48adfda4';
const MACHINE_ID = 'b182b32c253bf1d5d9fe9ca4a104e7925391ba10508fd50cbfffeb0e3927c2e7';
const DEFAULT_MAX_BODY_BYTES = 16 * 1024;

type Mode =
  'contract' | 'slow' | 'rate-limited' | 'crash' | 'html-502' | 'garbage-200' | 'no-token' | 'redirect';

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

class FakeEnrollmentServer {
  mode: Mode = 'contract';
  maxBodyBytes = DEFAULT_MAX_BODY_BYTES;
  maxHostnameLength = 255;
  readonly received: Received[] = [];
  readonly codes = new Map<string, 'valid' | 'expired' | 'used'>();
  /** machine id → device id, for this organization. */
  readonly devices = new Map<string, string>();
  /** machine id → the device's current token: a re-enrollment must present it (X-Device-Token). */
  readonly currentTokens = new Map<string, string>();
  readonly otherOrgMachines = new Set<string>();
  readonly tokensIssued: string[] = [];
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor() {
    this.server = createServer((request, response) => {
      void this.handle(request, response);
    });
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of request) {
      size += (chunk as Buffer).length;
      chunks.push(chunk as Buffer);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    this.received.push({
      method: request.method ?? '',
      url: request.url ?? '',
      headers: request.headers,
      body,
    });

    switch (this.mode) {
      case 'slow':
        return; // never answers; the agent must give up on its own
      case 'crash':
        return problem(response, 500, 'INTERNAL', 'Internal server error');
      case 'html-502':
        response.writeHead(502, { 'content-type': 'text/html' }).end('<html><h1>502 Bad Gateway</h1></html>');
        return;
      case 'garbage-200':
        response.writeHead(200, { 'content-type': 'text/html' }).end('<html>welcome</html>');
        return;
      case 'no-token':
        return json(response, 200, { device_id: 'dev_x', org_id: 'org_x' });
      case 'redirect':
        response.writeHead(308, { location: 'https://elsewhere.example/api/device/enroll' }).end();
        return;
      case 'rate-limited':
        return problem(
          response,
          429,
          'RATE_LIMITED',
          'Too many failed enrollments; wait before trying again',
          {
            'retry-after': '30',
          },
        );
      case 'contract':
        break;
    }

    if (request.method !== 'POST' || request.url !== '/api/device/enroll') {
      return problem(response, 404, 'ROUTE_NOT_FOUND', `Route ${request.method} ${request.url} not found`);
    }
    if (size > this.maxBodyBytes)
      return problem(response, 413, 'PAYLOAD_TOO_LARGE', 'Request body is too large');
    if (!String(request.headers['content-type']).startsWith('application/json')) {
      return problem(response, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Send request bodies as application/json');
    }
    const key = request.headers['x-enrollment-key'];
    if (key !== KEY)
      return problem(response, 401, 'ENROLLMENT_KEY_INVALID', 'Enrollment key missing or invalid');
    const input = body as Record<string, unknown>;
    const errors = ['code', 'machine_id', 'hostname']
      .filter((field) => typeof input[field] !== 'string' || input[field] === '')
      .map((field) => ({ path: `body.${field}`, message: 'is required' }));
    if (typeof input['hostname'] === 'string' && input['hostname'].length > this.maxHostnameLength) {
      errors.push({ path: 'body.hostname', message: `must be at most ${this.maxHostnameLength} characters` });
    }
    if (typeof input['metadata'] !== 'object')
      errors.push({ path: 'body.metadata', message: 'must be an object' });
    if (errors.length > 0) {
      return problem(
        response,
        400,
        'VALIDATION_FAILED',
        `Invalid body: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`,
        {},
        errors,
      );
    }
    const code = input['code'] as string;
    const state = this.codes.get(code);
    if (state === undefined)
      return problem(response, 400, 'ENROLLMENT_CODE_INVALID', 'Enrollment code is invalid');
    if (state === 'expired')
      return problem(response, 400, 'ENROLLMENT_CODE_EXPIRED', 'Enrollment code has expired');
    if (state === 'used')
      return problem(response, 400, 'ENROLLMENT_CODE_USED', 'Enrollment code has already been used');
    const machineId = input['machine_id'] as string;
    if (this.otherOrgMachines.has(machineId)) {
      return problem(
        response,
        409,
        'MACHINE_ENROLLED_ELSEWHERE',
        'This machine is enrolled in another organization',
      );
    }
    const existing = this.devices.get(machineId);
    if (existing !== undefined && request.headers['x-device-token'] !== this.currentTokens.get(machineId)) {
      return problem(
        response,
        409,
        'MACHINE_ALREADY_ENROLLED',
        'This machine is already enrolled in this organization',
      );
    }
    this.codes.set(code, 'used');
    const deviceId = existing ?? `dev_${randomBytes(6).toString('hex')}`;
    this.devices.set(machineId, deviceId);
    const token = `stsdt_${randomBytes(24).toString('hex')}`;
    this.tokensIssued.push(token);
    this.currentTokens.set(machineId, token);
    return json(response, 200, {
      device_id: deviceId,
      org_id: 'org_int',
      device_token: token,
      re_enrolled: existing !== undefined,
    });
  }
}

function json(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

function problem(
  response: ServerResponse,
  status: number,
  code: string,
  detail: string,
  headers: Record<string, string> = {},
  errors?: { path: string; message: string }[],
): void {
  const body = {
    type: `urn:sts:problem:${code.toLowerCase().replace(/_/g, '-')}`,
    title: code,
    status,
    detail,
    code,
    request_id: `req-${randomBytes(4).toString('hex')}`,
    ...(errors ? { errors } : {}),
  };
  response
    .writeHead(status, { 'content-type': 'application/problem+json', ...headers })
    .end(JSON.stringify(body));
}

describe('agent enroll against a contract-speaking server', () => {
  let fake: FakeEnrollmentServer;
  let server: string;
  let dir: string;
  let config: string;

  const deps: Partial<AgentDeps> = {
    readMachineId: () => Promise.resolve(RAW_MACHINE_ID),
    hostFacts: () => ({
      hostname: 'int-host',
      os: 'linux',
      osRelease: '6.1.0',
      osType: 'Linux',
      arch: 'x64',
    }),
  };

  const run = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      argv,
      { HOME: dir },
      { out: (l) => out.push(l), err: (l) => err.push(l) },
      deps,
    );
    const all = `${out.join('\n')}\n${err.join('\n')}`;
    // Whatever happened, neither secret reaches the terminal.
    expect(all).not.toContain(KEY);
    for (const token of fake.tokensIssued) expect(all).not.toContain(token);
    return { code, out: out.join('\n'), err: err.join('\n') };
  };

  const enroll = (code: string, ...extra: string[]) =>
    run('enroll', '--server', server, '--key', KEY, '--code', code, '--config', config, ...extra);

  const newCode = () => {
    const code = `${randomBytes(2).toString('hex')}-${randomBytes(2).toString('hex')}`.toUpperCase();
    fake.codes.set(code, 'valid');
    return code;
  };

  beforeAll(async () => {
    fake = new FakeEnrollmentServer();
    server = await fake.start();
  });

  afterAll(async () => {
    await fake.stop();
  });

  beforeEach(async () => {
    fake.mode = 'contract';
    fake.maxBodyBytes = DEFAULT_MAX_BODY_BYTES;
    fake.maxHostnameLength = 255;
    fake.received.length = 0;
    fake.devices.clear();
    fake.currentTokens.clear();
    fake.otherOrgMachines.clear();
    dir = await mkdtemp(join(tmpdir(), 'agent-int-'));
    config = join(dir, 'etc', 'sts-agent', 'agent.json');
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('enrolls, stores the credentials owner-only, and status shows them without the token', async () => {
    const code = newCode();
    const result = await enroll(code);
    expect(result.code).toBe(EXIT.OK);
    expect(result.err).toBe(''); // 127.0.0.1: no plain-http warning

    expect(fake.received).toHaveLength(1);
    const [request] = fake.received;
    expect(request?.headers['x-enrollment-key']).toBe(KEY);
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers['user-agent']).toMatch(/^sts-agent\//);
    expect(request?.body).toEqual({
      code,
      machine_id: MACHINE_ID,
      hostname: 'int-host',
      metadata: {
        os: 'linux',
        os_release: '6.1.0',
        os_type: 'Linux',
        arch: 'x64',
        agent_version: expect.any(String),
      },
    });

    const deviceId = fake.devices.get(MACHINE_ID);
    expect(result.out).toContain(`device id:     ${deviceId}`);
    expect(result.out).toContain('organization:  org_int');
    expect(result.out).toContain(config);

    if (process.platform !== 'win32') {
      expect((await stat(config)).mode & 0o777).toBe(0o600);
      expect((await stat(join(dir, 'etc', 'sts-agent'))).mode & 0o777).toBe(0o700);
    }
    const stored = JSON.parse(await readFile(config, 'utf8')) as Record<string, unknown>;
    expect(stored).toMatchObject({
      server,
      device_id: deviceId,
      org_id: 'org_int',
      device_token: fake.tokensIssued.at(-1),
      machine_id: MACHINE_ID,
      hostname: 'int-host',
    });
    expect(Date.parse(stored['enrolled_at'] as string)).not.toBeNaN();

    const status = await run('status', '--config', config, '--json');
    expect(status.code).toBe(0);
    expect(JSON.parse(status.out)).toMatchObject({
      enrolled: true,
      server,
      device_id: deviceId,
      org_id: 'org_int',
    });
  });

  it('refuses to replace an enrollment without --force (before calling the server); --force re-enrolls', async () => {
    expect((await enroll(newCode())).code).toBe(0);
    const deviceId = fake.devices.get(MACHINE_ID);
    const firstToken = fake.tokensIssued.at(-1);

    const again = await enroll(newCode());
    expect(again.code).toBe(EXIT.ALREADY_ENROLLED);
    expect(again.err).toContain(`already enrolled as device ${deviceId}`);
    expect(again.err).toContain('--force');
    expect(fake.received).toHaveLength(1);

    const forced = await enroll(newCode(), '--force');
    expect(forced.code).toBe(0);
    // The stored token proved that this is the enrolled device.
    expect(fake.received.at(-1)?.headers['x-device-token']).toBe(firstToken);
    expect(forced.out).toContain('same device id, new device token');
    expect(forced.out).toContain(`Replaced the previous enrollment (device ${deviceId})`);
    const stored = JSON.parse(await readFile(config, 'utf8')) as Record<string, unknown>;
    expect(stored['device_id']).toBe(deviceId);
    expect(stored['device_token']).not.toBe(firstToken);
    expect(stored['device_token']).toBe(fake.tokensIssued.at(-1));
  });

  it('401: the enrollment key is wrong (exit 10), nothing stored', async () => {
    const result = await run(
      'enroll',
      '--server',
      server,
      '--key',
      'stsek_wrong',
      '--code',
      newCode(),
      '--config',
      config,
    );
    expect(result.code).toBe(EXIT.KEY_REJECTED);
    expect(result.err).toContain('rejected the enrollment key');
    expect(result.err).toContain('Ask your administrator for the current key');
    expect(result.err).not.toContain('stsek_wrong');
    await expect(stat(config)).rejects.toMatchObject({ code: 'ENOENT' });
    // The directory made for the config is removed again when enrollment fails.
    await expect(stat(join(dir, 'etc', 'sts-agent'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it.each([
    ['invalid', undefined, /enrollment code is not valid/],
    ['expired', 'expired' as const, /enrollment code has expired/],
    ['used', 'used' as const, /enrollment code has already been used/],
  ])('400: an %s code (exit 11) says which and suggests a new one', async (_name, state, message) => {
    const code = `${_name.toUpperCase()}-0001`;
    if (state) fake.codes.set(code, state);
    const result = await enroll(code);
    expect(result.code).toBe(EXIT.CODE_REJECTED);
    expect(result.err).toMatch(message);
    expect(result.err).toContain('Ask your administrator for a new enrollment code');
    expect(result.err).toMatch(/request id req-/);
  });

  it('409: the machine belongs to another organization (exit 12)', async () => {
    fake.otherOrgMachines.add(MACHINE_ID);
    const result = await enroll(newCode());
    expect(result.code).toBe(EXIT.MACHINE_ENROLLED_ELSEWHERE);
    expect(result.err).toContain('already enrolled in another organization');
  });

  it('409: enrolled here, but the credential is lost (exit 20); nothing is stored, the code stays usable', async () => {
    expect((await enroll(newCode())).code).toBe(0);
    await rm(config);
    const code = newCode();
    const result = await enroll(code);
    expect(result.code).toBe(EXIT.MACHINE_ALREADY_ENROLLED);
    expect(result.err).toContain('already enrolled in this organization');
    expect(result.err).toContain(MACHINE_ID);
    await expect(stat(config)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(fake.codes.get(code)).toBe('valid');
  });

  it('429: rate limited (exit 13) with the Retry-After delay', async () => {
    fake.mode = 'rate-limited';
    const result = await enroll(newCode());
    expect(result.code).toBe(EXIT.RATE_LIMITED);
    expect(result.err).toContain('Try again in 30 s');
  });

  it('413 and validation errors: rejected request (exit 14) with the problem detail', async () => {
    fake.maxBodyBytes = 100;
    const large = await enroll(newCode());
    expect(large.code).toBe(EXIT.REQUEST_REJECTED);
    expect(large.err).toContain('HTTP 413');
    expect(large.err).toContain('Request body is too large');

    fake.maxBodyBytes = DEFAULT_MAX_BODY_BYTES;
    fake.maxHostnameLength = 8;
    const invalid = await enroll(newCode(), '--hostname', 'a-long-hostname');
    expect(invalid.code).toBe(EXIT.REQUEST_REJECTED);
    expect(invalid.err).toContain('body.hostname must be at most 8 characters');
  });

  it('5xx: server error (exit 15), with the detail or the status line', async () => {
    fake.mode = 'crash';
    const crash = await enroll(newCode());
    expect(crash.code).toBe(EXIT.SERVER_ERROR);
    expect(crash.err).toContain('HTTP 500');
    expect(crash.err).toContain('Internal server error');

    fake.mode = 'html-502';
    const proxy = await enroll(newCode());
    expect(proxy.code).toBe(EXIT.SERVER_ERROR);
    expect(proxy.err).toContain('HTTP 502 Bad Gateway');
  });

  it('connection refused: network error (exit 16)', async () => {
    // Free: nothing listens there.
    const port = await freePort();
    const result = await run(
      'enroll',
      '--server',
      `http://127.0.0.1:${port}`,
      '--key',
      KEY,
      '--code',
      newCode(),
      '--config',
      config,
    );
    expect(result.code).toBe(EXIT.NETWORK);
    expect(result.err).toContain(`Could not connect to 127.0.0.1:${port}: connection refused`);
  });

  it('a server that never answers hits the timeout (exit 17)', async () => {
    fake.mode = 'slow';
    const started = Date.now();
    const result = await enroll(newCode(), '--timeout', '0.3');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.code).toBe(EXIT.TIMEOUT);
    expect(result.err).toContain('No answer from 127.0.0.1');
    expect(result.err).toContain('within 0.3 s');
    await expect(stat(config)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it.each([
    ['garbage-200' as const, /not with an enrollment \(the body is not JSON\)/],
    ['no-token' as const, /missing device_token/],
    ['redirect' as const, /redirect \(HTTP 308\) to https:\/\/elsewhere\.example\/api\/device\/enroll/],
  ])('%s: malformed answer (exit 18), nothing stored', async (mode, message) => {
    fake.mode = mode;
    const result = await enroll(newCode());
    expect(result.code).toBe(EXIT.BAD_RESPONSE);
    expect(result.err).toMatch(message);
    await expect(stat(config)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a wrong --server path is a rejected request (exit 14) pointing at --server', async () => {
    const result = await run(
      'enroll',
      '--server',
      `${server}/nope`,
      '--key',
      KEY,
      '--code',
      newCode(),
      '--config',
      config,
    );
    expect(result.code).toBe(EXIT.REQUEST_REJECTED);
    expect(result.err).toContain('no enrollment endpoint at');
  });

  it('an unwritable config location fails before the code is spent (exit 5)', async () => {
    const blocker = join(dir, 'not-a-directory');
    await writeFile(blocker, '');
    const result = await run(
      'enroll',
      '--server',
      server,
      '--key',
      KEY,
      '--code',
      newCode(),
      '--config',
      join(blocker, 'agent.json'),
    );
    expect(result.code).toBe(EXIT.LOCAL);
    expect(result.err).toContain('Nothing was sent to the server');
    expect(fake.received).toHaveLength(0);
  });
});
