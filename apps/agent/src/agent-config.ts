import { randomBytes } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { access, chmod, link, lstat, mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';

/**
 * The agent's enrollment, stored in one JSON file readable only by its owner (mode 0600 in a
 * 0700 directory the agent creates). Written atomically: a temporary file in the same directory,
 * synced, then renamed (or hard-linked when an existing file must not be replaced) over the target.
 */

export const CONFIG_FORMAT_VERSION = 1;
export const FILE_MODE = 0o600;
export const DIRECTORY_MODE = 0o700;
const STICKY_BIT = 0o1000;

export interface AgentConfig {
  server: string;
  device_id: string;
  org_id: string;
  device_token: string;
  machine_id: string;
  hostname: string;
  enrolled_at: string;
  /**
   * The user opted in to plain http to a server that is not this machine (--allow-insecure-http at
   * enrollment); every later send follows it. Absent (false) otherwise.
   */
  allow_insecure_http?: boolean;
}

const FIELDS = [
  'server',
  'device_id',
  'org_id',
  'device_token',
  'machine_id',
  'hostname',
  'enrolled_at',
] as const;

/** A config file that cannot be read, parsed, written or protected; the message says which and where. */
export class AgentConfigError extends Error {
  override readonly name = 'AgentConfigError';
}

/** The file is there but holds no usable enrollment (not JSON, fields missing, newer format, not a file). */
export class InvalidConfigError extends AgentConfigError {}

/** The target exists and the caller asked not to replace it. */
export class ConfigExistsError extends AgentConfigError {}

export interface ConfigLocation {
  platform: NodeJS.Platform;
  isRoot: boolean;
  homedir: string;
}

/**
 * Default config file: root → /etc/sts-agent/agent.json; Windows → %APPDATA%\sts-agent\agent.json;
 * otherwise $XDG_CONFIG_HOME/sts-agent/agent.json (when absolute) or ~/.config/sts-agent/agent.json.
 */
export function defaultConfigPath(env: Record<string, string | undefined>, location: ConfigLocation): string {
  if (location.platform === 'win32') {
    const appData = fromEnv(env, 'APPDATA') ?? path.win32.join(location.homedir, 'AppData', 'Roaming');
    return path.win32.join(appData, 'sts-agent', 'agent.json');
  }
  if (location.isRoot) return '/etc/sts-agent/agent.json';
  const xdg = fromEnv(env, 'XDG_CONFIG_HOME');
  // The XDG spec says relative values are invalid and must be ignored.
  const base =
    xdg && path.posix.isAbsolute(xdg)
      ? xdg
      : path.posix.join(fromEnv(env, 'HOME') ?? location.homedir, '.config');
  return path.posix.join(base, 'sts-agent', 'agent.json');
}

export interface StoredConfig {
  config: AgentConfig;
  /** Permission bits of the file (e.g. 0o600). */
  mode: number;
  /** Problems worth telling the user about, such as a file others can read. */
  warnings: string[];
}

/** Reads the config file; undefined when there is none. Throws AgentConfigError when it is unusable. */
export async function readAgentConfig(file: string): Promise<StoredConfig | undefined> {
  let text: string;
  let mode: number;
  try {
    const info = await stat(file);
    if (!info.isFile()) throw new InvalidConfigError(`${file} is not a regular file`);
    mode = info.mode & 0o777;
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof AgentConfigError) throw error;
    // ENOTDIR: a part of the path is a file, so there is no config here either.
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return undefined;
    throw new AgentConfigError(describeFsError(error, `read ${file}`));
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new InvalidConfigError(`${file} is not valid JSON; it is not an agent enrollment`);
  }
  const version = (parsed as { version?: unknown } | null)?.version;
  if (typeof version === 'number' && version > CONFIG_FORMAT_VERSION) {
    throw new InvalidConfigError(
      `${file} was written by a newer agent (format ${version}); update this agent`,
    );
  }
  const config = toAgentConfig(parsed);
  if (!config) {
    throw new InvalidConfigError(`${file} is not an agent enrollment (it lacks ${FIELDS.join(', ')})`);
  }
  const warnings: string[] = [];
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    warnings.push(
      `${file} is readable or writable by other users (mode ${formatMode(mode)}); run: chmod 600 '${file}'`,
    );
  }
  return { config, mode, warnings };
}

function toAgentConfig(value: unknown): AgentConfig | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const record = value as Record<string, unknown>;
  const config: Partial<Record<(typeof FIELDS)[number], string>> = {};
  for (const field of FIELDS) {
    const fieldValue = record[field];
    if (typeof fieldValue !== 'string' || fieldValue.length === 0) return undefined;
    config[field] = fieldValue;
  }
  // Only a literal true opts in; anything else is no opt-in.
  return record['allow_insecure_http'] === true
    ? { ...(config as AgentConfig), allow_insecure_http: true }
    : (config as AgentConfig);
}

export interface PreparedDirectory {
  directory: string;
  /** True when this call created it (and so made it 0700). */
  created: boolean;
  warnings: string[];
}

/**
 * Makes sure the config file's directory exists and is writable. Directories it creates get 0700;
 * a directory that already existed is left as it is, with a warning when other users may write to it.
 * Called before talking to the server, so a one-time code is not spent when the result cannot be kept.
 */
export async function prepareConfigDirectory(file: string): Promise<PreparedDirectory> {
  const directory = path.dirname(file);
  const posix = process.platform !== 'win32';
  let created = false;
  let info: Stats;
  try {
    created = (await mkdir(directory, { recursive: true, mode: DIRECTORY_MODE })) !== undefined;
    // Before the stat, so the mode checked below is the one the directory keeps.
    if (created && posix) await chmod(directory, DIRECTORY_MODE);
    info = await stat(directory);
    if (!info.isDirectory()) throw new AgentConfigError(`${directory} is not a directory`);
    await access(directory, constants.W_OK);
  } catch (error) {
    if (error instanceof AgentConfigError) throw error;
    throw new AgentConfigError(describeFsError(error, `prepare the directory ${directory}`));
  }
  const warnings: string[] = [];
  if (posix) {
    const mode = info.mode & 0o777;
    if (created && mode !== DIRECTORY_MODE) {
      throw new AgentConfigError(`${directory} has mode ${formatMode(mode)} after creation, expected 0700`);
    }
    // Others may replace files in a directory they can write to, unless it is sticky (like /tmp).
    if (!created && (mode & 0o022) !== 0 && (info.mode & STICKY_BIT) === 0) {
      warnings.push(
        `${directory} is writable by other users (mode ${formatMode(mode)}); they could replace the enrollment. ` +
          'Prefer a directory only you can write to.',
      );
    }
  }
  return { directory, created, warnings };
}

export interface WriteOptions {
  /** Replace an existing file; otherwise ConfigExistsError when one is there (checked atomically). */
  overwrite: boolean;
  /**
   * What prepareConfigDirectory returned for this file, when the caller already called it (and
   * reported its warnings); otherwise the directory is prepared here.
   */
  prepared?: PreparedDirectory;
}

/** Writes the config atomically with mode 0600 and checks the result; see the module comment. */
export async function writeAgentConfig(
  file: string,
  config: AgentConfig,
  options: WriteOptions,
): Promise<PreparedDirectory> {
  const prepared = options.prepared ?? (await prepareConfigDirectory(file));
  if (prepared.directory !== path.dirname(file)) {
    throw new Error(`prepared ${prepared.directory}, not the directory of ${file}`);
  }
  const posix = process.platform !== 'win32';
  const temporary = path.join(
    prepared.directory,
    `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`,
  );
  const content = `${JSON.stringify({ version: CONFIG_FORMAT_VERSION, ...pick(config) }, null, 2)}\n`;
  let temporaryExists = false;
  try {
    // 'wx': never follow or reuse something already at the temporary name.
    const handle = await open(temporary, 'wx', FILE_MODE);
    temporaryExists = true;
    try {
      if (posix) await handle.chmod(FILE_MODE); // in case the umask took bits away
      await handle.writeFile(content, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (options.overwrite) {
      await rename(temporary, file);
    } else {
      await linkWithoutReplacing(temporary, file);
    }
    temporaryExists = false;
  } catch (error) {
    if (temporaryExists) await unlink(temporary).catch(() => undefined);
    if (error instanceof AgentConfigError) throw error;
    throw new AgentConfigError(describeFsError(error, `write ${file}`));
  }
  if (posix) {
    await syncDirectory(prepared.directory);
    await verifyWritten(file);
  }
  return prepared;
}

/** Hard link (fails with EEXIST, so no check-then-act race), then drop the temporary name. */
async function linkWithoutReplacing(temporary: string, file: string): Promise<void> {
  try {
    await link(temporary, file);
  } catch (error) {
    if (errorCode(error) === 'EEXIST') throw new ConfigExistsError(`${file} already exists`);
    // Filesystems without hard links: a plain check, then rename.
    if (await exists(file)) throw new ConfigExistsError(`${file} already exists`);
    await rename(temporary, file);
    return;
  }
  await unlink(temporary);
}

async function verifyWritten(file: string): Promise<void> {
  const info = await lstat(file);
  const mode = info.mode & 0o777;
  const uid = process.getuid?.();
  const problem = !info.isFile()
    ? 'is not a regular file'
    : mode !== FILE_MODE
      ? `has mode ${formatMode(mode)}, expected 0600 (does this filesystem support permissions?)`
      : uid !== undefined && info.uid !== uid
        ? `is owned by uid ${info.uid}, not by this user (uid ${uid})`
        : undefined;
  if (problem) {
    // A credential others may read is worse than none: remove it.
    await unlink(file).catch(() => undefined);
    throw new AgentConfigError(`${file} ${problem}; it was removed`);
  }
}

async function syncDirectory(directory: string): Promise<void> {
  try {
    const handle = await open(directory, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Best effort: some filesystems refuse fsync on directories.
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await lstat(file);
    return true;
  } catch {
    return false;
  }
}

function pick(config: AgentConfig): AgentConfig {
  const fields = Object.fromEntries(FIELDS.map((field) => [field, config[field]])) as unknown as AgentConfig;
  return config.allow_insecure_http === true ? { ...fields, allow_insecure_http: true } : fields;
}

export function formatMode(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`;
}

/** An environment variable's value; undefined when it is unset or blank. */
export function fromEnv(env: Record<string, string | undefined>, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value;
}

function errorCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

function describeFsError(error: unknown, action: string): string {
  switch (errorCode(error)) {
    case 'EACCES':
    case 'EPERM':
      return `Permission denied trying to ${action} (run as the user who enrolled, or use --config)`;
    case 'EROFS':
      return `Cannot ${action}: read-only filesystem (use --config)`;
    case 'ENOSPC':
      return `Cannot ${action}: no space left on the device`;
    case 'ENOTDIR':
      return `Cannot ${action}: a part of the path is not a directory`;
    case 'EISDIR':
      return `Cannot ${action}: it is a directory`;
    default: {
      const message = (error as { message?: unknown } | null)?.message;
      return `Cannot ${action}: ${typeof message === 'string' ? message : String(error)}`;
    }
  }
}
