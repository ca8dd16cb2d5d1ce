import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AGENT_VERSION,
  ENROLL_USAGE,
  EXIT,
  EXIT_CODE_BY_FAILURE,
  runCli,
  STATUS_USAGE,
  USAGE,
  type AgentDeps,
} from './cli';
import { MachineIdError } from './machine-identity';

// Argument handling of the CLI, with the network replaced by a fake fetch and files in a temp dir.

const KEY = 'stsek_unit_key_0123456789';
const TOKEN = 'stsdt_unit_token_abcdef';
/** What the machine says its id is (/etc/machine-id), and what the agent reports (HMAC-SHA256 keyed with the app id). */
const RAW_MACHINE_ID = '3d1219c7c4c5404aaa1f6d2a48adfda4';
const MACHINE_ID = 'b182b32c253bf1d5d9fe9ca4a104e7925391ba10508fd50cbfffeb0e3927c2e7';

interface Seen {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

describe('agent CLI arguments', () => {
  let dir: string;
  let seen: Seen[];
  let respond: () => Response;
  let deps: Partial<AgentDeps>;

  const fakeFetch = (async (url: string, init: RequestInit) => {
    seen.push({
      url,
      headers: init.headers as Record<string, string>,
      body: JSON.parse(init.body as string) as Record<string, unknown>,
    });
    return respond();
  }) as unknown as typeof fetch;

  const run = async (argv: string[], env: Record<string, string> = {}, extra: Partial<AgentDeps> = {}) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      argv,
      { HOME: dir, ...env },
      { out: (l) => out.push(l), err: (l) => err.push(l) },
      {
        ...deps,
        ...extra,
      },
    );
    return { code, out: out.join('\n'), err: err.join('\n') };
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-cli-'));
    seen = [];
    respond = () =>
      new Response(
        JSON.stringify({ device_id: 'dev_1', org_id: 'org_1', device_token: TOKEN, re_enrolled: false }),
        {
          status: 200,
          headers: { 'content-type': 'application/json' },
        },
      );
    deps = {
      fetch: fakeFetch,
      readMachineId: () => Promise.resolve(RAW_MACHINE_ID),
      hostFacts: () => ({
        hostname: 'laptop-7',
        os: 'linux',
        osRelease: '6.1.0',
        osType: 'Linux',
        arch: 'x64',
      }),
      platform: 'linux',
      isRoot: false,
      homedir: dir,
      cwd: dir,
      now: () => new Date('2026-03-01T12:00:00.000Z'),
    };
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('prints help at top level and for each command, with the exit codes', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const { code, out } = await run(argv);
      expect(code).toBe(0);
      expect(out).toBe(USAGE);
    }
    expect(USAGE).toContain('17  timed out');
    for (const argv of [
      ['enroll', '--help'],
      ['help', 'enroll'],
      ['--help', 'enroll'],
      ['enroll', '-h'],
    ]) {
      const { code, out } = await run(argv);
      expect(code).toBe(0);
      expect(out).toBe(ENROLL_USAGE);
    }
    expect(ENROLL_USAGE).toContain('11  enrollment code rejected');
    expect(await run(['status', '--help'])).toMatchObject({ code: 0, out: STATUS_USAGE });
    expect(await run(['--version'])).toMatchObject({ code: 0, out: AGENT_VERSION });
  });

  it.each([
    [[], /Usage:/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['--bogus'], /unknown option "--bogus"/],
    [['help', 'frobnicate'], /no help for unknown command/],
    [['enroll', '--bogus'], /Unknown option '--bogus'/],
    [['enroll', '--server'], /argument missing/],
    [['status', 'extra'], /unexpected argument "extra"/],
    [['status', '--json=yes'], /does not take an argument/],
  ])('%p is a usage error (exit 2)', async (argv, message) => {
    const { code, err } = await run(argv);
    expect(code).toBe(EXIT.USAGE);
    expect(err).toMatch(message);
    expect(seen).toHaveLength(0);
  });

  it('names every missing required value', async () => {
    const { code, err } = await run(['enroll']);
    expect(code).toBe(2);
    expect(err).toContain(
      'enroll needs --server URL (or STS_SERVER_URL), --key KEY (or STS_ENROLLMENT_KEY), --code CODE (or STS_ENROLLMENT_CODE)',
    );
    expect(err).toContain(ENROLL_USAGE);
  });

  it.each([
    [['--server', 'api.example.com'], /--server must be a URL/],
    [['--server', 'ftp://api.example.com'], /must start with https:\/\//],
    [['--key', 'two words'], /enrollment key must be one word/],
    [['--code', ''], /enrollment code must be one word/],
    [['--timeout', 'soon'], /--timeout must be a number/],
    [['--timeout', '0'], /--timeout must be a number/],
    [['--machine-id', 'has space'], /--machine-id must be/],
    [['--machine-id', 'x'.repeat(129)], /--machine-id must be/],
    [['--hostname', 'bad\u0007name'], /--hostname must be/],
    [['--hostname', 'h'.repeat(256)], /--hostname must be/],
    [['--config', ''], /--config must be a file path/],
  ])('rejects %p', async (override, message) => {
    const flags: Record<string, string> = {
      '--server': 'https://api.example.com',
      '--key': KEY,
      '--code': 'AAAA-BBBB',
    };
    for (let i = 0; i < override.length; i += 2) flags[override[i] as string] = override[i + 1] as string;
    const { code, err } = await run(['enroll', ...Object.entries(flags).flat()]);
    expect(code).toBe(EXIT.USAGE);
    expect(err).toMatch(message);
    expect(seen).toHaveLength(0);
  });

  it('takes every value from the environment, flags winning, and never prints the key or token', async () => {
    const env = {
      STS_SERVER_URL: 'https://env.example.com/',
      STS_ENROLLMENT_KEY: KEY,
      STS_ENROLLMENT_CODE: 'ENV1-CODE',
      STS_AGENT_CONFIG: 'custom/agent.json',
    };
    const { code, out, err } = await run(['enroll'], env);
    expect({ code, err }).toEqual({ code: 0, err: '' });
    expect(seen[0]?.url).toBe('https://env.example.com/api/device/enroll');
    expect(seen[0]?.headers['x-enrollment-key']).toBe(KEY);
    expect(seen[0]?.body).toEqual({
      code: 'ENV1-CODE',
      // Never the raw /etc/machine-id (issue 26).
      machine_id: MACHINE_ID,
      hostname: 'laptop-7',
      metadata: {
        os: 'linux',
        os_release: '6.1.0',
        os_type: 'Linux',
        arch: 'x64',
        agent_version: AGENT_VERSION,
      },
    });
    const configPath = join(dir, 'custom', 'agent.json'); // relative to the working directory
    expect(out).toContain(configPath);
    expect(out).toContain('dev_1');
    expect(`${out}${err}`).not.toContain(KEY);
    expect(`${out}${err}`).not.toContain(TOKEN);
    expect(JSON.parse(await readFile(configPath, 'utf8'))).toMatchObject({
      server: 'https://env.example.com',
      device_token: TOKEN,
      enrolled_at: '2026-03-01T12:00:00.000Z',
    });

    const flagged = await run(
      [
        'enroll',
        '--server',
        'https://flag.example.com',
        '--code',
        'FLAG-CODE',
        '--config',
        join(dir, 'f.json'),
        '--hostname',
        ' box-1 ',
      ],
      env,
    );
    expect(flagged.code).toBe(0);
    expect(seen[1]?.url).toBe('https://flag.example.com/api/device/enroll');
    expect(seen[1]?.body).toMatchObject({ code: 'FLAG-CODE', hostname: 'box-1' });
  });

  it('uses the default config path under $HOME/.config', async () => {
    const { code, out } = await run([
      'enroll',
      '--server',
      'https://x.example',
      '--key',
      KEY,
      '--code',
      'C-1',
    ]);
    expect(code).toBe(0);
    expect(out).toContain(join(dir, '.config', 'sts-agent', 'agent.json'));
  });

  it('refuses plain http to another machine unless --allow-insecure-http, which is remembered for reports', async () => {
    const config = join(dir, 'a.json');
    const args = ['--key', KEY, '--code', 'C-1', '--config', config];
    for (const remote of ['http://api.example.com', 'http://10.0.0.5:8080', 'http://gw.localhost']) {
      const refused = await run(['enroll', '--server', remote, ...args]);
      expect(refused.code).toBe(EXIT.USAGE);
      expect(refused.err).toContain(`--server ${new URL(remote).origin} is plain http to another machine`);
      expect(refused.err).toContain('--allow-insecure-http');
    }
    expect(seen).toHaveLength(0);
    await expect(stat(config)).rejects.toMatchObject({ code: 'ENOENT' });

    const allowed = await run([
      'enroll',
      '--server',
      'http://api.example.com',
      ...args,
      '--allow-insecure-http',
    ]);
    expect(allowed.code).toBe(0);
    expect(allowed.err).toMatch(/warning: http:\/\/api\.example\.com is plain http/);
    expect(seen[0]?.url).toBe('http://api.example.com/api/device/enroll');
    expect(JSON.parse(await readFile(config, 'utf8'))).toMatchObject({
      server: 'http://api.example.com',
      allow_insecure_http: true,
    });
    // The opt-in is remembered: later sends go there too.
    respond = () => new Response('{"duplicate":false}', { status: 202 });
    expect((await run(['simulate', '--events', '3', '--config', config])).code).toBe(0);
    expect(seen[1]?.url).toBe('http://api.example.com/api/device/telemetry');

    respond = () =>
      new Response(JSON.stringify({ device_id: 'dev_1', org_id: 'org_1', device_token: TOKEN }), {
        status: 200,
        headers: { 'content-type': 'application/json' },
      });
    for (const local of ['http://127.0.0.1:8080', 'http://localhost:8080', 'http://[::1]:8080']) {
      expect(await run(['enroll', '--server', local, ...args, '--force'])).toMatchObject({
        code: 0,
        err: '',
      });
      expect(JSON.parse(await readFile(config, 'utf8'))).not.toHaveProperty('allow_insecure_http');
    }
  });

  it('report and simulate refuse a config with a plain http server on another machine and no opt-in', async () => {
    const config = join(dir, 'agent.json');
    const input = join(dir, 'events.jsonl');
    await writeFile(input, '{"url":"https://a.example/","verdict":"blocked"}\n');
    // Written by an earlier agent, which only warned at enrollment.
    const earlier = {
      version: 1,
      server: 'http://api.example.com',
      device_id: 'dev_1',
      org_id: 'org_1',
      device_token: TOKEN,
      machine_id: '3d1219c7c4c5404aaa1f6d2a48adfda4',
      hostname: 'laptop-7',
      enrolled_at: '2026-01-01T00:00:00.000Z',
    };
    await writeFile(config, JSON.stringify(earlier), { mode: 0o600 });
    respond = () => new Response('{"duplicate":false}', { status: 202 });
    for (const argv of [['report', '--input', input], ['simulate', '--events', '5'], ['report']]) {
      const refused = await run([...argv, '--config', config]);
      expect(refused.code).toBe(EXIT.LOCAL);
      expect(refused.err).toContain(
        `agent: refusing to send this device's token to http://api.example.com (the server in ${config})`,
      );
      expect(refused.err).toContain('Nothing was queued or sent');
      expect(refused.err).toContain(`"allow_insecure_http": true to ${config}`);
      expect(refused.err).not.toContain(TOKEN);
    }
    expect(seen).toHaveLength(0);
    await expect(stat(join(dir, 'spool'))).rejects.toMatchObject({ code: 'ENOENT' });

    // Opted in by hand, as the message says: sent.
    await writeFile(config, JSON.stringify({ ...earlier, allow_insecure_http: true }), { mode: 0o600 });
    const sent = await run(['report', '--input', input, '--config', config]);
    expect(sent.code).toBe(0);
    expect(seen.map((request) => request.url)).toEqual(['http://api.example.com/api/device/telemetry']);
    expect(seen[0]?.headers['x-device-token']).toBe(TOKEN);
  });

  it('--machine-id (or STS_MACHINE_ID) replaces reading it; an unreadable machine id is exit 5', async () => {
    const failing = () =>
      Promise.reject(new MachineIdError("Could not read this machine's id. Pass --machine-id ID"));
    const base = ['enroll', '--server', 'https://x.example', '--key', KEY, '--code', 'C-1'];
    const failed = await run(base, {}, { readMachineId: failing });
    expect(failed).toMatchObject({ code: EXIT.LOCAL, err: expect.stringContaining('--machine-id') });
    expect(seen).toHaveLength(0);

    expect((await run([...base, '--machine-id', 'my-id-1'], {}, { readMachineId: failing })).code).toBe(0);
    expect(seen[0]?.body['machine_id']).toBe('my-id-1');
  });

  it('proves a re-enrollment with the stored device token, only to the server that issued it (issue 26)', async () => {
    const config = join(dir, 'agent.json');
    const enroll = (server: string, ...extra: string[]) =>
      run(['enroll', '--server', server, '--key', KEY, '--code', 'C-1', '--config', config, ...extra]);
    expect((await enroll('https://x.example')).code).toBe(0);
    expect(seen[0]?.headers['x-device-token']).toBeUndefined();
    expect((await enroll('https://x.example', '--force')).code).toBe(0);
    expect([seen[1]?.headers['x-device-token'], seen[1]?.body['machine_id']]).toEqual([TOKEN, MACHINE_ID]);
    // Another server never sees this server's token; nor does another machine id.
    expect((await enroll('https://other.example', '--force')).code).toBe(0);
    expect(seen[2]?.headers['x-device-token']).toBeUndefined();
    expect((await enroll('https://other.example', '--force', '--machine-id', 'asset-7')).code).toBe(0);
    expect(seen[3]?.headers['x-device-token']).toBeUndefined();
  });

  it('keeps the raw machine id of a device enrolled with it by an earlier agent', async () => {
    const config = join(dir, 'agent.json');
    const earlier = {
      version: 1,
      server: 'https://x.example',
      device_id: 'dev_1',
      org_id: 'org_1',
      device_token: TOKEN,
      machine_id: RAW_MACHINE_ID,
      hostname: 'laptop-7',
      enrolled_at: '2026-01-01T00:00:00.000Z',
    };
    await writeFile(config, JSON.stringify(earlier), { mode: 0o600 });
    const base = [
      'enroll',
      '--server',
      'https://x.example',
      '--key',
      KEY,
      '--code',
      'C-1',
      '--config',
      config,
    ];
    expect((await run([...base, '--force'])).code).toBe(0);
    expect([seen[0]?.body['machine_id'], seen[0]?.headers['x-device-token']]).toEqual([
      RAW_MACHINE_ID,
      TOKEN,
    ]);
  });

  it('explains a refused re-enrollment (409 MACHINE_ALREADY_ENROLLED) with exit 20 and the machine id', async () => {
    respond = () =>
      new Response(
        JSON.stringify({ status: 409, code: 'MACHINE_ALREADY_ENROLLED', title: 't', detail: 'd' }),
        { status: 409, headers: { 'content-type': 'application/problem+json' } },
      );
    const config = join(dir, 'agent.json');
    const refused = await run([
      'enroll',
      '--server',
      'https://x.example',
      '--key',
      KEY,
      '--code',
      'C-1',
      '--config',
      config,
    ]);
    expect(refused.code).toBe(EXIT.MACHINE_ALREADY_ENROLLED);
    expect(refused.code).toBe(20);
    expect(refused.err).toContain('allow its re-enrollment');
    expect(refused.err).toContain(MACHINE_ID);
    await expect(stat(config)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('status: not enrolled (3), enrolled (0, no token), unreadable (5)', async () => {
    const config = join(dir, 'agent.json');
    expect(await run(['status', '--config', config])).toMatchObject({
      code: EXIT.NOT_ENROLLED,
      err: expect.stringContaining('not enrolled'),
    });
    const notEnrolledJson = await run(['status', '--config', config, '--json']);
    expect(notEnrolledJson.code).toBe(3);
    expect(JSON.parse(notEnrolledJson.out)).toEqual({ enrolled: false, config_path: config });

    await run(['enroll', '--server', 'https://x.example', '--key', KEY, '--code', 'C-1', '--config', config]);
    const human = await run(['status', '--config', config]);
    expect(human.code).toBe(0);
    expect(human.out).toContain('device id:     dev_1');
    expect(human.out).not.toContain(TOKEN);
    const json = await run(['status', '--json'], { STS_AGENT_CONFIG: config });
    expect(JSON.parse(json.out)).toEqual({
      enrolled: true,
      server: 'https://x.example',
      device_id: 'dev_1',
      org_id: 'org_1',
      hostname: 'laptop-7',
      machine_id: MACHINE_ID,
      enrolled_at: '2026-03-01T12:00:00.000Z',
      config_path: config,
    });

    await writeFile(config, 'garbage');
    expect(await run(['status', '--config', config])).toMatchObject({
      code: EXIT.LOCAL,
      err: expect.stringContaining('not valid JSON'),
    });
  });

  it('treats a file that is not an enrollment as taken unless --force', async () => {
    const config = join(dir, 'agent.json');
    await writeFile(config, '{"hello": "world"}');
    const base = [
      'enroll',
      '--server',
      'https://x.example',
      '--key',
      KEY,
      '--code',
      'C-1',
      '--config',
      config,
    ];
    expect(await run(base)).toMatchObject({
      code: EXIT.ALREADY_ENROLLED,
      err: expect.stringContaining('--force'),
    });
    expect(seen).toHaveLength(0);
    expect((await run([...base, '--force'])).code).toBe(0);
    expect(JSON.parse(await readFile(config, 'utf8'))).toMatchObject({ device_id: 'dev_1' });
  });

  it('maps every failure kind to its own exit code', () => {
    const codes = Object.values(EXIT_CODE_BY_FAILURE);
    expect(new Set(codes).size).toBe(codes.length);
    expect(codes.every((code) => code >= 10)).toBe(true);
  });
});
