import { createLogger, type Logger } from '@sts/logger/create-logger';

/**
 * Ordered shutdown: resources are closed in reverse order of acquisition (stop accepting work,
 * then stop consumers and relays, then close connections), once, on SIGTERM/SIGINT or on demand.
 */
export class Lifecycle {
  private readonly closers: { name: string; close: () => unknown }[] = [];
  private closing: Promise<void> | undefined;

  /**
   * `onSlowStep` hears of a step still running after `slowStepMs`: a shutdown that an orchestrator ends with
   * SIGKILL then says which step held it.
   */
  constructor(
    private readonly onError: (name: string, error: unknown) => void = () => undefined,
    private readonly onSlowStep: (name: string, elapsedMs: number) => void = () => undefined,
    private readonly slowStepMs = 3_000,
  ) {}

  add(name: string, close: () => unknown): void {
    this.closers.push({ name, close });
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const { name, close } of [...this.closers].reverse()) {
        const slow = setTimeout(() => this.onSlowStep(name, this.slowStepMs), this.slowStepMs);
        try {
          await close();
        } catch (error) {
          this.onError(name, error);
        } finally {
          clearTimeout(slow);
        }
      }
    })();
    return this.closing;
  }

  /** Closes on SIGTERM/SIGINT, then exits. A second signal exits at once. */
  closeOnSignals(exit: (code: number) => void = (code) => process.exit(code)): void {
    let signalled = false;
    const handler = () => {
      if (signalled) exit(1);
      signalled = true;
      void this.close().then(() => exit(0));
    };
    process.on('SIGTERM', handler);
    process.on('SIGINT', handler);
  }
}

/** The lifecycle of a process of ours: each failed step logged as an error, a step still running as a warning. */
export function loggedLifecycle(logger: Logger): Lifecycle {
  return new Lifecycle(
    (resource, error) => logger.error({ err: error, resource }, 'shutdown step failed'),
    (resource, elapsedMs) => logger.warn({ resource, elapsedMs }, 'shutdown step still running'),
  );
}

/** What a process's start hands back: its logger, and how to stop what it started. */
export interface StartedProcess {
  logger: Logger;
  stop(): Promise<void>;
  /** The start did all the process had to do (a one-off such as migrations): it exits 0 now. */
  finished?: boolean;
}

/**
 * The one way every process of ours runs (`apps/<name>/src/main.ts`): start it; on SIGTERM/SIGINT stop
 * it, each failed shutdown step logged; if the start fails (bad configuration included), log why, as
 * fatal, and exit 1.
 */
export function runProcess(name: string, start: () => Promise<StartedProcess>): void {
  start().then(
    (started) => {
      const { logger } = started;
      if (started.finished) {
        logger.info({ process: name }, 'done');
        void started.stop().then(() => process.exit(0));
        return;
      }
      const lifecycle = loggedLifecycle(logger);
      lifecycle.add(name, async () => {
        logger.info({ process: name }, 'stopping');
        await started.stop();
      });
      lifecycle.closeOnSignals();
    },
    (error: unknown) => {
      createLogger(name).fatal({ err: error }, `${name} failed to start`);
      process.exit(1);
    },
  );
}
