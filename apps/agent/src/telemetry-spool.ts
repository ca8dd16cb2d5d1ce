import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** One analyzed address, as the agent sends it (POST /api/device/telemetry). */
export interface ReportedEvent {
  observed_at: string;
  url: string;
  verdict: 'allowed' | 'blocked' | 'warned';
  classification_ms: number;
}

export interface SpooledBatch {
  file: string;
  batch_id: string;
  events: ReportedEvent[];
}

/**
 * Batches waiting to be sent, one file each, on disk: they survive the server being unreachable and
 * the agent restarting. Files are named by creation time (and order within a millisecond) so they go
 * out oldest first. Bounded: when a
 * new batch would pass `maxBytes`, the oldest batches are dropped (and counted) to make room, so a
 * device offline for long keeps its most recent activity.
 */
export class TelemetrySpool {
  /** Orders batches written within one millisecond. */
  private sequence = 0;
  /**
   * The spooled files and their sizes, oldest first: read from the directory once, then kept up to
   * date by this instance (an agent run owns its spool), so adding a batch does not rescan it.
   */
  private index: { file: string; size: number }[] | undefined;

  constructor(
    readonly directory: string,
    private readonly maxBytes: number,
  ) {}

  /** Writes a batch (atomically: a temporary file renamed); returns the events dropped to make room. */
  async add(events: ReportedEvent[], now: Date): Promise<{ batchId: string; droppedEvents: number }> {
    if (!this.index) {
      await mkdir(this.directory, { recursive: true, mode: 0o700 });
      this.index = await this.scan();
    }
    const batchId = randomUUID();
    const body = JSON.stringify({ batch_id: batchId, events });
    const droppedEvents = await this.makeRoom(Buffer.byteLength(body));
    const name = `${String(now.getTime()).padStart(15, '0')}-${String(this.sequence++ % 1_000_000).padStart(6, '0')}-${batchId}.json`;
    const temporary = path.join(this.directory, `.${name}.tmp`);
    await writeFile(temporary, body, { mode: 0o600 });
    const file = path.join(this.directory, name);
    await rename(temporary, file);
    this.index.push({ file, size: Buffer.byteLength(body) });
    return { batchId, droppedEvents };
  }

  /** Spooled batches, oldest first. Unreadable files are set aside as rejected. */
  async *batches(): AsyncGenerator<SpooledBatch> {
    for (const name of await this.names()) {
      const file = path.join(this.directory, name);
      let parsed: { batch_id?: unknown; events?: unknown };
      try {
        parsed = JSON.parse(await readFile(file, 'utf8')) as typeof parsed;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        await this.reject(file);
        continue;
      }
      if (typeof parsed.batch_id !== 'string' || !Array.isArray(parsed.events)) {
        await this.reject(file);
        continue;
      }
      yield { file, batch_id: parsed.batch_id, events: parsed.events as ReportedEvent[] };
    }
  }

  async count(): Promise<number> {
    return (await this.names()).length;
  }

  async remove(file: string): Promise<void> {
    await unlink(file).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
    this.forget(file);
  }

  /** Moves a batch the server refused (400, 413) aside: never sent again, kept for inspection. */
  async reject(file: string): Promise<void> {
    const rejected = path.join(this.directory, 'rejected');
    await mkdir(rejected, { recursive: true, mode: 0o700 });
    await rename(file, path.join(rejected, path.basename(file)));
    this.forget(file);
  }

  private forget(file: string): void {
    if (this.index) this.index = this.index.filter((entry) => entry.file !== file);
  }

  private async scan(): Promise<{ file: string; size: number }[]> {
    return Promise.all(
      (await this.names()).map(async (name) => {
        const file = path.join(this.directory, name);
        return { file, size: (await stat(file)).size };
      }),
    );
  }

  private async names(): Promise<string[]> {
    try {
      return (await readdir(this.directory)).filter((name) => /^\d{15}-\d{6}-.+\.json$/.test(name)).sort();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }

  private async makeRoom(incoming: number): Promise<number> {
    const files = [...(this.index ?? [])];
    let total = files.reduce((sum, f) => sum + f.size, 0) + incoming;
    let dropped = 0;
    for (const { file, size } of files) {
      if (total <= this.maxBytes) break;
      try {
        const parsed = JSON.parse(await readFile(file, 'utf8')) as { events?: unknown[] };
        dropped += parsed.events?.length ?? 0;
      } catch {
        // Unreadable: dropped all the same.
      }
      await this.remove(file);
      total -= size;
    }
    return dropped;
  }
}
