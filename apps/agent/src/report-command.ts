import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { assertTransportAllowed, InsecureServerError } from './enroll-client';
import { sendBatch } from './telemetry-client';
import type { ReportedEvent, SpooledBatch, TelemetrySpool } from './telemetry-spool';

export interface ReportIo {
  out(line: string): void;
  err(line: string): void;
}

export interface ReportRun {
  server: URL;
  /** Plain http to another machine was opted in to at enrollment (`allow_insecure_http` in the config). */
  allowInsecureHttp: boolean;
  deviceToken: string;
  spool: TelemetrySpool;
  /** Events to queue before sending (none: only send what the spool holds). */
  input?: AsyncIterable<ReportedEvent | { invalid: string }>;
  batchSize: number;
  /**
   * Largest body the agent sends: a batch beyond it is split in two (new batch ids) before sending, as is
   * one the server answers 413, until it fits (`DEFAULT_MAX_BATCH_BYTES`).
   */
  maxBatchBytes: number;
  /** Give up retrying (the spool keeps the rest) after this long. */
  maxRetrySeconds: number;
  timeoutMs: number;
  io: ReportIo;
  fetch: typeof fetch;
  now: () => Date;
  sleep: (ms: number) => Promise<void>;
}

export type ReportResult =
  | { kind: 'done'; sent: number; events: number; rejected: number }
  | { kind: 'refused'; status: number; message: string }
  | { kind: 'unreachable'; message: string; kept: number }
  /** The server is plain http to another machine and no one opted in: nothing was queued or sent. */
  | { kind: 'insecure'; message: string };

const VERDICTS = new Set(['allowed', 'blocked', 'warned']);

/**
 * What the agent sends in one request at most: half of NATS's default max_payload (1 MiB), under which
 * every gateway takes a batch whatever its TELEMETRY_BODY_LIMIT_BYTES (docs/decisions.md, "Telemetry").
 * A server that takes less answers 413, and the batch is split further.
 */
export const DEFAULT_MAX_BATCH_BYTES = 512 * 1024;

function bodyBytes(batch: SpooledBatch): number {
  return Buffer.byteLength(JSON.stringify({ batch_id: batch.batch_id, events: batch.events }));
}

/**
 * One JSON object per line: `{"url": "...", "verdict": "allowed|blocked|warned",
 * "classification_ms": 12.5, "observed_at": "2026-11-25T10:00:00Z"}` (the last two optional: 0 and now).
 */
export async function* readJsonLines(
  stream: Readable,
  now: () => Date,
): AsyncGenerator<ReportedEvent | { invalid: string }> {
  let lineNumber = 0;
  for await (const line of createInterface({ input: stream, crlfDelay: Infinity })) {
    lineNumber++;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      yield { invalid: `line ${lineNumber}: not JSON` };
      continue;
    }
    const event = value as Partial<Record<keyof ReportedEvent, unknown>>;
    const observedAt = event.observed_at === undefined ? now().toISOString() : event.observed_at;
    const ms = event.classification_ms === undefined ? 0 : event.classification_ms;
    if (
      typeof event.url !== 'string' ||
      event.url === '' ||
      typeof event.verdict !== 'string' ||
      !VERDICTS.has(event.verdict) ||
      typeof ms !== 'number' ||
      !(ms >= 0) ||
      typeof observedAt !== 'string' ||
      Number.isNaN(Date.parse(observedAt))
    ) {
      yield {
        invalid: `line ${lineNumber}: needs url, verdict (allowed, blocked, warned), and valid optional fields`,
      };
      continue;
    }
    yield {
      url: event.url,
      verdict: event.verdict as ReportedEvent['verdict'],
      classification_ms: ms,
      observed_at: new Date(observedAt).toISOString(),
    };
  }
}

export function openInput(file: string, stdin: Readable): Readable {
  return file === '-' ? stdin : createReadStream(file, { encoding: 'utf8' });
}

/** Queues the input in the spool, then sends the spool oldest first, retrying as the server asks. */
export async function runReport(run: ReportRun): Promise<ReportResult> {
  const { io, spool } = run;
  try {
    assertTransportAllowed(run.server, run.allowInsecureHttp);
  } catch (error) {
    if (error instanceof InsecureServerError) return { kind: 'insecure', message: error.message };
    throw error;
  }
  if (run.input) {
    let chunk: ReportedEvent[] = [];
    let queued = 0;
    let invalid = 0;
    let dropped = 0;
    const flushChunk = async () => {
      if (chunk.length === 0) return;
      dropped += (await spool.add(chunk, run.now())).droppedEvents;
      queued += chunk.length;
      chunk = [];
    };
    for await (const item of run.input) {
      if ('invalid' in item) {
        if (invalid < 5) io.err(`agent: skipped ${item.invalid}`);
        invalid++;
        continue;
      }
      chunk.push(item);
      if (chunk.length >= run.batchSize) await flushChunk();
    }
    await flushChunk();
    io.out(`queued ${queued} events${invalid ? `, skipped ${invalid} invalid lines` : ''}`);
    if (dropped > 0) io.err(`agent: warning: the spool was full; dropped the ${dropped} oldest events`);
  }

  let total = await spool.count();
  let sent = 0;
  let events = 0;
  let rejected = 0;
  let retryingSince: number | undefined;
  let attempt = 0;
  /** Batches a 5xx answered in the first pass: tried again after the others, so none holds the rest up. */
  const deferred: SpooledBatch[] = [];

  const setAside = async (batch: SpooledBatch, message: string) => {
    await spool.reject(batch.file);
    rejected++;
    io.err(
      `agent: the server refused batch ${batch.batch_id} (${message}); set aside in ${spool.directory}/rejected`,
    );
  };

  /** Sends a batch (split as needed); a result when the run must end, undefined to go on. */
  const deliver = async (first: SpooledBatch, mayDefer: boolean): Promise<ReportResult | undefined> => {
    const queue = [first];
    for (let batch = queue.shift(); batch; batch = queue.shift()) {
      if (batch.events.length > 1 && bodyBytes(batch) > run.maxBatchBytes) {
        queue.unshift(...(await spool.split(batch)));
        total++;
        continue;
      }
      for (;;) {
        const outcome = await sendBatch({
          server: run.server,
          allowInsecureHttp: run.allowInsecureHttp,
          deviceToken: run.deviceToken,
          batch: { batch_id: batch.batch_id, events: batch.events },
          fetch: run.fetch,
          timeoutMs: run.timeoutMs,
          now: run.now(),
        });
        if (outcome.kind === 'accepted') {
          await spool.remove(batch.file);
          sent++;
          events += batch.events.length;
          retryingSince = undefined;
          attempt = 0;
          if (sent % 10 === 0 || sent + rejected === total)
            io.out(`sent ${sent}/${total} batches (${events} events)`);
          break;
        }
        if (outcome.kind === 'too_large' && batch.events.length > 1) {
          const halves = await spool.split(batch);
          io.err(
            `agent: batch ${batch.batch_id} is too large for the server (${outcome.message}); sending it as ${halves[0].batch_id} and ${halves[1].batch_id}`,
          );
          queue.unshift(...halves);
          total++;
          break;
        }
        if (outcome.kind === 'too_large' || outcome.kind === 'rejected') {
          await setAside(batch, outcome.message);
          break;
        }
        if (outcome.kind === 'refused') return outcome;
        const nowMs = run.now().getTime();
        retryingSince ??= nowMs;
        const waitSeconds = outcome.retryAfterSeconds ?? Math.min(2 ** attempt, 60);
        attempt++;
        if ((nowMs - retryingSince) / 1000 + waitSeconds > run.maxRetrySeconds) {
          return { kind: 'unreachable', message: outcome.message, kept: await spool.count() };
        }
        io.err(`agent: ${outcome.message}; retrying in ${waitSeconds} s`);
        await run.sleep(waitSeconds * 1000);
        // A server error may be this batch's own doing: the others go first, then it is tried again.
        if (mayDefer && outcome.status !== undefined && outcome.status >= 500) {
          deferred.push(batch);
          break;
        }
      }
    }
    return undefined;
  };

  for await (const batch of spool.batches()) {
    const ended = await deliver(batch, true);
    if (ended) return ended;
  }
  for (const batch of deferred) {
    const ended = await deliver(batch, false);
    if (ended) return ended;
  }
  return { kind: 'done', sent, events, rejected };
}
