import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHmac } from 'node:crypto';
import {
  appSpecificMachineId,
  MachineIdError,
  parseIoregPlatformUuid,
  parseMachineIdFile,
  parseRegMachineGuid,
  readMachineId,
} from './machine-identity';

const IOREG = `+-o J314sAP  <class IOPlatformExpertDevice, id 0x100000235, registered, matched, active, busy 0 (30 ms), retain 29>
    {
      "IOPlatformSerialNumber" = "C02XXXXXXXX"
      "IOPlatformUUID" = "5B4E1A8C-3D2F-4B6A-9E1D-7C8F0A2B3C4D"
      "model" = <"MacBookPro18,1">
    }
`;

const REG = `
HKEY_LOCAL_MACHINE\\SOFTWARE\\Microsoft\\Cryptography
    MachineGuid    REG_SZ    0c1d3e5f-7a9b-4c2d-8e6f-1a3b5c7d9e0f

`;

describe('the reported machine id', () => {
  it('is an HMAC-SHA256 of the raw id keyed with the application id, in hex: stable, not the raw id', () => {
    const raw = '3d1219c7c4c5404aaa1f6d2a48adfda4';
    const reported = appSpecificMachineId(raw);
    expect(reported).toBe(createHmac('sha256', 'sts-agent/machine-id/v1').update(raw).digest('hex'));
    expect(reported).toMatch(/^[0-9a-f]{64}$/);
    expect(reported).not.toContain(raw);
    // Case and surrounding whitespace of the source do not matter; another machine differs.
    expect(appSpecificMachineId(' 3D1219C7C4C5404AAA1F6D2A48ADFDA4\n')).toBe(reported);
    expect(appSpecificMachineId('3d1219c7c4c5404aaa1f6d2a48adfda5')).not.toBe(reported);
  });
});

describe('machine id parsing', () => {
  it('accepts systemd machine ids only', () => {
    expect(parseMachineIdFile('3D1219C7C4C5404AAA1F6D2A48ADFDA4\n')).toBe('3d1219c7c4c5404aaa1f6d2a48adfda4');
    expect(parseMachineIdFile('uninitialized\n')).toBeUndefined();
    expect(parseMachineIdFile('')).toBeUndefined();
    expect(parseMachineIdFile('3d1219c7')).toBeUndefined();
  });

  it('reads IOPlatformUUID from ioreg and MachineGuid from reg query', () => {
    expect(parseIoregPlatformUuid(IOREG)).toBe('5B4E1A8C-3D2F-4B6A-9E1D-7C8F0A2B3C4D');
    expect(parseIoregPlatformUuid('"IOPlatformUUID" = "nope"')).toBeUndefined();
    expect(parseRegMachineGuid(REG)).toBe('0c1d3e5f-7a9b-4c2d-8e6f-1a3b5c7d9e0f');
    expect(
      parseRegMachineGuid('ERROR: The system was unable to find the specified registry key or value.'),
    ).toBeUndefined();
  });
});

describe('readMachineId', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-machine-id-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the first usable file, falling back to the D-Bus one', async () => {
    const etc = join(dir, 'etc-machine-id');
    const dbus = join(dir, 'dbus-machine-id');
    await writeFile(dbus, 'aaaabbbbccccddddeeeeffff00001111\n');
    await expect(readMachineId({ platform: 'linux', linuxMachineIdPaths: [etc, dbus] })).resolves.toBe(
      'aaaabbbbccccddddeeeeffff00001111',
    );
    await writeFile(etc, '3d1219c7c4c5404aaa1f6d2a48adfda4\n');
    await expect(readMachineId({ platform: 'linux', linuxMachineIdPaths: [etc, dbus] })).resolves.toBe(
      '3d1219c7c4c5404aaa1f6d2a48adfda4',
    );
  });

  it('explains what it tried and suggests --machine-id when nothing works', async () => {
    const empty = join(dir, 'empty');
    await writeFile(empty, 'uninitialized\n');
    const missing = join(dir, 'missing');
    const error = await readMachineId({ platform: 'linux', linuxMachineIdPaths: [empty, missing] }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MachineIdError);
    expect((error as Error).message).toContain(`${empty}: not a machine id`);
    expect((error as Error).message).toContain(`${missing}: not found`);
    expect((error as Error).message).toContain('--machine-id');
  });

  it('runs ioreg on macOS and reg.exe on Windows, without a shell', async () => {
    const calls: { file: string; args: readonly string[] }[] = [];
    const runProgram = async (file: string, args: readonly string[]) => {
      calls.push({ file, args });
      return file.endsWith('ioreg') ? IOREG : REG;
    };
    await expect(readMachineId({ platform: 'darwin', runProgram })).resolves.toBe(
      '5B4E1A8C-3D2F-4B6A-9E1D-7C8F0A2B3C4D',
    );
    await expect(
      readMachineId({ platform: 'win32', runProgram, windowsRoot: 'C:\\Windows\\' }),
    ).resolves.toBe('0c1d3e5f-7a9b-4c2d-8e6f-1a3b5c7d9e0f');
    expect(calls).toEqual([
      { file: '/usr/sbin/ioreg', args: ['-rd1', '-c', 'IOPlatformExpertDevice'] },
      {
        file: 'C:\\Windows\\System32\\reg.exe',
        args: ['query', 'HKLM\\SOFTWARE\\Microsoft\\Cryptography', '/v', 'MachineGuid'],
      },
    ]);
  });

  it('turns a failing program into MachineIdError', async () => {
    const runProgram = () =>
      Promise.reject(Object.assign(new Error('spawn /usr/sbin/ioreg ENOENT'), { code: 'ENOENT' }));
    await expect(readMachineId({ platform: 'darwin', runProgram })).rejects.toThrow(
      /ioreg: not found[\s\S]*--machine-id/,
    );
  });
});
