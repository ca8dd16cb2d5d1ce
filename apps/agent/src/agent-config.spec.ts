import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AgentConfigError,
  ConfigExistsError,
  defaultConfigPath,
  InvalidConfigError,
  prepareConfigDirectory,
  readAgentConfig,
  writeAgentConfig,
  type AgentConfig,
} from './agent-config';

const posixOnly = process.platform === 'win32' ? it.skip : it;

const CONFIG: AgentConfig = {
  server: 'https://api.example.com',
  device_id: 'dev_1',
  org_id: 'org_1',
  device_token: 'stsdt_secret',
  machine_id: '3d1219c7c4c5404aaa1f6d2a48adfda4',
  hostname: 'laptop-7',
  enrolled_at: '2026-01-02T03:04:05.000Z',
};

const modeOf = async (path: string) => (await stat(path)).mode & 0o777;

describe('defaultConfigPath', () => {
  const user = { platform: 'linux' as const, isRoot: false, homedir: '/home/ada' };

  it('uses $XDG_CONFIG_HOME when absolute, else ~/.config', () => {
    expect(defaultConfigPath({ XDG_CONFIG_HOME: '/x/cfg', HOME: '/home/ada' }, user)).toBe(
      '/x/cfg/sts-agent/agent.json',
    );
    expect(defaultConfigPath({ XDG_CONFIG_HOME: 'relative/cfg', HOME: '/home/ada' }, user)).toBe(
      '/home/ada/.config/sts-agent/agent.json',
    );
    expect(defaultConfigPath({ XDG_CONFIG_HOME: '' }, user)).toBe('/home/ada/.config/sts-agent/agent.json');
    expect(defaultConfigPath({ HOME: '/home/bob' }, user)).toBe('/home/bob/.config/sts-agent/agent.json');
  });

  it('uses /etc/sts-agent for root and %APPDATA% on Windows', () => {
    expect(defaultConfigPath({ XDG_CONFIG_HOME: '/root/.config' }, { ...user, isRoot: true })).toBe(
      '/etc/sts-agent/agent.json',
    );
    expect(
      defaultConfigPath(
        { APPDATA: 'C:\\Users\\ada\\AppData\\Roaming' },
        { platform: 'win32', isRoot: false, homedir: 'C:\\Users\\ada' },
      ),
    ).toBe('C:\\Users\\ada\\AppData\\Roaming\\sts-agent\\agent.json');
  });
});

describe('agent config file', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-config-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  posixOnly('creates the file with 0600 in a new 0700 directory and reads it back', async () => {
    const file = join(dir, 'nested', 'sts-agent', 'agent.json');
    const prepared = await writeAgentConfig(file, CONFIG, { overwrite: false });
    expect(prepared.created).toBe(true);
    expect(await modeOf(file)).toBe(0o600);
    expect(await modeOf(join(dir, 'nested', 'sts-agent'))).toBe(0o700);
    expect(await modeOf(join(dir, 'nested'))).toBe(0o700);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ version: 1, ...CONFIG });
    await expect(readAgentConfig(file)).resolves.toEqual({ config: CONFIG, mode: 0o600, warnings: [] });
  });

  posixOnly('gets the modes right whatever the umask', async () => {
    const previous = process.umask(0o277); // would give 0400 files and 0500 directories
    try {
      const file = join(dir, 'a', 'agent.json');
      await writeAgentConfig(file, CONFIG, { overwrite: false });
      expect(await modeOf(file)).toBe(0o600);
      expect(await modeOf(join(dir, 'a'))).toBe(0o700);
      process.umask(0);
      const other = join(dir, 'b', 'agent.json');
      await writeAgentConfig(other, CONFIG, { overwrite: false });
      expect(await modeOf(other)).toBe(0o600);
      expect(await modeOf(join(dir, 'b'))).toBe(0o700);
    } finally {
      process.umask(previous);
    }
  });

  it('refuses to replace an existing file unless overwrite, and leaves it untouched', async () => {
    const file = join(dir, 'agent.json');
    await writeFile(file, 'previous enrollment', { mode: 0o600 });
    await expect(writeAgentConfig(file, CONFIG, { overwrite: false })).rejects.toBeInstanceOf(
      ConfigExistsError,
    );
    expect(await readFile(file, 'utf8')).toBe('previous enrollment');
    expect(await readdir(dir)).toEqual(['agent.json']); // no temporary file left behind
  });

  posixOnly('replaces atomically with overwrite: a new file (inode) renamed over the old one', async () => {
    const file = join(dir, 'agent.json');
    await writeAgentConfig(file, CONFIG, { overwrite: false });
    const before = await stat(file);
    await writeAgentConfig(file, { ...CONFIG, device_token: 'stsdt_new' }, { overwrite: true });
    const after = await stat(file);
    expect(after.ino).not.toBe(before.ino); // never rewritten in place, so readers see old or new, not half
    expect(after.mode & 0o777).toBe(0o600);
    expect((await readAgentConfig(file))?.config.device_token).toBe('stsdt_new');
    expect(await readdir(dir)).toEqual(['agent.json']);
  });

  it('cleans up its temporary file when the final rename fails', async () => {
    const file = join(dir, 'agent.json');
    await mkdir(join(file, 'occupied'), { recursive: true }); // a non-empty directory where the file should go
    await expect(writeAgentConfig(file, CONFIG, { overwrite: true })).rejects.toBeInstanceOf(
      AgentConfigError,
    );
    expect((await readdir(dir)).sort()).toEqual(['agent.json']);
    expect((await stat(file)).isDirectory()).toBe(true);
  });

  it('keeps the opt-in to plain http: written and read back only as true', async () => {
    const file = join(dir, 'agent.json');
    await writeAgentConfig(file, { ...CONFIG, allow_insecure_http: true }, { overwrite: false });
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ allow_insecure_http: true });
    expect((await readAgentConfig(file))?.config.allow_insecure_http).toBe(true);

    await writeAgentConfig(file, { ...CONFIG, allow_insecure_http: false }, { overwrite: true });
    expect(JSON.parse(await readFile(file, 'utf8'))).not.toHaveProperty('allow_insecure_http');
    for (const value of ['true', 1, null]) {
      await writeFile(file, JSON.stringify({ version: 1, ...CONFIG, allow_insecure_http: value }), {
        mode: 0o600,
      });
      expect((await readAgentConfig(file))?.config).toEqual(CONFIG);
    }
  });

  it('reads: undefined when missing, errors for non-JSON, incomplete or newer files', async () => {
    const file = join(dir, 'agent.json');
    await expect(readAgentConfig(file)).resolves.toBeUndefined();
    await writeFile(file, '{not json', { mode: 0o600 });
    await expect(readAgentConfig(file)).rejects.toThrow(/not valid JSON/);
    await expect(readAgentConfig(file)).rejects.toBeInstanceOf(InvalidConfigError);
    await expect(readAgentConfig(join(file, 'below-a-file.json'))).resolves.toBeUndefined();
    await writeFile(file, JSON.stringify({ ...CONFIG, device_token: '' }));
    await expect(readAgentConfig(file)).rejects.toThrow(/not an agent enrollment/);
    await writeFile(file, JSON.stringify({ version: 2, ...CONFIG }));
    await expect(readAgentConfig(file)).rejects.toThrow(/newer agent/);
    await expect(readAgentConfig(dir)).rejects.toThrow(/not a regular file/);
  });

  posixOnly('warns when the file is readable by others', async () => {
    const file = join(dir, 'agent.json');
    await writeAgentConfig(file, CONFIG, { overwrite: false });
    await chmod(file, 0o644);
    const stored = await readAgentConfig(file);
    expect(stored?.warnings).toEqual([expect.stringContaining('mode 0644')]);
  });

  posixOnly('leaves an existing directory as it is, warning when others may write to it', async () => {
    const shared = join(dir, 'shared');
    await mkdir(shared);
    await chmod(shared, 0o777);
    const prepared = await prepareConfigDirectory(join(shared, 'agent.json'));
    expect(prepared).toMatchObject({
      created: false,
      warnings: [expect.stringContaining('writable by other users')],
    });
    expect(await modeOf(shared)).toBe(0o777);

    await chmod(shared, 0o1777); // sticky, like /tmp: others cannot replace our files
    expect((await prepareConfigDirectory(join(shared, 'agent.json'))).warnings).toEqual([]);
  });

  it('fails clearly when the directory cannot be created', async () => {
    const blocker = join(dir, 'file');
    await writeFile(blocker, '');
    await expect(prepareConfigDirectory(join(blocker, 'sub', 'agent.json'))).rejects.toThrow(
      AgentConfigError,
    );
  });
});
