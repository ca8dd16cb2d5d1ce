/**
 * What metrics and tracing cost the gateway, counted in instructions (`npm run bench:observability-instructions
 * [-- --requests 40000 --warmup 30]`), not a test. Needs the built gateway (`npx nx run @sts/app-gateway:build`) and
 * valgrind.
 *
 * Why besides bench:observability: on this shared 2-core machine req/s moves by ±30 % from one round to the next,
 * more than the few per cent the goal is about. callgrind counts the instructions a process executes, whatever else
 * the machine does: the same build and load give the same count within about 2 %, if the count is long enough to
 * take in the events that come once in some ten thousand requests. A full garbage collection is one: with 3,000 or
 * 12,000 requests a variant's count moved by up to 9 % between runs as one fell into its window or not; 40,000
 * requests (about 5 min a variant) take in one or more in every variant.
 *
 * How: one system (backends, identity provider, OTLP collector stand-in, members seeded through its gateway); then,
 * per variant, the built gateway under `valgrind --tool=callgrind` with counting off, warmed up with load
 * (`--warmup` s, so V8 has optimized the hot code), counted while it answers exactly `--requests` authenticated
 * `GET /api/members` (4 at a time), stopped. Reported per request: all instructions, and those outside V8's
 * optimizing compiler (`compiler::`), whose work depends on when it runs rather than on the request; the ratio
 * against `off` of the same run is the figure. `off` is counted first and last: the two tell the noise.
 *
 * Options (flag or environment variable): --requests N (BENCH_REQUESTS, 40000), --warmup N (BENCH_WARMUP, 30);
 * BENCH_VARIANTS=on 0%,on 10%,on 100%,on 10% batches of 64 picks the traced variants (sampling none, one in ten,
 * all; one in ten in batches of 64 spans instead of the SDK's 512). Exit code 0 when
 * the counting completed, 1 on any error, 130 when interrupted.
 */
import { execFile, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePort } from '@sts/testing/free-port';
import { startOtlpCollector } from '@sts/stand-ins/otlp-collector';
import {
  mean,
  parseOptions,
  profileDirectory,
  relativeToRoot,
  runBenchmark,
  runLoad,
  seedMembers,
  startSystem,
} from './bench-harness';

const run = promisify(execFile);
const ROUTE = '/api/members';
const CONCURRENCY = 4;
const TRACED: Record<string, Record<string, string>> = {
  'on 0%': { OTEL_TRACES_SAMPLER: 'always_off' },
  'on 10%': { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' },
  'on 100%': { OTEL_TRACES_SAMPLER: 'always_on' },
  // Spans leave the heap eight times sooner than with the SDK's 512 (docs/benchmarks.md: no fewer instructions).
  'on 10% batches of 64': {
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.1',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '64',
  },
};
/**
 * Under callgrind the gateway runs some forty times slower, so a batch that leaves on a timer would carry a
 * fortieth of the spans it carries under load. Batches leave when full here, as they do at load.
 */
const BATCH_TIMER = { OTEL_BSP_SCHEDULE_DELAY: '600000' };

interface Count {
  total: number;
  /** Instructions of V8's optimizing compiler (names containing `compiler::`). */
  compiler: number;
}

/** Totals of a callgrind output file, from `callgrind_annotate` (every function, no threshold). */
async function countOf(file: string): Promise<Count> {
  const { stdout } = await run('callgrind_annotate', ['--threshold=100', file], { maxBuffer: 256 << 20 });
  let total = 0;
  let compiler = 0;
  for (const line of stdout.split('\n')) {
    const match = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!match?.[1] || !match[2]) continue;
    const instructions = Number(match[1].replaceAll(',', ''));
    if (match[2].includes('PROGRAM TOTALS')) total = instructions;
    else if (match[2].includes('compiler::')) compiler += instructions;
  }
  return { total, compiler };
}

runBenchmark(async (lifecycle, interrupted) => {
  const options = parseOptions(
    process.argv.slice(2),
    process.env,
    {
      requests: { variable: 'BENCH_REQUESTS', fallback: 40_000, min: 100 },
      warmup: { variable: 'BENCH_WARMUP', fallback: 30, min: 1 },
    },
    {},
  );
  const traced = (process.env.BENCH_VARIANTS ?? 'on 0%,on 10%,on 100%')
    .split(',')
    .filter((variant) => Object.hasOwn(TRACED, variant));
  const variants = ['off', ...traced, 'off'];
  const collector = await startOtlpCollector({ countOnly: true });
  lifecycle.add('otlp collector', () => collector.close());
  const system = await startSystem(lifecycle, {
    label: 'instructions',
    gatewayEnv: { RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '100000' },
    observability: { otlpEndpoint: collector.url, env: {} },
  });
  const tokens = await seedMembers(system, 16, interrupted);
  // The counted gateways take the started one's configuration (same databases, keys and backends).
  const configured = Object.fromEntries(
    (await readFile(`/proc/${system.service('gateway').pid}/environ`, 'utf8'))
      .split('\0')
      .filter((entry) => entry.includes('='))
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
  delete configured.NODE_OPTIONS;
  const directory = await profileDirectory();
  // valgrind names its control pipe after $HOST, which the gateway's configuration sets: callgrind_control must agree.
  const controlEnv = { ...process.env, HOST: configured.HOST ?? '127.0.0.1' };
  const requests = tokens.map((token) => ({
    method: 'GET' as const,
    path: ROUTE,
    headers: { authorization: `Bearer ${token}` },
  }));
  console.log(
    `counting ${options.requests} × GET ${ROUTE} per variant after ${options.warmup} s of warm-up; callgrind output in ${relativeToRoot(directory)}/\n`,
  );
  const results: { variant: string; count: Count }[] = [];
  for (const [index, variant] of variants.entries()) {
    if (interrupted()) throw new Error('interrupted');
    const env: Record<string, string> = Object.assign({}, configured, { PORT: String(await freePort()) });
    for (const name of Object.keys(env))
      if (name.startsWith('OTEL_') || name === 'METRICS_PORT') delete env[name];
    const sampler = TRACED[variant];
    if (sampler)
      Object.assign(env, BATCH_TIMER, sampler, {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        METRICS_PORT: String(await freePort()),
      });
    const outFile = join(directory, `${index}-${variant.replace(/\W+/g, '')}.out`);
    const gateway = spawn(
      'valgrind',
      [
        '--tool=callgrind',
        '--instr-atstart=no',
        `--callgrind-out-file=${outFile}`,
        'node',
        '--enable-source-maps',
        'dist/apps/gateway/main.js',
      ],
      { env, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let output = '';
    gateway.stderr.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
    const exited = new Promise((resolve) => gateway.once('exit', resolve));
    lifecycle.add(`gateway under callgrind (${variant})`, async () => {
      gateway.kill('SIGKILL');
      await exited;
    });
    const url = `http://127.0.0.1:${env.PORT}`;
    const deadline = Date.now() + 300_000;
    while (
      !(await fetch(`${url}/livez`).then(
        (response) => response.ok,
        () => false,
      ))
    ) {
      if (gateway.exitCode !== null || Date.now() > deadline)
        throw new Error(`the gateway under callgrind did not start:\n${output}`);
      await sleep(500);
    }
    await runLoad({
      name: `warm-up (${variant})`,
      url,
      requests,
      connections: CONCURRENCY,
      durationS: options.warmup,
      rotateRequests: true,
    });
    const control = (command: string) =>
      run('callgrind_control', [command, String(gateway.pid)], { env: controlEnv });
    await control('--instr=on');
    await control('--zero');
    let sent = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (sent < options.requests) {
          const token = tokens[sent++ % tokens.length];
          const response = await fetch(url + ROUTE, { headers: { authorization: `Bearer ${token}` } });
          await response.arrayBuffer();
          if (response.status !== 200) throw new Error(`GET ${ROUTE} (${variant}): ${response.status}`);
        }
      }),
    );
    await control('--dump');
    await control('--instr=off');
    gateway.kill('SIGKILL');
    await exited;
    const count = await countOf(`${outFile}.1`);
    results.push({ variant, count });
    const perRequest = (instructions: number) => `${(instructions / options.requests / 1000).toFixed(1)} k`;
    console.log(
      `${variant.padEnd(8)} ${perRequest(count.total)} instructions per request, ${perRequest(count.total - count.compiler)} outside the optimizing compiler`,
    );
  }
  const offs = results.filter((result) => result.variant === 'off');
  const outside = (count: Count) => count.total - count.compiler;
  const offMean = mean(offs.map((result) => outside(result.count)));
  console.log(
    `\nAgainst off (instructions per request outside the optimizing compiler; the two counts of off differ by ` +
      `${((100 * Math.abs(outside(offs[0]!.count) - outside(offs[1]!.count))) / offMean).toFixed(1)} %):`,
  );
  for (const { variant, count } of results.filter((result) => result.variant !== 'off'))
    console.log(`  ${variant}: ×${(outside(count) / offMean).toFixed(3)}`);
});
