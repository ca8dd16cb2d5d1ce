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

/** The server's longest batch id (POST /api/device/telemetry). */
const MAX_BATCH_ID_LENGTH = 128;
/** `<15-digit time>-<6-digit sequence>-<batch id>.json`: the time and sequence order the spool. */
const SPOOL_FILE = /^(\d{15}-\d{6})-(.+)\.json$/;

/**
 * The id of half `index` of a batch: the parent's with `.0` or `.1`, so that splitting the same batch
 * again (after a crash between writing the halves and removing it) gives the same ids, which the server
 * takes once. A fresh id when that would be too long for the server.
 */
export function halfBatchId(parent: string, index: 0 | 1): string {
  const id = `${parent}.${index}`;
  return id.length <= MAX_BATCH_ID_LENGTH && /^[A-Za-z0-9._-]+$/.test(id) ? id : randomUUID();
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

  /**
   * Replaces a batch by its two halves (new batch ids, `halfBatchId`), in its place in the order: the
   * halves are written (atomically) before the batch is removed, so a crash in between loses nothing.
   */
  async split(batch: SpooledBatch): Promise<[SpooledBatch, SpooledBatch]> {
    if (batch.events.length < 2) throw new Error('a batch of one event cannot be split');
    const prefix = SPOOL_FILE.exec(path.basename(batch.file))?.[1];
    if (!prefix) throw new Error(`not a spooled batch: ${batch.file}`);
    const middle = Math.ceil(batch.events.length / 2);
    const halves = [batch.events.slice(0, middle), batch.events.slice(middle)] as const;
    const written = await Promise.all(
      halves.map(async (events, index) => {
        const batchId = halfBatchId(batch.batch_id, index as 0 | 1);
        const body = JSON.stringify({ batch_id: batchId, events });
        const file = path.join(this.directory, `${prefix}-${batchId}.json`);
        const temporary = path.join(this.directory, `.${path.basename(file)}.tmp`);
        await writeFile(temporary, body, { mode: 0o600 });
        await rename(temporary, file);
        return { file, batch_id: batchId, events, size: Buffer.byteLength(body) };
      }),
    );
    if (this.index) {
      // In the batch's place, so that the spool's bound still drops the oldest first.
      const files = new Set(written.map((half) => half.file));
      const rest = this.index.filter((entry) => !files.has(entry.file));
      const at = rest.findIndex((entry) => entry.file === batch.file);
      rest.splice(at < 0 ? rest.length : at, 0, ...written.map(({ file, size }) => ({ file, size })));
      this.index = rest;
    }
    await this.remove(batch.file);
    const [first, second] = written.map(({ file, batch_id, events }) => ({ file, batch_id, events }));
    return [first!, second!];
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

  /** Moves a batch the server refused (400; 413 for one event) aside: never sent again, kept for inspection. */
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
      return (await readdir(this.directory)).filter((name) => SPOOL_FILE.test(name)).sort();
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
