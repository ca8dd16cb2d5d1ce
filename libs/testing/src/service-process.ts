import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** Whether something accepts connections on 127.0.0.1:port. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolveProbe) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolveProbe(true);
    });
    socket.once('error', () => resolveProbe(false));
  });
}

/**
 * A service run as its own process, as in production (`node dist/apps/<app>/main.js`): its last output
 * lines are kept for the failure message of whoever waits on it, and `stop()` sends SIGTERM and waits.
 */
export class ServiceProcess {
  private readonly child: ChildProcess;
  private readonly output: string[] = [];
  private exitStatus: string | undefined;
  private readonly exited: Promise<void>;

  constructor(
    readonly name: string,
    args: string[],
    env: Record<string, string>,
    cwd: string,
  ) {
    this.child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => {
      this.output.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      if (this.output.length > 100) this.output.splice(0, this.output.length - 100);
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.exited = new Promise((resolveExit) =>
      this.child.once('exit', (code, signal) => {
        this.exitStatus = signal ? `signal ${signal}` : `code ${code}`;
        resolveExit();
      }),
    );
  }

  /** How it ended (`code 0`, `signal SIGKILL`), or undefined while it runs. */
  get status(): string | undefined {
    return this.exitStatus;
  }

  tail(lines = 30): string {
    return this.output.slice(-lines).join('\n') || '(no output)';
  }

  /** Polls `probe` until it holds; fails at once if the process exits, with its last output. */
  async waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.exitStatus !== undefined) {
        throw new Error(`${this.name} exited (${this.exitStatus}) before ${what}:\n${this.tail()}`);
      }
      if (await probe().catch(() => false)) return;
      if (Date.now() > deadline)
        throw new Error(`${this.name}: no ${what} in ${timeoutMs} ms:\n${this.tail()}`);
      await sleep(100);
    }
  }

  /** How it ends (`code 0`…), for a one-off process such as a migration job; its output on timeout. */
  async finished(timeoutMs = 60_000): Promise<string> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.name} still runs after ${timeoutMs} ms:\n${this.tail()}`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
    return this.exitStatus!;
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.exitStatus !== undefined) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}
