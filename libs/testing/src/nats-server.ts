import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from './free-port';

export interface LocalNatsServer {
  port: number;
  /** `nats://user:password@127.0.0.1:port`, or without credentials. */
  url(user?: string, password?: string): string;
  stop(): Promise<void>;
}

/**
 * The nats-server binary: NATS_SERVER_BIN (npm test sets it), else the release the project brings
 * (scripts/infra/ensure-nats-release.sh), brought now if missing.
 */
function natsServerBinary(): string {
  const given = process.env.NATS_SERVER_BIN;
  if (given && existsSync(given)) return given;
  return execFileSync('bash', [resolve(__dirname, '../../../scripts/infra/ensure-nats-release.sh')], {
    encoding: 'utf8',
  }).trim();
}

/**
 * A nats-server of the test's own (JetStream on, store in a temporary directory, on a free port),
 * configured with `extraConfig` (e.g. an authorization block), for tests of server-side rules the
 * shared server on 4222 does not have.
 */
export async function startNatsServer(
  extraConfig: string,
  options: {
    /** Files written beside the configuration first (for its `include`s). */
    files?: Record<string, string>;
    /** The server's environment besides this process's (variables the configuration reads). */
    env?: Record<string, string>;
  } = {},
): Promise<LocalNatsServer> {
  const dir = await mkdtemp(join(tmpdir(), 'sts-nats-'));
  const port = await freePort();
  for (const [name, content] of Object.entries(options.files ?? {}))
    await writeFile(join(dir, name), content);
  const configFile = join(dir, 'nats.conf');
  await writeFile(
    configFile,
    `host: 127.0.0.1\nport: ${port}\njetstream { store_dir: ${JSON.stringify(join(dir, 'store'))} }\n${extraConfig}`,
  );
  const child: ChildProcess = spawn(natsServerBinary(), ['-c', configFile], {
    stdio: 'ignore',
    env: { ...process.env, ...options.env },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    child.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort(port, 10_000, exited);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    port,
    url: (user, password) =>
      user
        ? `nats://${encodeURIComponent(user)}:${encodeURIComponent(password ?? '')}@127.0.0.1:${port}`
        : `nats://127.0.0.1:${port}`,
    stop,
  };
}

async function waitForPort(port: number, timeoutMs: number, exited: Promise<void>): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (gone) throw new Error('nats-server exited at start (check its configuration)');
    const open = await new Promise<boolean>((resolve) => {
      const socket = connectTcp(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms`);
}
