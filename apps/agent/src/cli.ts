import { rmdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import agentPackage from '../package.json';
import {
  AgentConfigError,
  ConfigExistsError,
  defaultConfigPath,
  fromEnv,
  InvalidConfigError,
  prepareConfigDirectory,
  readAgentConfig,
  writeAgentConfig,
  type AgentConfig,
  type PreparedDirectory,
  type StoredConfig,
} from './agent-config';
import {
  DEFAULT_TIMEOUT_MS,
  enrollDevice,
  parseServerUrl,
  serverBaseUrl,
  ServerUrlError,
  type EnrollFailureKind,
} from './enroll-client';
import {
  appSpecificMachineId,
  MachineIdError,
  readHostFacts,
  readMachineId,
  type HostFacts,
} from './machine-identity';
import {
  DEFAULT_MAX_BATCH_BYTES,
  openInput,
  readJsonLines,
  runReport,
  type ReportRun,
} from './report-command';
import { seededRandom, simulatedEvents } from './simulated-traffic';
import { TelemetrySpool } from './telemetry-spool';

export const AGENT_VERSION: string = agentPackage.version;

/** Exit codes; stable, documented in --help, so scripts may branch on them. */
export const EXIT = {
  OK: 0,
  UNEXPECTED: 1,
  USAGE: 2,
  NOT_ENROLLED: 3,
  ALREADY_ENROLLED: 4,
  LOCAL: 5,
  KEY_REJECTED: 10,
  CODE_REJECTED: 11,
  MACHINE_ENROLLED_ELSEWHERE: 12,
  RATE_LIMITED: 13,
  REQUEST_REJECTED: 14,
  SERVER_ERROR: 15,
  NETWORK: 16,
  TIMEOUT: 17,
  BAD_RESPONSE: 18,
  DEVICE_REFUSED: 19,
  MACHINE_ALREADY_ENROLLED: 20,
} as const;

export const EXIT_CODE_BY_FAILURE: Record<EnrollFailureKind, number> = {
  key_rejected: EXIT.KEY_REJECTED,
  code_rejected: EXIT.CODE_REJECTED,
  machine_enrolled_elsewhere: EXIT.MACHINE_ENROLLED_ELSEWHERE,
  machine_already_enrolled: EXIT.MACHINE_ALREADY_ENROLLED,
  rate_limited: EXIT.RATE_LIMITED,
  request_rejected: EXIT.REQUEST_REJECTED,
  server_error: EXIT.SERVER_ERROR,
  network: EXIT.NETWORK,
  timeout: EXIT.TIMEOUT,
  bad_response: EXIT.BAD_RESPONSE,
};

const EXIT_CODES_HELP = `Exit codes:
   0  success
   1  unexpected error
   2  usage error (unknown command or option, missing or invalid value)
   3  not enrolled (status)
   4  already enrolled (enroll without --force)
   5  local problem: machine id unreadable, config file unreadable or unwritable, or its server
      is plain http to another machine and was not enrolled with --allow-insecure-http
  10  enrollment key rejected (missing, wrong, rotated or revoked)
  11  enrollment code rejected (invalid, expired or already used)
  12  this machine is enrolled in another organization
  13  rate limited by the server (retry after the time shown)
  14  request rejected by the server (other 4xx, e.g. too large)
  15  server error (5xx)
  16  network error (connection refused, DNS, TLS, connection reset)
  17  timed out waiting for the server
  18  unexpected or malformed answer from the server
  19  the server refuses this device's telemetry (token unknown: enroll again; device disabled)
  20  this machine is already enrolled in this organization and this agent cannot prove it is
      that device (no device token): an administrator must allow its re-enrollment`;

const CONFIG_HELP = `Config file (--config PATH or STS_AGENT_CONFIG): by default
$XDG_CONFIG_HOME/sts-agent/agent.json, else ~/.config/sts-agent/agent.json;
/etc/sts-agent/agent.json when run as root; %APPDATA%\\sts-agent\\agent.json on Windows.`;

export const USAGE = `sts-agent ${AGENT_VERSION}: connects this device to the security telemetry service.

Usage:
  agent enroll --server URL --key KEY --code CODE [options]
      Enroll this device with a one-time enrollment code and the organization's enrollment key.
  agent status [--config PATH] [--json]
      Show what this device is enrolled as.
  agent report [--input FILE|-] [options]
      Send analyzed addresses (JSON lines) to the service, through an on-disk spool.
  agent simulate [--events N] [--hours H] [options]
      Generate realistic traffic for this device and send it like report.
  agent help [COMMAND]      (or: agent COMMAND --help)
  agent --version

${CONFIG_HELP}

${EXIT_CODES_HELP}
`;

export const ENROLL_USAGE = `Usage:
  agent enroll --server URL --key KEY --code CODE [--config PATH] [--hostname NAME]
               [--machine-id ID] [--timeout SECONDS] [--force] [--allow-insecure-http]

Enrolls this device: sends the one-time code, this machine's id, its hostname, OS and
architecture to POST <server>/api/device/enroll (authenticated by the enrollment key), then
stores the device id and device token in the config file, readable only by its owner (0600).
Neither the key nor the token is ever printed.

Enrolling again (--force) with the same server sends the device token of the config file, which
proves to the server that this is the enrolled device: it keeps its device id and gets a new token.
Without that token (a reinstall that lost it) the server refuses (exit 20) until an administrator
allows the device's re-enrollment.

Options (each flag wins over its environment variable):
  --server URL        service base address, https://... (STS_SERVER_URL); http:// only to this
                      machine (localhost, 127.0.0.0/8, ::1) unless --allow-insecure-http
  --key KEY           the organization's enrollment key (STS_ENROLLMENT_KEY). Prefer the
                      variable: command-line arguments are visible to other users.
  --code CODE         one-time enrollment code, e.g. 7KQD-M3XP (STS_ENROLLMENT_CODE)
  --config PATH       where to store the enrollment (STS_AGENT_CONFIG)
  --hostname NAME     name to report instead of this machine's hostname
  --machine-id ID     identifier to report instead of this machine's id, as given (STS_MACHINE_ID)
  --timeout SECONDS   how long to wait for the server (default ${DEFAULT_TIMEOUT_MS / 1000})
  --force             replace an existing enrollment in the config file
  --allow-insecure-http
                      accept a plain http:// --server on another machine: the enrollment key and
                      the device token then cross the network unencrypted. Remembered in the config
                      file, so that report and simulate send there too.
  -h, --help          show this help

Machine id: derived from /etc/machine-id or /var/lib/dbus/machine-id (Linux), IOPlatformUUID
(macOS) or MachineGuid (Windows) as an HMAC-SHA256 keyed with this application's id (64 hex
digits), so the raw id never leaves the machine. A device enrolled before with the raw id keeps it.

${CONFIG_HELP}

${EXIT_CODES_HELP}
`;

export const STATUS_USAGE = `Usage:
  agent status [--config PATH] [--json]

Shows what this device is enrolled as: server, device id, organization id, hostname, machine id
and enrollment time (never the device token).

Options:
  --config PATH   the config file to read (STS_AGENT_CONFIG)
  --json          print one JSON object ({"enrolled": false, ...} when not enrolled)
  -h, --help      show this help

${CONFIG_HELP}

Exit codes:
   0  enrolled
   1  unexpected error
   2  usage error
   3  not enrolled (no config file)
   5  the config file cannot be read or is not an enrollment
`;

export const REPORT_USAGE = `Usage:
  agent report [--input FILE|-] [--config PATH] [--batch-size N] [--spool DIR]
               [--spool-max-mb N] [--max-retry SECONDS] [--timeout SECONDS]

Queues the events of FILE (- for standard input) in the spool, then sends every spooled batch to
POST <server>/api/device/telemetry, oldest first. Without --input, only sends what the spool holds.
One JSON object per line:
  {"url": "https://example.com/x", "verdict": "allowed|blocked|warned",
   "classification_ms": 12.5, "observed_at": "2026-11-25T10:00:00Z"}
classification_ms and observed_at are optional (0 and now). Invalid lines are skipped and counted.

The device token goes only to an https:// server, or http:// to this machine, unless the device
was enrolled with --allow-insecure-http; otherwise nothing is queued or sent (exit 5).

Unreachable server, 429 or 5xx: retried with backoff (honouring Retry-After) for --max-retry
seconds; what is left stays in the spool for the next run. A batch answered with 5xx is tried
again after the others, so that it never holds them up. A batch over ${DEFAULT_MAX_BATCH_BYTES / 1024} KiB, or one
the server answers 413 (too large), is split in two with new batch ids until it fits. Batches
the server refuses (400, or 413 for a single event) are set aside in <spool>/rejected. When the
spool is full, the oldest batches are dropped.

Options:
  --input FILE        events to queue first (- reads standard input)
  --config PATH       the enrollment to use (STS_AGENT_CONFIG)
  --batch-size N      events per batch (default 1000, at most 5000)
  --spool DIR         spool directory (default: "spool" beside the config file)
  --spool-max-mb N    spool size limit (default 64)
  --max-retry SECONDS how long to keep retrying (default 60)
  --timeout SECONDS   how long to wait for each answer (default 15)
  -h, --help          show this help

${EXIT_CODES_HELP}
`;

export const SIMULATE_USAGE = `Usage:
  agent simulate [--events N] [--hours H] [--seed N] [report options]

Generates N events (default 500) spread over the last H hours (default 24, at most 720), but not before
the device was enrolled (the service drops events older than that), as a browser extension would report
them (mostly allowed, some warned, about 1% blocked) and sends them like "agent report". Takes report's
options except --input.

${EXIT_CODES_HELP}
`;

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
}

/** What runCli needs from the machine; tests and the end-to-end suite replace any of it. */
export interface AgentDeps {
  readMachineId: () => Promise<string>;
  hostFacts: () => HostFacts;
  fetch: typeof fetch;
  platform: NodeJS.Platform;
  isRoot: boolean;
  homedir: string;
  cwd: string;
  now: () => Date;
  sleep: (ms: number) => Promise<void>;
  stdin: Readable;
}

export function defaultAgentDeps(env: Record<string, string | undefined>): AgentDeps {
  return {
    readMachineId: () => readMachineId(),
    hostFacts: readHostFacts,
    fetch: (input, init) => fetch(input, init),
    platform: process.platform,
    isRoot: process.getuid?.() === 0,
    homedir: env['HOME'] ?? os.homedir(),
    cwd: process.cwd(),
    now: () => new Date(),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    stdin: process.stdin,
  };
}

class UsageError extends Error {
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

const COMMANDS: Record<string, string> = {
  enroll: ENROLL_USAGE,
  status: STATUS_USAGE,
  report: REPORT_USAGE,
  simulate: SIMULATE_USAGE,
};

/** Runs the agent CLI; resolves with the process exit code. Never throws. */
export async function runCli(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  io: CliIo,
  deps: Partial<AgentDeps> = {},
): Promise<number> {
  const machine = { ...defaultAgentDeps(env), ...deps };
  try {
    const [command, ...rest] = argv;
    if (command === undefined) {
      io.err(USAGE);
      return EXIT.USAGE;
    }
    switch (command) {
      case '-h':
      case '--help':
        return help(rest[0], io);
      case 'help':
        return help(rest[0], io);
      case '--version':
        if (rest.length > 0) throw new UsageError('--version takes no arguments', USAGE);
        io.out(AGENT_VERSION);
        return EXIT.OK;
      case 'enroll':
        return await enroll(rest, env, io, machine);
      case 'status':
        return await status(rest, env, io, machine);
      case 'report':
        return await report(rest, env, io, machine, 'report');
      case 'simulate':
        return await report(rest, env, io, machine, 'simulate');
      default:
        throw new UsageError(
          command.startsWith('-') ? `unknown option "${command}"` : `unknown command "${command}"`,
          USAGE,
        );
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`agent: ${error.message}\n\n${error.usage}`);
      return EXIT.USAGE;
    }
    io.err(`agent: unexpected error: ${error instanceof Error ? error.message : String(error)}`);
    return EXIT.UNEXPECTED;
  }
}

function help(topic: string | undefined, io: CliIo): number {
  if (topic === undefined) {
    io.out(USAGE);
    return EXIT.OK;
  }
  const usage = COMMANDS[topic];
  if (!usage) throw new UsageError(`no help for unknown command "${topic}"`, USAGE);
  io.out(usage);
  return EXIT.OK;
}

async function enroll(
  args: readonly string[],
  env: Record<string, string | undefined>,
  io: CliIo,
  machine: AgentDeps,
): Promise<number> {
  const values = parseCommand(args, ENROLL_USAGE, {
    help: { type: 'boolean', short: 'h' },
    server: { type: 'string' },
    key: { type: 'string' },
    code: { type: 'string' },
    config: { type: 'string' },
    hostname: { type: 'string' },
    'machine-id': { type: 'string' },
    timeout: { type: 'string' },
    force: { type: 'boolean' },
    'allow-insecure-http': { type: 'boolean' },
  });
  if (values['help']) {
    io.out(ENROLL_USAGE);
    return EXIT.OK;
  }
  const options = resolveEnrollOptions(values, env, machine);

  // Before spending the one-time code: is there an enrollment already, and can the result be stored?
  const configPath = options.configPath;
  let existing: StoredConfig | undefined;
  try {
    existing = await readAgentConfig(configPath);
  } catch (error) {
    if (!(error instanceof AgentConfigError)) throw error;
    if (!(error instanceof InvalidConfigError)) {
      io.err(`agent: ${error.message}. Nothing was sent to the server.`);
      return EXIT.LOCAL;
    }
    if (!options.force) {
      io.err(`agent: ${error.message}.\nPass --force to replace it with a new enrollment.`);
      return EXIT.ALREADY_ENROLLED;
    }
  }
  if (existing && !options.force) {
    io.err(
      `agent: this device is already enrolled as device ${existing.config.device_id} ` +
        `(organization ${existing.config.org_id}, server ${existing.config.server}); see ${configPath}.\n` +
        'Pass --force to enroll again and replace that enrollment.',
    );
    return EXIT.ALREADY_ENROLLED;
  }

  // The enrollment in the config file, when it is with this server: its token proves a re-enrollment.
  const previous =
    existing && existing.config.server === serverBaseUrl(options.server) ? existing.config : undefined;
  let machineId = options.machineId;
  if (machineId === undefined) {
    let raw: string;
    try {
      raw = await machine.readMachineId();
    } catch (error) {
      if (!(error instanceof MachineIdError)) throw error;
      io.err(`agent: ${error.message}`);
      return EXIT.LOCAL;
    }
    // A device enrolled with the raw id (agents before the derived id) goes on under it; every other
    // enrollment reports the derived id.
    machineId = previous?.machine_id === raw ? raw : appSpecificMachineId(raw);
  }
  const facts = machine.hostFacts();
  const hostname = options.hostname ?? facts.hostname.trim();
  if (!isReasonableName(hostname)) {
    io.err('agent: this machine reports no usable hostname; pass --hostname NAME.');
    return EXIT.LOCAL;
  }

  let prepared: PreparedDirectory;
  try {
    prepared = await prepareConfigDirectory(configPath);
    for (const warning of prepared.warnings) io.err(`agent: warning: ${warning}`);
  } catch (error) {
    if (!(error instanceof AgentConfigError)) throw error;
    io.err(`agent: ${error.message}. Nothing was sent to the server.`);
    return EXIT.LOCAL;
  }

  if (options.insecure) {
    io.err(
      `agent: warning: ${options.server.origin} is plain http: the enrollment key and the device token ` +
        'cross the network unencrypted. Use https:// outside local testing.',
    );
  }

  const result = await enrollDevice({
    server: options.server,
    enrollmentKey: options.key,
    // Only for the machine it was issued to, and only to the server that issued it.
    ...(previous && previous.machine_id === machineId ? { deviceToken: previous.device_token } : {}),
    body: {
      code: options.code,
      machine_id: machineId,
      hostname,
      metadata: {
        os: facts.os,
        os_release: facts.osRelease,
        os_type: facts.osType,
        arch: facts.arch,
        agent_version: AGENT_VERSION,
      },
    },
    timeoutMs: options.timeoutMs,
    userAgent: `sts-agent/${AGENT_VERSION} (${facts.os}; ${facts.arch})`,
    fetch: machine.fetch,
    now: machine.now,
    allowInsecureHttp: options.allowInsecureHttp,
  });
  if (!result.ok) {
    // Leave no trace of a failed attempt (the directory only goes if it is still empty).
    if (prepared.created) await rmdir(prepared.directory).catch(() => undefined);
    io.err(`agent: enrollment failed. ${result.message}`);
    if (result.kind === 'machine_already_enrolled') io.err(`agent: this machine's id: ${machineId}`);
    return EXIT_CODE_BY_FAILURE[result.kind];
  }

  const { enrollment } = result;
  const config: AgentConfig = {
    server: serverBaseUrl(options.server),
    device_id: enrollment.device_id,
    org_id: enrollment.org_id,
    device_token: enrollment.device_token,
    machine_id: machineId,
    hostname,
    enrolled_at: machine.now().toISOString(),
    // Remembered only where it was needed: later sends to this server follow the same rule.
    ...(options.insecure ? { allow_insecure_http: true } : {}),
  };
  try {
    await writeAgentConfig(configPath, config, { overwrite: options.force, prepared });
  } catch (error) {
    if (!(error instanceof AgentConfigError)) throw error;
    io.err(
      `agent: the server enrolled this device as ${enrollment.device_id}, but its credentials could not be saved: ` +
        `${error.message}.\n` +
        (error instanceof ConfigExistsError
          ? 'Another enrollment was written meanwhile; '
          : 'Fix the problem, then ') +
        'enroll again with a new code and --force, once an administrator has allowed the re-enrollment ' +
        `of device ${enrollment.device_id} (its new token is lost; the device keeps its id).`,
    );
    return error instanceof ConfigExistsError ? EXIT.ALREADY_ENROLLED : EXIT.LOCAL;
  }

  io.out(`Enrolled ${hostname} with ${config.server}.`);
  io.out(`  device id:     ${enrollment.device_id}`);
  io.out(`  organization:  ${enrollment.org_id}`);
  io.out(`  machine id:    ${machineId}`);
  io.out(`  config:        ${configPath} (owner only, 0600)`);
  if (enrollment.re_enrolled) {
    io.out('This machine was already enrolled in this organization: same device id, new device token.');
  }
  if (existing) io.out(`Replaced the previous enrollment (device ${existing.config.device_id}).`);
  return EXIT.OK;
}

interface EnrollOptions {
  server: URL;
  /** Plain http to another machine, which the user opted in to (otherwise a usage error). */
  insecure: boolean;
  allowInsecureHttp: boolean;
  key: string;
  code: string;
  configPath: string;
  hostname: string | undefined;
  machineId: string | undefined;
  timeoutMs: number;
  force: boolean;
}

function resolveEnrollOptions(
  values: Record<string, string | boolean | undefined>,
  env: Record<string, string | undefined>,
  machine: AgentDeps,
): EnrollOptions {
  const server = stringOption(values, 'server') ?? fromEnv(env, 'STS_SERVER_URL');
  const key = stringOption(values, 'key') ?? fromEnv(env, 'STS_ENROLLMENT_KEY');
  const code = stringOption(values, 'code') ?? fromEnv(env, 'STS_ENROLLMENT_CODE');
  const missing = [
    server === undefined ? '--server URL (or STS_SERVER_URL)' : undefined,
    key === undefined ? '--key KEY (or STS_ENROLLMENT_KEY)' : undefined,
    code === undefined ? '--code CODE (or STS_ENROLLMENT_CODE)' : undefined,
  ].filter((entry): entry is string => entry !== undefined);
  if (server === undefined || key === undefined || code === undefined) {
    throw new UsageError(`enroll needs ${missing.join(', ')}`, ENROLL_USAGE);
  }

  let parsed: ReturnType<typeof parseServerUrl>;
  try {
    parsed = parseServerUrl(server);
  } catch (error) {
    if (error instanceof ServerUrlError) throw new UsageError(error.message, ENROLL_USAGE);
    throw error;
  }
  const allowInsecureHttp = values['allow-insecure-http'] === true;
  if (parsed.insecure && !allowInsecureHttp) {
    throw new UsageError(
      `--server ${parsed.url.origin} is plain http to another machine: the enrollment key and the device ` +
        'token would cross the network unencrypted, readable and replayable by anyone on the way. ' +
        'Use https://, or pass --allow-insecure-http to accept that (remembered for later reports)',
      ENROLL_USAGE,
    );
  }
  const trimmedKey = key.trim();
  // Header values cannot hold spaces or control characters; catch a bad paste before fetch does.
  if (!/^[\x21-\x7e]{1,512}$/.test(trimmedKey)) {
    throw new UsageError(
      'the enrollment key must be one word of printable characters (check the copy and paste)',
      ENROLL_USAGE,
    );
  }
  const trimmedCode = code.trim();
  if (!/^[\x21-\x7e]{1,64}$/.test(trimmedCode)) {
    throw new UsageError(
      'the enrollment code must be one word such as 7KQD-M3XP (check the copy and paste)',
      ENROLL_USAGE,
    );
  }

  const hostname = stringOption(values, 'hostname')?.trim();
  if (hostname !== undefined && !isReasonableName(hostname)) {
    throw new UsageError('--hostname must be 1 to 255 characters without control characters', ENROLL_USAGE);
  }
  const machineId = (stringOption(values, 'machine-id') ?? fromEnv(env, 'STS_MACHINE_ID'))?.trim();
  if (machineId !== undefined && !/^[\x21-\x7e]{1,128}$/.test(machineId)) {
    throw new UsageError(
      '--machine-id must be 1 to 128 printable ASCII characters without spaces',
      ENROLL_USAGE,
    );
  }

  const timeoutText = stringOption(values, 'timeout');
  let timeoutMs = DEFAULT_TIMEOUT_MS;
  if (timeoutText !== undefined) {
    const seconds = Number(timeoutText);
    if (timeoutText.trim() === '' || !Number.isFinite(seconds) || seconds <= 0 || seconds > 3600) {
      throw new UsageError('--timeout must be a number of seconds between 0 and 3600', ENROLL_USAGE);
    }
    timeoutMs = Math.max(1, Math.round(seconds * 1000));
  }

  return {
    server: parsed.url,
    insecure: parsed.insecure,
    allowInsecureHttp,
    key: trimmedKey,
    code: trimmedCode,
    configPath: resolveConfigPath(values, env, machine),
    hostname,
    machineId,
    timeoutMs,
    force: values['force'] === true,
  };
}

async function status(
  args: readonly string[],
  env: Record<string, string | undefined>,
  io: CliIo,
  machine: AgentDeps,
): Promise<number> {
  const values = parseCommand(args, STATUS_USAGE, {
    help: { type: 'boolean', short: 'h' },
    config: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (values['help']) {
    io.out(STATUS_USAGE);
    return EXIT.OK;
  }
  const configPath = resolveConfigPath(values, env, machine);
  const stored = await readEnrollment(configPath, io);
  if (typeof stored === 'number') {
    if (stored === EXIT.NOT_ENROLLED && values['json']) {
      io.out(JSON.stringify({ enrolled: false, config_path: configPath }));
    }
    return stored;
  }
  for (const warning of stored.warnings) io.err(`agent: warning: ${warning}`);
  const { config } = stored;
  if (values['json']) {
    io.out(
      JSON.stringify({
        enrolled: true,
        server: config.server,
        device_id: config.device_id,
        org_id: config.org_id,
        hostname: config.hostname,
        machine_id: config.machine_id,
        enrolled_at: config.enrolled_at,
        config_path: configPath,
      }),
    );
    return EXIT.OK;
  }
  io.out(`Enrolled with ${config.server}`);
  io.out(`  device id:     ${config.device_id}`);
  io.out(`  organization:  ${config.org_id}`);
  io.out(`  hostname:      ${config.hostname}`);
  io.out(`  machine id:    ${config.machine_id}`);
  io.out(`  enrolled at:   ${config.enrolled_at}`);
  io.out(`  config:        ${configPath}`);
  return EXIT.OK;
}

const REPORT_OPTIONS: OptionSpec = {
  help: { type: 'boolean', short: 'h' },
  config: { type: 'string' },
  'batch-size': { type: 'string' },
  spool: { type: 'string' },
  'spool-max-mb': { type: 'string' },
  'max-retry': { type: 'string' },
  timeout: { type: 'string' },
};

async function report(
  args: readonly string[],
  env: Record<string, string | undefined>,
  io: CliIo,
  machine: AgentDeps,
  mode: 'report' | 'simulate',
): Promise<number> {
  const usage = mode === 'report' ? REPORT_USAGE : SIMULATE_USAGE;
  const values = parseCommand(
    args,
    usage,
    mode === 'report'
      ? { ...REPORT_OPTIONS, input: { type: 'string' } }
      : {
          ...REPORT_OPTIONS,
          events: { type: 'string' },
          hours: { type: 'string' },
          seed: { type: 'string' },
        },
  );
  if (values['help']) {
    io.out(usage);
    return EXIT.OK;
  }
  const number = (name: string, fallback: number, min: number, max: number): number => {
    const raw = stringOption(values, name);
    if (raw === undefined) return fallback;
    const parsed = Number(raw);
    if (!Number.isFinite(parsed) || parsed < min || parsed > max) {
      throw new UsageError(`--${name} must be a number from ${min} to ${max}`, usage);
    }
    return parsed;
  };
  const batchSize = Math.floor(number('batch-size', 1000, 1, 5000));
  const spoolMaxMb = number('spool-max-mb', 64, 1, 100_000);
  const maxRetrySeconds = number('max-retry', 60, 0, 7 * 86_400);
  const timeoutMs = number('timeout', DEFAULT_TIMEOUT_MS / 1000, 1, 600) * 1000;

  const configPath = resolveConfigPath(values, env, machine);
  const stored = await readEnrollment(configPath, io);
  if (typeof stored === 'number') return stored;
  let server: URL;
  try {
    server = parseServerUrl(stored.config.server).url;
  } catch (error) {
    if (!(error instanceof ServerUrlError)) throw error;
    io.err(`agent: the server in ${configPath} is not usable (${error.message}); enroll again.`);
    return EXIT.LOCAL;
  }
  const spoolDirectory = stringOption(values, 'spool') ?? path.join(path.dirname(configPath), 'spool');
  const spool = new TelemetrySpool(path.resolve(machine.cwd, spoolDirectory), spoolMaxMb * 1024 * 1024);

  let input: ReportRun['input'];
  if (mode === 'report') {
    const file = stringOption(values, 'input');
    if (file !== undefined)
      input = readJsonLines(openInput(path.resolve(machine.cwd, file), machine.stdin), machine.now);
  } else {
    const count = Math.floor(number('events', 500, 1, 10_000_000));
    const hours = number('hours', 24, 1, 720);
    const to = machine.now();
    // Nothing before the enrollment: the service drops events a device observed before it existed.
    const enrolledAt = Date.parse(stored.config.enrolled_at);
    const from = new Date(
      Math.min(
        to.getTime(),
        Math.max(to.getTime() - hours * 3_600_000, Number.isNaN(enrolledAt) ? 0 : enrolledAt),
      ),
    );
    const random = seededRandom(Math.floor(number('seed', Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32)));
    const events = simulatedEvents(count, from, to, random);
    input = (async function* () {
      yield* events;
    })();
  }

  const result = await runReport({
    server,
    allowInsecureHttp: stored.config.allow_insecure_http === true,
    deviceToken: stored.config.device_token,
    spool,
    ...(input ? { input } : {}),
    batchSize,
    maxBatchBytes: DEFAULT_MAX_BATCH_BYTES,
    maxRetrySeconds,
    timeoutMs,
    io,
    fetch: machine.fetch,
    now: machine.now,
    sleep: machine.sleep,
  });
  switch (result.kind) {
    case 'done':
      io.out(
        `done: ${result.events} events in ${result.sent} batches sent${result.rejected ? `; ${result.rejected} batches refused by the server` : ''}`,
      );
      return result.rejected > 0 ? EXIT.REQUEST_REJECTED : EXIT.OK;
    case 'refused':
      io.err(`agent: the server refuses this device's telemetry (HTTP ${result.status}: ${result.message})`);
      return EXIT.DEVICE_REFUSED;
    case 'unreachable':
      io.err(`agent: ${result.message}; ${result.kept} batches kept in the spool for the next run`);
      return EXIT.NETWORK;
    case 'insecure':
      io.err(
        `agent: refusing to send this device's token to ${server.origin} (the server in ${configPath}): ` +
          'it is plain http to another machine, so anyone on the network could read the token. ' +
          'Nothing was queued or sent.\n' +
          'Enroll again with an https:// --server and --force; or, to accept the risk, enroll again with ' +
          `--allow-insecure-http, or add "allow_insecure_http": true to ${configPath}.`,
      );
      return EXIT.LOCAL;
  }
}

/** The enrollment in the config file, or the exit code (and message) when there is none or it is unreadable. */
async function readEnrollment(configPath: string, io: CliIo): Promise<StoredConfig | number> {
  let stored: StoredConfig | undefined;
  try {
    stored = await readAgentConfig(configPath);
  } catch (error) {
    if (!(error instanceof AgentConfigError)) throw error;
    io.err(`agent: ${error.message}`);
    return EXIT.LOCAL;
  }
  if (!stored) {
    io.err(`agent: not enrolled (no config file at ${configPath}). See "agent enroll --help".`);
    return EXIT.NOT_ENROLLED;
  }
  return stored;
}

type OptionSpec = Record<string, { type: 'string' | 'boolean'; short?: string }>;

function parseCommand(
  args: readonly string[],
  usage: string,
  options: OptionSpec,
): Record<string, string | boolean | undefined> {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options, strict: true, allowPositionals: true });
  } catch (error) {
    // Unknown or malformed options (ERR_PARSE_ARGS_*), checked by shape: jest runs code in another realm.
    const message = (error as { message?: unknown } | null)?.message;
    const text =
      typeof message === 'string'
        ? message.replace(/\. To specify a positional argument[\s\S]*$/, '')
        : String(error);
    throw new UsageError(text, usage);
  }
  if (parsed.positionals.length > 0) {
    throw new UsageError(`unexpected argument "${parsed.positionals[0]}"`, usage);
  }
  return parsed.values;
}

function resolveConfigPath(
  values: Record<string, string | boolean | undefined>,
  env: Record<string, string | undefined>,
  machine: AgentDeps,
): string {
  const given = stringOption(values, 'config') ?? fromEnv(env, 'STS_AGENT_CONFIG');
  if (given !== undefined) {
    if (given.trim() === '') throw new UsageError('--config must be a file path', USAGE);
    return path.resolve(machine.cwd, given);
  }
  return defaultConfigPath(env, {
    platform: machine.platform,
    isRoot: machine.isRoot,
    homedir: machine.homedir,
  });
}

function stringOption(
  values: Record<string, string | boolean | undefined>,
  name: string,
): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

/** What the server accepts as a hostname: 1 to 255 characters, no control characters, well-formed Unicode. */
function isReasonableName(name: string): boolean {
  return name.length > 0 && name.length <= 255 && !/\p{Cc}/u.test(name) && !LONE_SURROGATE.test(name);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
