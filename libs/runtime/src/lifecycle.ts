/**
 * Ordered shutdown: resources are closed in reverse order of acquisition (stop accepting work,
 * then stop consumers and relays, then close connections), once, on SIGTERM/SIGINT or on demand.
 */
export class Lifecycle {
  private readonly closers: { name: string; close: () => unknown }[] = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly onError: (name: string, error: unknown) => void = () => undefined) {}

  add(name: string, close: () => unknown): void {
    this.closers.push({ name, close });
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const { name, close } of [...this.closers].reverse()) {
        try {
          await close();
        } catch (error) {
          this.onError(name, error);
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
