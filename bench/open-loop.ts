/**
 * The open-loop load generator, run as a child process by bench-harness.ts's runOpenLoad: for each
 * OpenLoadOptions the parent sends over IPC, the child answers one OpenLoopReply; it exits when the
 * channel closes. In a process of its own so that only its own small heap's collections, reported
 * with each result, delay requests.
 */
import { Agent, request as httpRequest } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type autocannon from 'autocannon';
import { type GcPause, wallClockMs, watchGcPauses } from './gc-pauses';

export interface OpenLoadOptions {
  name: string;
  url: string;
  requests: autocannon.Request[];
  /** Requests per second, sent at fixed intervals whether or not earlier ones have been answered. */
  ratePerSecond: number;
  durationS: number;
  /** Keep-alive connections at most; a request finding them all busy waits (and that wait counts). */
  maxConnections: number;
}

export interface OpenLoadResult {
  /** Requests answered (all 2xx: any other answer fails the run). */
  completed: number;
  /** Start to last answer, s. */
  durationS: number;
  /** Response times in ms from each request's due time, sorted. */
  latenciesMs: Float64Array;
  activeSeconds: number;
  /** performance.now() of the last response, in the generator's own clock. */
  lastResponseAt: number;
  /** How many requests took 50 ms or more, by second of the run in which they were due. */
  slowBySecond: number[];
  /** The generator's own longest event-loop stall, ms (its lateness counts as latency). */
  generatorStallMs: number;
  /** [due, answered] on the wall clock (ms) of each request that took 50 ms or more. */
  slowRequests: [number, number][];
  /** The generator's own collector pauses during the run. */
  generatorGcPauses: GcPause[];
}

export type OpenLoopReply = { type: 'result'; result: OpenLoadResult } | { type: 'error'; message: string };

if (process.send && process.channel) {
  process.on('disconnect', () => process.exit(0));
  process.on('message', (options: OpenLoadOptions) => {
    openLoad(options).then(
      (result) => process.send?.({ type: 'result', result } satisfies OpenLoopReply),
      (error: unknown) =>
        process.send?.({
          type: 'error',
          message: error instanceof Error ? error.message : String(error),
        } satisfies OpenLoopReply),
    );
  });
}

/**
 * Request i is due at start + i / rate, and its latency runs from that moment, so a slow answer
 * cannot hold back the requests behind it (autocannon's `overallRate` sends each second's quota in a
 * burst at the start of the second, which measures a closed loop again). Any non-2xx answer or error
 * fails the run.
 */
async function openLoad(options: OpenLoadOptions): Promise<OpenLoadResult> {
  const target = new URL(options.url);
  const agent = new Agent({ keepAlive: true, maxSockets: options.maxConnections });
  const total = Math.round(options.ratePerSecond * options.durationS);
  const latencies = new Float64Array(total);
  const failures: string[] = [];
  const slowBySecond: number[] = Array.from({ length: Math.ceil(options.durationS) }, () => 0);
  const slowRequests: [number, number][] = [];
  const wallClockOffset = wallClockMs() - performance.now();
  let completed = 0;
  let sent = 0;
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const gcPauses = watchGcPauses();
  const startedAt = performance.now();
  let lastResponseAt = startedAt;
  const intervalMs = 1_000 / options.ratePerSecond;
  await new Promise<void>((resolveRun) => {
    const send = (index: number) => {
      const dueAt = startedAt + index * intervalMs;
      const spec = options.requests[index % options.requests.length] ?? {};
      const finish = (failure?: string) => {
        if (failure && failures.length < 10) failures.push(failure);
        lastResponseAt = performance.now();
        latencies[completed++] = lastResponseAt - dueAt;
        if (lastResponseAt - dueAt >= 50) {
          const second = Math.floor((dueAt - startedAt) / 1000);
          slowBySecond[second] = (slowBySecond[second] ?? 0) + 1;
          slowRequests.push([wallClockOffset + dueAt, wallClockOffset + lastResponseAt]);
        }
        if (completed === total) resolveRun();
      };
      const outgoing = httpRequest(
        {
          agent,
          host: target.hostname,
          port: target.port,
          method: spec.method ?? 'GET',
          path: spec.path ?? '/',
          headers: spec.headers,
          timeout: 10_000,
        },
        (response) => {
          response.resume();
          response.once('end', () =>
            finish(
              response.statusCode && response.statusCode < 300 ? undefined : `status ${response.statusCode}`,
            ),
          );
        },
      );
      outgoing.once('error', (error) => finish(error.message));
      outgoing.once('timeout', () => outgoing.destroy(new Error('timeout')));
      outgoing.end(spec.body);
    };
    const tick = () => {
      const due = Math.min(total, Math.floor((performance.now() - startedAt) / intervalMs) + 1);
      while (sent < due) send(sent++);
      if (sent < total) setTimeout(tick, Math.max(0, startedAt + sent * intervalMs - performance.now()));
    };
    tick();
  });
  agent.destroy();
  loopDelay.disable();
  if (failures.length > 0) {
    await gcPauses.stop();
    throw new Error(`${options.name}: ${failures.length}+ failed requests: ${failures.join(', ')}`);
  }
  const seconds = (lastResponseAt - startedAt) / 1000;
  return {
    completed,
    durationS: seconds,
    latenciesMs: latencies.slice(0, completed).sort(),
    activeSeconds: seconds,
    lastResponseAt,
    slowBySecond,
    generatorStallMs: loopDelay.max / 1e6,
    slowRequests,
    generatorGcPauses: await gcPauses.stop(),
  };
}
