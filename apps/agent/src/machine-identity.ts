import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { isUuid } from '@sts/vocabulary/identifiers';
import { promisify } from 'node:util';
import { readFile } from 'node:fs/promises';
import os from 'node:os';

/**
 * This machine's stable identifier (the contract's `machine_id`) and the facts the agent reports
 * at enrollment. Every source is injectable so tests need not run on each platform.
 */

export const LINUX_MACHINE_ID_PATHS = ['/etc/machine-id', '/var/lib/dbus/machine-id'] as const;

/** Thrown when no machine id can be read; the message tells the user what to do. */
export class MachineIdError extends Error {
  override readonly name = 'MachineIdError';
}

export interface MachineIdSources {
  platform: NodeJS.Platform;
  /** Linux (and other Unix without a better source): files holding a systemd/D-Bus machine id, in order. */
  linuxMachineIdPaths: readonly string[];
  readTextFile(path: string): Promise<string>;
  /** Runs a program without a shell; resolves with its standard output. */
  runProgram(file: string, args: readonly string[]): Promise<string>;
  /** Windows directory (SystemRoot), where reg.exe lives. */
  windowsRoot: string;
}

const PROGRAM_TIMEOUT_MS = 5_000;
const execFileAsync = promisify(execFile);

export function defaultMachineIdSources(
  env: Record<string, string | undefined> = process.env,
): MachineIdSources {
  return {
    platform: process.platform,
    linuxMachineIdPaths: LINUX_MACHINE_ID_PATHS,
    readTextFile: (path) => readFile(path, 'utf8'),
    runProgram: async (file, args) =>
      (
        await execFileAsync(file, [...args], {
          encoding: 'utf8',
          timeout: PROGRAM_TIMEOUT_MS,
          windowsHide: true,
          maxBuffer: 1024 * 1024,
        })
      ).stdout,
    windowsRoot: env['SystemRoot'] ?? env['SYSTEMROOT'] ?? 'C:\\Windows',
  };
}

const SYSTEMD_MACHINE_ID = /^[0-9a-f]{32}$/i;

/** A systemd/D-Bus machine id file's content: 32 hex digits (not "uninitialized", not empty). */
export function parseMachineIdFile(content: string): string | undefined {
  const id = content.trim();
  return SYSTEMD_MACHINE_ID.test(id) ? id.toLowerCase() : undefined;
}

/** `ioreg -rd1 -c IOPlatformExpertDevice` output → IOPlatformUUID. */
export function parseIoregPlatformUuid(stdout: string): string | undefined {
  const match = /"IOPlatformUUID"\s*=\s*"([^"]+)"/.exec(stdout);
  const id = match?.[1]?.trim();
  return id && isUuid(id) ? id : undefined;
}

/** `reg query HKLM\SOFTWARE\Microsoft\Cryptography /v MachineGuid` output → MachineGuid. */
export function parseRegMachineGuid(stdout: string): string | undefined {
  const match = /^\s*MachineGuid\s+REG_SZ\s+(\S+)\s*$/im.exec(stdout);
  const id = match?.[1]?.trim();
  return id && isUuid(id) ? id : undefined;
}

/**
 * The key of {@link appSpecificMachineId}: fixed for this application, so every agent on one machine
 * reports the same id, and it is the same across reinstalls.
 */
export const MACHINE_ID_APPLICATION_KEY = 'sts-agent/machine-id/v1';

/**
 * What the agent reports as `machine_id`: HMAC-SHA256 of the machine's id (lower-cased) keyed with this
 * application's fixed id, in hex (64 characters). The raw id (/etc/machine-id is world-readable and
 * other software keys on it; systemd asks applications not to expose it) never leaves the machine, and
 * the reported id says nothing about the id other programs see, while staying stable for this machine.
 */
export function appSpecificMachineId(rawMachineId: string): string {
  return createHmac('sha256', MACHINE_ID_APPLICATION_KEY)
    .update(rawMachineId.trim().toLowerCase(), 'utf8')
    .digest('hex');
}

/** Reads this machine's id, or throws MachineIdError naming what was tried and suggesting --machine-id. */
export async function readMachineId(overrides: Partial<MachineIdSources> = {}): Promise<string> {
  const sources = { ...defaultMachineIdSources(), ...overrides };
  const tried: string[] = [];
  switch (sources.platform) {
    case 'darwin': {
      const file = '/usr/sbin/ioreg';
      try {
        const id = parseIoregPlatformUuid(
          await sources.runProgram(file, ['-rd1', '-c', 'IOPlatformExpertDevice']),
        );
        if (id) return id;
        tried.push(`${file}: no IOPlatformUUID in its output`);
      } catch (error) {
        tried.push(`${file}: ${describeError(error)}`);
      }
      break;
    }
    case 'win32': {
      const file = `${sources.windowsRoot.replace(/\\+$/, '')}\\System32\\reg.exe`;
      try {
        const id = parseRegMachineGuid(
          await sources.runProgram(file, [
            'query',
            'HKLM\\SOFTWARE\\Microsoft\\Cryptography',
            '/v',
            'MachineGuid',
          ]),
        );
        if (id) return id;
        tried.push(`registry MachineGuid: no GUID in the output of reg query`);
      } catch (error) {
        tried.push(`registry MachineGuid: ${describeError(error)}`);
      }
      break;
    }
    default: {
      for (const path of sources.linuxMachineIdPaths) {
        try {
          const id = parseMachineIdFile(await sources.readTextFile(path));
          if (id) return id;
          tried.push(`${path}: not a machine id (expected 32 hexadecimal digits)`);
        } catch (error) {
          tried.push(`${path}: ${describeError(error)}`);
        }
      }
    }
  }
  throw new MachineIdError(
    `Could not read this machine's id (${tried.join('; ')}).\n` +
      'Pass --machine-id ID with a stable identifier that is unique to this machine.',
  );
}

function describeError(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'ENOENT') return 'not found';
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? (message.split('\n')[0] ?? message) : String(error);
}

export interface HostFacts {
  hostname: string;
  os: string;
  osRelease: string;
  osType: string;
  arch: string;
}

export function readHostFacts(): HostFacts {
  return {
    hostname: os.hostname(),
    os: os.platform(),
    osRelease: os.release(),
    osType: os.type(),
    arch: os.arch(),
  };
}
