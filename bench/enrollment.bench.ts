/**
 * Enrollment benchmark (`npm run bench:enrollment [-- --enrollments 10000 --rounds 3 --profile]`), not a test.
 *
 * 1. Enrollment: N POST /api/device/enroll (default 10,000) at 100 concurrent connections, each request
 *    with its own pre-generated one-time code and machine id, through gateway → enrollment → PostgreSQL.
 *    Reports enrollments/s, p50 and p99, then proves that every code was used exactly once: all N
 *    answers 200 with distinct device ids and tokens, the database holds N devices and N consumed codes
 *    with a one-to-one link, and a sample of the used codes is refused (400 ENROLLMENT_CODE_USED).
 *    Each measured round enrolls into a fresh organization; a warm-up organization comes first.
 * 2. Device list: GET /api/devices of an organization with N devices (first page of 50, `limit=200`, a
 *    `q` search, a page deep in the list), with the admin's token.
 * Both against a bare Fastify hello-world measured in the same run. Every service runs in its own
 * process as in production; own database, NATS namespace, OpenID provider and SMTP sink; everything
 * is stopped and dropped at the end, also on failure and Ctrl-C.
 *
 * Options (flag or environment variable):
 *   --enrollments N        BENCH_ENROLLMENTS         enrollments (and codes) per enrollment round (10000)
 *   --enroll-connections N BENCH_ENROLL_CONNECTIONS  concurrent enrollments (100)
 *   --enroll-rounds N      BENCH_ENROLL_ROUNDS       enrollment rounds, each into a fresh organization (3)
 *   --enroll-warmup N      BENCH_ENROLL_WARMUP       enrollments into a warm-up organization first (2000; 0: none)
 *   --duration N           BENCH_DURATION            seconds of each measured device-list and baseline run (10)
 *   --warmup N             BENCH_WARMUP              seconds of warm-up before each such run (3), and twice
 *                                                    that for every scenario once before the first round
 *   --rounds N             BENCH_ROUNDS              device-list rounds; each runs every scenario, order rotated (3)
 *   --connections N        BENCH_CONNECTIONS         concurrent connections of the device-list runs (64)
 *   --light-connections N  BENCH_LIGHT_CONNECTIONS   the device-list scenarios again at this concurrency, to see
 *                                                    a page's latency without the queueing of 64 (4; 0: don't)
 *   --rate N               BENCH_RATE                the device-list scenarios again as an open loop: N requests per
 *                                                    second at fixed intervals over up to --connections connections,
 *                                                    latency counted from each request's due time; the p99 target
 *                                                    is judged at this load (500; see docs/decisions.md)
 *   --high-rate N          BENCH_HIGH_RATE           and once more at this rate (1000; 0: don't)
 *   --quiet N              BENCH_QUIET               before each run, wait up to N seconds until processes outside
 *                                                    the benchmark use < 25% of a core (30; 0: don't)
 *   --no-vacuum            BENCH_NO_VACUUM=1         don't run VACUUM (ANALYZE) on the benchmark's database after the
 *                                                    warm-up and after each enrollment round (see below)
 *   --direct-grpc          BENCH_DIRECT_GRPC=1       afterwards, the first page through the enrollment service's gRPC
 *                                                    ListDevices directly (no gateway), with grpc-js's default HTTP/2
 *                                                    flow-control window (64 KiB) and with a 16 MiB one
 *   --profile              BENCH_PROFILE=1           afterwards, one extra enrollment run and one extra run per
 *                                                    device-list scenario with V8 CPU profiles (tmp/bench-profiles/)
 *
 * VACUUM (ANALYZE): the PostgreSQL of the development machines runs with autovacuum off (a CI setting), so
 * without it the devices table is never analyzed (the planner then reads every device of the
 * organization for some pages) and the outbox's index of unpublished events is never cleaned (the relay's
 * polls get slower with every event ever published). Production runs autovacuum; the benchmark does its
 * work between phases, outside every measured window, unless --no-vacuum.
 *
 * Exit code 0 when the measurement completed (whether or not the targets are met), 1 on any error,
 * including a single non-2xx response or a failed check, 130 when interrupted.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { credentials } from '@grpc/grpc-js';
import type autocannon from 'autocannon';
import {
  DeviceStatus,
  EnrollmentServiceClient,
  type ListDevicesResponse,
} from '@sts/proto/gen/enrollment/v1/enrollment';
import type { Lifecycle } from '@sts/runtime/lifecycle';
import {
  call,
  ceilingLines,
  cpuTable,
  cpuWindow,
  DatabaseMonitor,
  expectStatus,
  inBatches,
  machineDescription,
  mean,
  meanCpuPerOperation,
  parseOptions,
  percentile,
  pgPerOperation,
  profileDirectory,
  profiled,
  quietNote,
  relativeToRoot,
  resultsTable,
  rotate,
  runBenchmark,
  runLoad,
  runOpenLoad,
  services,
  slowRequestsDuringGc,
  startSystem,
  summarize,
  table,
  waitForQuiet,
  withGcPauses,
  type BenchSystem,
  type CallResult,
  type ClosedLoadResult,
  type LoadResult,
  type CpuColumn,
  type CpuWindow,
  type PgCounters,
  type RunFigures,
  type Session,
} from './bench-harness';
import type { OpenLoadResult } from './open-loop';

const TARGET_ENROLLMENTS_PER_S = 500;
const TARGET_LIST_P99_MS = 50;
/** POST /api/enrollment-codes makes at most this many per call. */
const CODES_PER_CALL = 100;
/** Used codes tried again after each round; half with a new machine, half with the machine that used it. */
const REUSE_SAMPLE = 100;

type Options = ReturnType<typeof parseCommandLine>;

function parseCommandLine() {
  return parseOptions(
    process.argv.slice(2),
    process.env,
    {
      enrollments: { variable: 'BENCH_ENROLLMENTS', fallback: 10_000, min: 1 },
      'enroll-connections': { variable: 'BENCH_ENROLL_CONNECTIONS', fallback: 100, min: 1 },
      'enroll-rounds': { variable: 'BENCH_ENROLL_ROUNDS', fallback: 3, min: 1 },
      'enroll-warmup': { variable: 'BENCH_ENROLL_WARMUP', fallback: 2_000, min: 0 },
      duration: { variable: 'BENCH_DURATION', fallback: 10, min: 1 },
      warmup: { variable: 'BENCH_WARMUP', fallback: 3, min: 0 },
      rounds: { variable: 'BENCH_ROUNDS', fallback: 3, min: 1 },
      connections: { variable: 'BENCH_CONNECTIONS', fallback: 64, min: 1 },
      'light-connections': { variable: 'BENCH_LIGHT_CONNECTIONS', fallback: 4, min: 0 },
      rate: { variable: 'BENCH_RATE', fallback: 500, min: 1 },
      'high-rate': { variable: 'BENCH_HIGH_RATE', fallback: 1000, min: 0 },
      quiet: { variable: 'BENCH_QUIET', fallback: 30, min: 0 },
    },
    {
      profile: 'BENCH_PROFILE',
      'no-vacuum': 'BENCH_NO_VACUUM',
      'direct-grpc': 'BENCH_DIRECT_GRPC',
      'open-loop-only': 'BENCH_OPEN_LOOP_ONLY',
    },
  );
}

// --- organizations, keys, codes ------------------------------------------------------------------

interface BenchOrg {
  label: string;
  orgId: string;
  adminToken: string;
  key: string;
  codes: string[];
}

/**
 * A new organization (its admin's first login provisions it), its enrollment key, and `codeCount`
 * one-time codes made 100 per call.
 */
async function provisionOrg(system: BenchSystem, label: string, codeCount: number): Promise<BenchOrg> {
  const { idp, gatewayUrl } = system;
  const adminToken = await idp.issueUserToken({ email: `admin@${label}.bench.test`, name: `Admin ${label}` });
  const session = await call<Session>(gatewayUrl, 'GET', '/api/session', adminToken);
  expectStatus(`first login of the ${label} admin`, session, 200);
  if (session.body.user.role !== 'ORG_ADMIN')
    throw new Error(`${label}: the first user is ${session.body.user.role}, not ORG_ADMIN`);
  const key = await call<{ key: string }>(gatewayUrl, 'POST', '/api/enrollment-key', adminToken);
  expectStatus(`${label}: POST /api/enrollment-key`, key, 200);
  const batches = Array.from({ length: Math.ceil(codeCount / CODES_PER_CALL) }, (_, i) =>
    Math.min(CODES_PER_CALL, codeCount - i * CODES_PER_CALL),
  );
  const codes: string[] = [];
  await inBatches(batches, 4, async (count) => {
    const made = await call<{ codes: { code: string }[] }>(
      gatewayUrl,
      'POST',
      '/api/enrollment-codes',
      adminToken,
      { count },
    );
    expectStatus(`${label}: POST /api/enrollment-codes`, made, 200);
    if (made.body.codes.length !== count)
      throw new Error(`${label}: asked for ${count} codes, got ${made.body.codes.length}`);
    codes.push(...made.body.codes.map((code) => code.code));
  });
  if (new Set(codes).size !== codes.length) throw new Error(`${label}: the service handed out a code twice`);
  return { label, orgId: session.body.org.id, adminToken, key: key.body.key, codes };
}

// --- enrollment runs -----------------------------------------------------------------------------

const hostnameOf = (index: number) => `ws-${String(index).padStart(5, '0')}`;

interface EnrollmentOutcome {
  load: ClosedLoadResult;
  seconds: number;
  machineIds: string[];
  deviceIds: string[];
}

/**
 * Enrolls one device per code of `org`, `connections` at a time: request i carries code i, a fresh
 * machine id (32 hex digits, like /etc/machine-id) and hostname ws-<i>. Fails on any non-200.
 */
async function enrollAll(
  system: BenchSystem,
  org: BenchOrg,
  connections: number,
): Promise<EnrollmentOutcome> {
  const count = org.codes.length;
  const machineIds = org.codes.map(() => randomBytes(16).toString('hex'));
  const bodies = org.codes.map((code, i) =>
    JSON.stringify({
      code,
      machine_id: machineIds[i],
      hostname: hostnameOf(i),
      metadata: { os: 'linux', os_release: '6.8.0', os_type: 'Linux', arch: 'x64', agent_version: '0.1.0' },
    }),
  );
  const sent = new Uint8Array(count);
  const answered = new Uint8Array(count);
  const deviceIds: string[] = new Array<string>(count);
  const tokens = new Set<string>();
  const problems: string[] = [];
  let next = 0;
  const request: autocannon.Request = {
    method: 'POST',
    path: '/api/device/enroll',
    headers: { 'content-type': 'application/json', 'x-enrollment-key': org.key },
    setupRequest: (template, context) => {
      const index = next++;
      if (index >= count) throw new Error(`autocannon asked for request ${index + 1} of ${count}`);
      sent[index] = (sent[index] ?? 0) + 1;
      (context as { index?: number }).index = index;
      return { ...template, body: bodies[index] };
    },
    onResponse: (status, body, context) => {
      const index = (context as { index: number }).index;
      answered[index] = (answered[index] ?? 0) + 1;
      if (status !== 200) {
        if (problems.length < 5) problems.push(`code ${index}: ${status} ${body}`);
        return;
      }
      const enrolled = JSON.parse(body) as {
        device_id: string;
        org_id: string;
        device_token: string;
        re_enrolled: boolean;
      };
      if (enrolled.org_id !== org.orgId || enrolled.re_enrolled)
        problems.push(`code ${index}: unexpected answer ${body}`);
      deviceIds[index] = enrolled.device_id;
      tokens.add(enrolled.device_token);
    },
  };
  const load = await runLoad({
    name: `${org.label}: ${count} enrollments`,
    url: system.gatewayUrl,
    requests: [request],
    connections: Math.min(connections, count),
    amount: count,
    recordLatencies: true,
  }).catch((error: unknown) => {
    throw new Error(
      `${error instanceof Error ? error.message : String(error)}; first problems: ${problems.join('; ')}`,
    );
  });
  const seconds = load.activeSeconds;

  // Every code sent exactly once, every request answered once with 200 and a new device of this organization.
  if (problems.length > 0) throw new Error(`${org.label}: ${problems.join('; ')}`);
  if (next !== count || sent.some((times) => times !== 1) || answered.some((times) => times !== 1))
    throw new Error(`${org.label}: not every code was sent and answered exactly once (${next} sent)`);
  if (load.result['2xx'] !== count)
    throw new Error(`${org.label}: ${load.result['2xx']} of ${count} answered 2xx`);
  if (new Set(deviceIds).size !== count) throw new Error(`${org.label}: device ids are not all distinct`);
  if (tokens.size !== count) throw new Error(`${org.label}: device tokens are not all distinct`);
  return { load, seconds, machineIds, deviceIds };
}

/**
 * Waits until the enrollment work of an organization has reached the feed (outbox published, a feed
 * item written per device); returns when (performance.now()) the outbox was drained.
 */
async function waitForFeed(monitor: DatabaseMonitor, org: BenchOrg, timeoutMs = 300_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let drainedAt: number | undefined;
  for (;;) {
    const { rows } = await monitor.client.query<{ unpublished: string; feed: string }>(
      `select (select count(*) from enrollment.outbox where published_at is null) as unpublished,
              (select count(*) from notification.feed_items where org_id = $1 and type = 'device.enrolled') as feed`,
      [org.orgId],
    );
    const row = rows[0];
    if (Number(row?.unpublished) === 0) drainedAt ??= performance.now();
    if (drainedAt !== undefined && Number(row?.feed) === org.codes.length) return drainedAt;
    if (Date.now() > deadline)
      throw new Error(
        `${org.label}: after ${timeoutMs / 1000} s, ${row?.unpublished} events unpublished, ${row?.feed} of ${org.codes.length} feed items`,
      );
    await sleep(100);
  }
}

/**
 * No code was used twice, checked in the database: N devices and N codes in the organization, every
 * code consumed, each by a different device, each device by exactly one code, the same device ids as
 * the answers. Then a sample of used codes is presented again and must be refused as used.
 */
async function checkCodesUsedOnce(
  system: BenchSystem,
  monitor: DatabaseMonitor,
  org: BenchOrg,
  outcome: EnrollmentOutcome,
): Promise<string> {
  const n = org.codes.length;
  const counts = async () => {
    const { rows } = await monitor.client.query<Record<string, string>>(
      `select
         (select count(*) from enrollment.devices where org_id = $1) as devices,
         (select count(*) from enrollment.enrollment_codes where org_id = $1) as codes,
         (select count(*) from enrollment.enrollment_codes where org_id = $1 and consumed_at is not null) as consumed,
         (select count(distinct consumed_by_device_id) from enrollment.enrollment_codes
           where org_id = $1 and consumed_by_device_id is not null) as distinct_devices,
         (select count(*) from (
            select d.id from enrollment.devices d
            left join enrollment.enrollment_codes c on c.org_id = d.org_id and c.consumed_by_device_id = d.id
            where d.org_id = $1 group by d.id having count(c.id) <> 1) x) as devices_not_one_code,
         (select count(*) from enrollment.enrollment_codes c
           where c.org_id = $1 and consumed_at is not null
             and not exists (select 1 from enrollment.devices d where d.id = c.consumed_by_device_id and d.org_id = $1)
         ) as codes_without_device`,
      [org.orgId],
    );
    return Object.fromEntries(Object.entries(rows[0] ?? {}).map(([name, value]) => [name, Number(value)]));
  };
  const expected = {
    devices: n,
    codes: n,
    consumed: n,
    distinct_devices: n,
    devices_not_one_code: 0,
    codes_without_device: 0,
  };
  const compare = (what: string, actual: Record<string, number>) => {
    const wrong = Object.entries(expected).filter(([name, value]) => actual[name] !== value);
    if (wrong.length > 0)
      throw new Error(
        `${org.label} ${what}: ${wrong.map(([name, value]) => `${name} ${actual[name]} (expected ${value})`).join(', ')}`,
      );
  };
  compare('after the run', await counts());
  const { rows } = await monitor.client.query<{ id: string }>(
    'select id from enrollment.devices where org_id = $1',
    [org.orgId],
  );
  const answered = new Set(outcome.deviceIds);
  if (rows.length !== n || rows.some((row) => !answered.has(row.id)))
    throw new Error(`${org.label}: the devices in the database are not the devices the answers named`);

  // Used codes again: a new machine, or the machine that used the code (a re-enrollment attempt).
  const sample = new Set<number>();
  while (sample.size < Math.min(REUSE_SAMPLE, n)) sample.add(randomInt(n));
  let refused = 0;
  await inBatches(
    [...sample.keys()].map((index, position) => ({ index, position })),
    10,
    async ({ index, position }) => {
      const machineId =
        position % 2 === 0 ? randomBytes(16).toString('hex') : (outcome.machineIds[index] as string);
      const answer = await call<{ code?: string }>(
        system.gatewayUrl,
        'POST',
        '/api/device/enroll',
        undefined,
        { code: org.codes[index], machine_id: machineId, hostname: `reuse-${index}` },
        { 'x-enrollment-key': org.key },
      );
      if (answer.status !== 400 || answer.body.code !== 'ENROLLMENT_CODE_USED')
        throw new Error(
          `${org.label}: code ${index} used again → ${answer.status} ${JSON.stringify(answer.body)}, expected 400 ENROLLMENT_CODE_USED`,
        );
      refused += 1;
    },
  );
  compare('after the reuse attempts', await counts());
  return (
    `${n} answers 200 with ${n} distinct device ids and tokens; database: ${n} devices, ${n} codes all consumed, ` +
    `one code per device and one device per code; ${refused} used codes presented again → 400 ENROLLMENT_CODE_USED, nothing written`
  );
}

interface EnrollmentRound extends CpuWindow {
  rate: number;
  p50: number;
  p99: number;
  /** From the start of the run to its last answer (the CPU window `seconds` ends up to 1 s later). */
  activeSeconds: number;
  /** From the end of the run until every device.enrolled event was in the feed. */
  feedLagS: number;
  /** From the end of the run until the outbox relay had published every event to NATS. */
  outboxLagS: number;
  /** CPU from the start of the run until the feed caught up (includes the asynchronous event delivery). */
  whole: CpuWindow & { opsPerSecond: number };
  /** pg_stat_database over the run and until the feed caught up, per enrollment. */
  pg: PgCounters;
  baseline: RunFigures;
  checks: string;
}

// --- device list runs ----------------------------------------------------------------------------

interface Scenario {
  name: string;
  url: string;
  requests: autocannon.Request[];
  /** A device-list scenario (the p99 target is judged on those at the target rate). */
  list: boolean;
  /** Closed loop: this many connections, each sending its next request when answered. Open loop: at most this many. */
  connections: number;
  /** Open loop at this many requests per second (runOpenLoad); closed loop when absent. */
  offeredRate?: number;
}

interface ListMeasurement extends CpuWindow {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** pg_stat_database over the run, per request. */
  pg: PgCounters;
  devicesTable: TableCounters;
}

/** pg_stat_user_tables of enrollment.devices: how the list queries reach the rows. */
interface TableCounters {
  seqScans: number;
  seqRows: number;
  indexScans: number;
  indexRows: number;
}

async function devicesTableCounters(monitor: DatabaseMonitor): Promise<TableCounters> {
  await monitor.client.query('select pg_stat_clear_snapshot()');
  const { rows } = await monitor.client.query<Record<string, string>>(
    `select seq_scan, seq_tup_read, coalesce(idx_scan, 0) as idx_scan, coalesce(idx_tup_fetch, 0) as idx_tup_fetch
       from pg_stat_user_tables where schemaname = 'enrollment' and relname = 'devices'`,
  );
  const row = rows[0] ?? {};
  return {
    seqScans: Number(row.seq_scan),
    seqRows: Number(row.seq_tup_read),
    indexScans: Number(row.idx_scan),
    indexRows: Number(row.idx_tup_fetch),
  };
}

const tablePerOperation = (
  before: TableCounters,
  after: TableCounters,
  operations: number,
): TableCounters => ({
  seqScans: (after.seqScans - before.seqScans) / operations,
  seqRows: (after.seqRows - before.seqRows) / operations,
  indexScans: (after.indexScans - before.indexScans) / operations,
  indexRows: (after.indexRows - before.indexRows) / operations,
});

interface DeviceJson {
  id: string;
  name: string;
  machine_id: string;
}

/** Walks the whole list 200 at a time through the Link headers; returns the cursor of the page at `middleAt`. */
async function walkDevices(
  system: BenchSystem,
  org: BenchOrg,
  middleAt: number,
): Promise<{ total: number; middleCursor: string }> {
  const seen = new Set<string>();
  let path: string | undefined = '/api/devices?limit=200';
  let middleCursor = '';
  while (path) {
    const page: CallResult<DeviceJson[]> = await call<DeviceJson[]>(
      system.gatewayUrl,
      'GET',
      path,
      org.adminToken,
    );
    expectStatus(`GET ${path}`, page, 200);
    for (const device of page.body) {
      if (seen.has(device.id)) throw new Error(`device ${device.id} is listed twice`);
      seen.add(device.id);
    }
    const next = /<([^>]+)>;\s*rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
    if (next && !middleCursor && seen.size >= middleAt)
      middleCursor = new URL(next, system.gatewayUrl).searchParams.get('cursor') ?? '';
    path = next;
  }
  return { total: seen.size, middleCursor };
}

// --- direct gRPC (diagnosis) ---------------------------------------------------------------------

interface DirectResult {
  rps: number;
  p50: number;
  p99: number;
}

/**
 * The first page of `orgId` from the enrollment service's ListDevices, `concurrency` calls in flight
 * for `durationS`, from this process (a grpc-js client like the gateway's, optionally with a larger
 * HTTP/2 flow-control window). Separates the enrollment service and the gRPC hop from the gateway.
 */
async function directListDevices(
  address: string,
  orgId: string,
  concurrency: number,
  durationS: number,
  flowControlWindow: number | undefined,
): Promise<DirectResult> {
  const client = new EnrollmentServiceClient(address, credentials.createInsecure(), {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    ...(flowControlWindow ? { 'grpc-node.flow_control_window': flowControlWindow } : {}),
  });
  const request = { orgId, limit: 0, cursor: '', status: DeviceStatus.DEVICE_STATUS_UNSPECIFIED, query: '' };
  const list = () =>
    new Promise<ListDevicesResponse>((resolveCall, reject) =>
      client.listDevices(request, (error, response) => (error ? reject(error) : resolveCall(response))),
    );
  const latencies: number[] = [];
  const started = performance.now();
  const end = started + durationS * 1000;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          const sent = performance.now();
          const { devices } = await list();
          if (devices.length !== 50)
            throw new Error(`ListDevices returned ${devices.length} devices, not 50`);
          latencies.push(performance.now() - sent);
        }
      }),
    );
  } finally {
    client.close();
  }
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / ((performance.now() - started) / 1000),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

// --- main ----------------------------------------------------------------------------------------

async function main(lifecycle: Lifecycle, interrupted: () => boolean): Promise<void> {
  const options = parseCommandLine();
  const n = options.enrollments;
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${options['enroll-rounds']} enrollment rounds of ${n} enrollments at ${options['enroll-connections']} connections ` +
      `(after ${options['enroll-warmup']} warm-up enrollments); device list: ${options.connections} connections, ` +
      `${options.warmup} s warm-up + ${options.duration} s measured per run, ${options.rounds} rounds\n`,
  );

  const system = await startSystem(lifecycle, {
    enrollment: true,
    gatewayEnv: {
      // Every enrollment comes from this one address; the defaults (600 a minute, 20 failures a
      // minute) are meant for a roll-out's NAT address, not for a load generator.
      ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '10000000',
      ENROLL_FAILURES_PER_MINUTE: '1000000',
    },
  });
  console.log(`started: ${services.map((service) => `${service.name} (pid ${service.pid})`).join(', ')}`);
  const monitor = await DatabaseMonitor.connect(lifecycle, system.database.url);
  const autovacuum = (await monitor.client.query<{ autovacuum: string }>('show autovacuum')).rows[0]
    ?.autovacuum;
  console.log(
    `PostgreSQL autovacuum: ${autovacuum}; ` +
      (options['no-vacuum']
        ? 'the benchmark does not vacuum (--no-vacuum)'
        : 'the benchmark runs VACUUM (ANALYZE) on its database after the warm-up and after each enrollment round'),
  );
  const vacuum = async (when: string) => {
    if (options['no-vacuum']) return;
    const started = performance.now();
    await monitor.client.query('vacuum (analyze)');
    console.log(`  VACUUM (ANALYZE) ${when}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  };
  const waitQuiet = async () =>
    options.quiet > 0 ? waitForQuiet(await monitor.processGroups(), options.quiet) : undefined;
  const check = () => {
    if (interrupted()) throw new Error('interrupted');
    for (const service of services) service.assertAlive();
  };

  // Organizations, keys and codes for every enrollment run, made before any is measured.
  const seedStarted = performance.now();
  const warmupOrg =
    options['enroll-warmup'] > 0 ? await provisionOrg(system, 'warmup', options['enroll-warmup']) : undefined;
  const roundOrgs: BenchOrg[] = [];
  for (let round = 0; round < options['enroll-rounds']; round++) {
    check();
    roundOrgs.push(await provisionOrg(system, `round${round + 1}`, n));
  }
  const codesMade = options['enroll-warmup'] + n * options['enroll-rounds'];
  const seedS = (performance.now() - seedStarted) / 1000;
  console.log(
    `seeded: ${roundOrgs.length + (warmupOrg ? 1 : 0)} organizations with an enrollment key each, ${codesMade} codes ` +
      `(${Math.ceil(codesMade / CODES_PER_CALL)} calls of POST /api/enrollment-codes, 4 at a time) in ${seedS.toFixed(1)} s\n`,
  );

  const baselineRequests: autocannon.Request[] = [{ method: 'GET', path: '/' }];
  const baselineRun = async (connections: number, durationS: number) =>
    runLoad({
      name: 'baseline',
      url: system.baselineUrl,
      requests: baselineRequests,
      connections,
      durationS,
      recordLatencies: true,
    });

  // --- 1. enrollments ---
  if (warmupOrg) {
    const warm = await enrollAll(system, warmupOrg, options['enroll-connections']);
    await waitForFeed(monitor, warmupOrg);
    console.log(
      `warm-up: ${warmupOrg.codes.length} enrollments, ${(warmupOrg.codes.length / warm.seconds).toFixed(0)}/s ` +
        `(not counted)`,
    );
  }
  await vacuum('after the warm-up');
  if (options.warmup > 0) await baselineRun(options['enroll-connections'], 2 * options.warmup);

  const enrollmentRounds: EnrollmentRound[] = [];
  for (const [round, org] of roundOrgs.entries()) {
    check();
    let quiet = await waitQuiet();
    if (options.warmup > 0) await baselineRun(options['enroll-connections'], options.warmup);
    const baseline = await baselineRun(options['enroll-connections'], options.duration);

    const quietEnroll = await waitQuiet();
    if (quietEnroll && quietEnroll.waitedS > (quiet?.waitedS ?? 0)) quiet = quietEnroll;
    const pgBefore = await monitor.counters();
    const before = await monitor.snapshot();
    const outcome = await enrollAll(system, org, options['enroll-connections']);
    const afterRun = await monitor.snapshot();
    const drainedAt = await waitForFeed(monitor, org);
    const afterFeed = await monitor.snapshot();
    await sleep(1_100); // let the backends flush their statistics
    const pgAfter = await monitor.counters();
    check();
    const checks = await checkCodesUsedOnce(system, monitor, org, outcome);

    const rate = n / outcome.seconds;
    const measured: EnrollmentRound = {
      ...cpuWindow(before, afterRun),
      rate,
      p50: percentile(outcome.load.latenciesMs, 50),
      p99: percentile(outcome.load.latenciesMs, 99),
      activeSeconds: outcome.seconds,
      feedLagS: (afterFeed.at - outcome.load.lastResponseAt) / 1000,
      outboxLagS: Math.max(0, (drainedAt - outcome.load.lastResponseAt) / 1000),
      whole: { ...cpuWindow(before, afterFeed), opsPerSecond: n / ((afterFeed.at - before.at) / 1000) },
      pg: pgPerOperation(pgBefore, pgAfter, n),
      baseline: {
        rps: baseline.completed / baseline.durationS,
        p50: percentile(baseline.latenciesMs, 50),
        p99: percentile(baseline.latenciesMs, 99),
      },
      checks,
    };
    enrollmentRounds.push(measured);
    console.log(
      `enrollment round ${round + 1}/${roundOrgs.length}: ${n} enrollments in ${outcome.seconds.toFixed(2)} s → ` +
        `${rate.toFixed(0)}/s, p50 ${measured.p50.toFixed(1)} ms, p99 ${measured.p99.toFixed(1)} ms; ` +
        `outbox drained ${measured.outboxLagS.toFixed(1)} s and feed caught up ${measured.feedLagS.toFixed(1)} s later; baseline ${measured.baseline.rps.toFixed(0)} req/s ` +
        `(CPU of processes outside the benchmark ${(measured.cpu.get('other processes') ?? 0).toFixed(0)}% of a core${quietNote(quiet)})`,
    );
    console.log(`  checks: ${checks}`);
    await vacuum(`after round ${round + 1}`);
  }

  // --- 2. device list ---
  const listOrg = roundOrgs[0] as BenchOrg;
  const walked = await walkDevices(system, listOrg, Math.floor(n / 2));
  if (walked.total !== n) throw new Error(`GET /api/devices pages through ${walked.total} devices, not ${n}`);
  console.log(
    `\ndevice list: paging through GET /api/devices?limit=200 of ${listOrg.label} lists ${walked.total} distinct devices`,
  );
  // The plan of the list query depends on whether autovacuum has analyzed the table since the mass insert.
  const analyzed = await monitor.client.query<{ live: string; analyzed: Date | null }>(
    `select n_live_tup as live, greatest(last_analyze, last_autoanalyze) as analyzed
       from pg_stat_user_tables where schemaname = 'enrollment' and relname = 'devices'`,
  );
  const analyzedAt = analyzed.rows[0]?.analyzed;
  console.log(
    `  enrollment.devices: ${analyzed.rows[0]?.live} live rows in all organizations; ` +
      (analyzedAt
        ? `last analyzed ${((Date.now() - analyzedAt.getTime()) / 1000).toFixed(0)} s ago`
        : 'not analyzed yet (the planner does not know the table size)'),
  );

  // A search that matches 10 hostnames (ws-04210 … ws-04219) when there are enough devices.
  const q = n >= 10_000 ? 'ws-0421' : hostnameOf(Math.floor(n / 2)).slice(0, -1);
  const authorized = (path: string): autocannon.Request[] => [
    { method: 'GET', path, headers: { authorization: `Bearer ${listOrg.adminToken}` } },
  ];
  const listPaths: [string, string][] = [
    ['GET /api/devices', '/api/devices'],
    ['GET /api/devices?limit=200', '/api/devices?limit=200'],
    [`GET /api/devices?q=${q}`, `/api/devices?q=${q}`],
  ];
  if (walked.middleCursor)
    listPaths.push([
      'GET /api/devices?cursor=(middle)',
      `/api/devices?cursor=${encodeURIComponent(walked.middleCursor)}`,
    ]);
  const listScenarios = (connections: number, suffix: string, offeredRate?: number): Scenario[] =>
    listPaths.map(([name, path]) => ({
      name: `${name}${suffix}`,
      url: system.gatewayUrl,
      requests: authorized(path),
      list: true,
      connections,
      ...(offeredRate ? { offeredRate } : {}),
    }));
  const scenarios: Scenario[] = [
    {
      name: 'baseline: Fastify hello-world',
      url: system.baselineUrl,
      requests: baselineRequests,
      list: false,
      connections: options.connections,
    },
    ...(options['open-loop-only'] ? [] : listScenarios(options.connections, '')),
    ...(options['light-connections'] > 0 && !options['open-loop-only']
      ? listScenarios(options['light-connections'], ` (${options['light-connections']} conns)`)
      : []),
    ...[options.rate, options['high-rate']]
      .filter((rate) => rate > 0)
      .flatMap((rate) => listScenarios(options.connections, ` (${rate}/s offered)`, rate)),
  ];
  for (const scenario of scenarios.filter((entry) => entry.list && isHeavy(entry, options))) {
    const page = await call<DeviceJson[]>(
      system.gatewayUrl,
      'GET',
      scenario.requests[0]?.path ?? '',
      listOrg.adminToken,
    );
    expectStatus(scenario.name, page, 200);
    console.log(`  ${scenario.name}: ${page.body.length} devices per page`);
  }
  console.log('');

  const load = (scenario: Scenario, durationS: number): Promise<LoadResult | OpenLoadResult> =>
    scenario.offeredRate
      ? runOpenLoad({
          name: scenario.name,
          url: scenario.url,
          requests: scenario.requests,
          ratePerSecond: scenario.offeredRate,
          maxConnections: scenario.connections,
          durationS,
        })
      : runLoad({
          name: scenario.name,
          url: scenario.url,
          requests: scenario.requests,
          connections: scenario.connections,
          durationS,
          recordLatencies: true,
        });
  if (options.warmup > 0) for (const scenario of scenarios) await load(scenario, 2 * options.warmup);

  const measurements = new Map<string, ListMeasurement[]>(scenarios.map((scenario) => [scenario.name, []]));
  for (let round = 0; round < options.rounds; round++) {
    for (const scenario of rotate(scenarios, round)) {
      check();
      const quiet = await waitQuiet();
      if (options.warmup > 0) await load(scenario, options.warmup);
      const pgBefore = await monitor.counters();
      const tableBefore = await devicesTableCounters(monitor);
      const before = await monitor.snapshot();
      const runStartedAt = new Date().toISOString();
      // Open loop: which processes were collecting garbage while the slow requests waited.
      const { result, pauses } = scenario.offeredRate
        ? await withGcPauses(
            ['gateway', 'enrollment'].map((name) => system.service(name)),
            () => load(scenario, options.duration),
          )
        : { result: await load(scenario, options.duration), pauses: undefined };
      const { completed, durationS, latenciesMs } = result;
      const open = 'slowRequests' in result ? result : undefined;
      if (open && pauses) pauses.set('load generator', open.generatorGcPauses);
      const after = await monitor.snapshot();
      await sleep(1_100);
      const pgAfter = await monitor.counters();
      const tableAfter = await devicesTableCounters(monitor);
      check();
      const measurement: ListMeasurement = {
        ...cpuWindow(before, after),
        rps: completed / durationS,
        p50: percentile(latenciesMs, 50),
        p99: percentile(latenciesMs, 99),
        requests: completed,
        pg: pgPerOperation(pgBefore, pgAfter, completed),
        devicesTable: tablePerOperation(tableBefore, tableAfter, completed),
      };
      measurements.get(scenario.name)?.push(measurement);
      console.log(
        `round ${round + 1}/${options.rounds}  ${scenario.name.padEnd(44)} ${measurement.rps.toFixed(0).padStart(6)} req/s  ` +
          `p50 ${measurement.p50.toFixed(2)} ms  p99 ${measurement.p99.toFixed(2)} ms  (${measurement.requests} requests, all 2xx; ` +
          `CPU of processes outside the benchmark ${(measurement.cpu.get('other processes') ?? 0).toFixed(0)}% of a core${quietNote(quiet)})` +
          (open
            ? `; ≥ 50 ms by second due: ${open.slowBySecond.join(' ')}; load generator's longest stall ` +
              `${open.generatorStallMs.toFixed(0)} ms; started ${runStartedAt}`
            : '') +
          (open && pauses ? `\n    ${slowRequestsDuringGc(open.slowRequests, pauses)}` : ''),
      );
    }
  }

  report(options, enrollmentRounds, scenarios, measurements);

  if (options['direct-grpc']) {
    const address = system.grpcAddresses.get('enrollment') as string;
    const bigWindow = 16 * 1024 * 1024;
    const variants: [string, number, number | undefined][] = [
      [
        `ListDevices direct, ${options.connections} in flight, default window`,
        options.connections,
        undefined,
      ],
      [`ListDevices direct, ${options.connections} in flight, 16 MiB window`, options.connections, bigWindow],
    ];
    if (options['light-connections'] > 0)
      variants.push(
        [
          `ListDevices direct, ${options['light-connections']} in flight, default window`,
          options['light-connections'],
          undefined,
        ],
        [
          `ListDevices direct, ${options['light-connections']} in flight, 16 MiB window`,
          options['light-connections'],
          bigWindow,
        ],
      );
    const columns: CpuColumn[] = [];
    const rows: string[][] = [];
    for (const [name, concurrency, flowControlWindow] of variants) {
      check();
      await waitQuiet();
      if (options.warmup > 0)
        await directListDevices(address, listOrg.orgId, concurrency, options.warmup, flowControlWindow);
      const before = await monitor.snapshot();
      const result = await directListDevices(
        address,
        listOrg.orgId,
        concurrency,
        options.duration,
        flowControlWindow,
      );
      const window = cpuWindow(before, await monitor.snapshot());
      columns.push({ name, runs: [{ ...window, opsPerSecond: result.rps }] });
      rows.push([
        name,
        result.rps.toFixed(0),
        result.p50.toFixed(2),
        result.p99.toFixed(2),
        `${(window.cpu.get('machine (all cores)') ?? 0).toFixed(0)}%`,
      ]);
    }
    console.log(
      `\nDiagnosis: the first page straight from the enrollment service (gRPC from the benchmark process, no gateway), one run each:\n`,
    );
    console.log(
      table(['scenario', 'req/s', 'p50 ms', 'p99 ms', 'machine CPU'], rows, (column) => column >= 1),
    );
    console.log('');
    console.log(cpuTable(columns));
  }

  if (options.profile) {
    const directory = await profileDirectory();
    console.log(
      `\nCPU profiles (extra runs, not part of the figures above; profiling slows the processes down) in ${relativeToRoot(directory)}/\n`,
    );
    const profileOrg = await provisionOrg(system, 'profile', n);
    await profiled(
      directory,
      `${n} enrollments`,
      ['gateway', 'enrollment', 'notification'].map((name) => system.service(name)),
      () => enrollAll(system, profileOrg, options['enroll-connections']),
      (outcome) =>
        `${(n / outcome.seconds).toFixed(0)}/s, p99 ${percentile(outcome.load.latenciesMs, 99).toFixed(1)} ms`,
    );
    await waitForFeed(monitor, profileOrg);
    for (const scenario of scenarios.filter((entry) => entry.list && isHeavy(entry, options))) {
      if (options.warmup > 0) await load(scenario, options.warmup);
      await profiled(
        directory,
        scenario.name,
        ['gateway', 'enrollment'].map((name) => system.service(name)),
        () => load(scenario, options.duration),
        ({ completed, durationS, latenciesMs }) =>
          `${(completed / durationS).toFixed(0)} req/s, p99 ${percentile(latenciesMs, 99).toFixed(1)} ms`,
      );
    }
  }
}

// --- report --------------------------------------------------------------------------------------

/** The closed-loop runs at full concurrency: what the CPU tables and profiles describe. */
function isHeavy(scenario: Scenario, options: Options): boolean {
  return !scenario.offeredRate && scenario.connections === options.connections;
}

function report(
  options: Options,
  enrollmentRounds: EnrollmentRound[],
  scenarios: Scenario[],
  measurements: Map<string, ListMeasurement[]>,
): void {
  const n = options.enrollments;
  const cores = availableParallelism();

  // Enrollment.
  const baselineRow = { name: 'baseline: Fastify hello-world', enrollment: false };
  const enrollmentRow = { name: `POST /api/device/enroll (${n})`, enrollment: true };
  const enrollmentSummary = summarize(
    [baselineRow, enrollmentRow],
    new Map<string, RunFigures[]>([
      [baselineRow.name, enrollmentRounds.map((round) => round.baseline)],
      [enrollmentRow.name, enrollmentRounds.map(({ rate, p50, p99 }) => ({ rps: rate, p50, p99 }))],
    ]),
  );
  console.log(
    `\nResults\n\nEnrollment: medians of ${enrollmentRounds.length} rounds of ${n} enrollments (each code once, each a new ` +
      `machine) at ${options['enroll-connections']} connections; baseline at the same concurrency, ${options.duration} s, ` +
      `before each round; latencies exact (not autocannon's 1 ms histogram); target ≥ ${TARGET_ENROLLMENTS_PER_S}/s\n`,
  );
  console.log(
    resultsTable(enrollmentSummary, 2, ({ scenario, rps: rate }) =>
      !scenario.enrollment
        ? '—'
        : rate >= TARGET_ENROLLMENTS_PER_S
          ? 'met'
          : `NOT met (${((100 * rate) / TARGET_ENROLLMENTS_PER_S).toFixed(0)}% of target)`,
    ),
  );
  console.log(
    `\nWall time per round: ${enrollmentRounds.map((round) => `${round.activeSeconds.toFixed(2)} s`).join(', ')}; the feed ` +
      `(outbox → NATS → notification, one feed item per device) caught up ` +
      `${enrollmentRounds.map((round) => `${round.feedLagS.toFixed(1)} s`).join(', ')} after the last answer ` +
      `(the outbox relay had published every event after ${enrollmentRounds.map((round) => `${round.outboxLagS.toFixed(1)} s`).join(', ')}).`,
  );
  console.log(`Checks (every round): ${enrollmentRounds[0]?.checks ?? ''}`);

  const enrollmentColumns: CpuColumn[] = [
    {
      name: 'enrollment run',
      // CPU per enrollment over the whole window, which ends when autocannon notices the end (≤ 1 s after the last answer).
      runs: enrollmentRounds.map((round) => ({ ...round, opsPerSecond: n / round.seconds })),
    },
    {
      name: 'run + until the feed caught up',
      runs: enrollmentRounds.map((round) => round.whole),
    },
  ];
  console.log(
    '\nCPU during the enrollment runs (mean of rounds; % of one core, the machine has ' +
      `${cores * 100}%; µs of CPU per enrollment; kernel share; "runq": time the main thread was ready to run ` +
      'but waited for a CPU, % of wall time):\n',
  );
  console.log(cpuTable(enrollmentColumns));
  const perEnrollment = (column: CpuColumn) => meanCpuPerOperation(column, 'all benchmark processes');
  const [runColumn, wholeColumn] = enrollmentColumns as [CpuColumn, CpuColumn];
  const gatewayPer = meanCpuPerOperation(runColumn, 'gateway');
  const enrollmentPer = meanCpuPerOperation(runColumn, 'enrollment');
  console.log(
    `\nCeiling implied by the CPU cost per enrollment (${cores} × 10⁶ µs / µs per enrollment, all benchmark processes): ` +
      `during the run ${perEnrollment(runColumn).toFixed(0)} µs → ~${((cores * 1e6) / perEnrollment(runColumn)).toFixed(0)}/s; ` +
      `including the feed ${perEnrollment(wholeColumn).toFixed(0)} µs → ~${((cores * 1e6) / perEnrollment(wholeColumn)).toFixed(0)}/s; ` +
      `the gateway alone (one core) → ~${(1e6 / gatewayPer).toFixed(0)}/s; the enrollment service alone → ~${(1e6 / enrollmentPer).toFixed(0)}/s`,
  );
  console.log(
    `PostgreSQL work per enrollment (run + feed, all schemas): ${mean(enrollmentRounds.map((round) => round.pg.transactions)).toFixed(2)} transactions, ` +
      `${mean(enrollmentRounds.map((round) => round.pg.rowsRead)).toFixed(1)} rows read, ` +
      `${mean(enrollmentRounds.map((round) => round.pg.rowsWritten)).toFixed(2)} rows written`,
  );

  // Device list.
  const summary = summarize(scenarios, measurements);
  console.log(
    `\nDevice list of an organization with ${n} devices, admin token: medians of ${options.rounds} rounds; ` +
      `closed loop at ${options.connections} connections` +
      (options['light-connections'] > 0 ? ` (and ${options['light-connections']} where marked)` : '') +
      `, open loop where marked "offered" (fixed intervals, ≤ ${options.connections} connections, latency from ` +
      `the due time); ${options.duration} s per measured run; exact latencies; target p99 < ${TARGET_LIST_P99_MS} ms, ` +
      `judged at ${options.rate} requests/s offered (docs/decisions.md)\n`,
  );
  const verdict = (scenario: Scenario, p99: number) => {
    if (!scenario.list) return '—';
    const below = p99 < TARGET_LIST_P99_MS;
    if (scenario.offeredRate === options.rate)
      return below ? 'met' : `NOT met (p99 ≥ ${TARGET_LIST_P99_MS} ms)`;
    return below ? `(p99 < ${TARGET_LIST_P99_MS} ms)` : `(p99 ≥ ${TARGET_LIST_P99_MS} ms)`;
  };
  console.log(resultsTable(summary, 2, ({ scenario, p99 }) => verdict(scenario, p99)));
  const heavy = summary.filter(({ scenario }) => isHeavy(scenario, options));
  const listColumns: CpuColumn[] = heavy.map(({ scenario, runs }) => ({
    name: scenario.name,
    runs: runs.map((run) => ({ ...run, opsPerSecond: run.rps })),
  }));
  console.log(
    `\nCPU during the measured device-list runs at ${options.connections} connections (mean of rounds; as above, µs of CPU per request):\n`,
  );
  console.log(cpuTable(listColumns));
  console.log(
    '\nCeiling implied by the CPU cost per request (all benchmark processes; the gateway and enrollment alone):',
  );
  const ceilings = ceilingLines(listColumns, 34, (column) => {
    const gateway = meanCpuPerOperation(column, 'gateway');
    const enrollment = meanCpuPerOperation(column, 'enrollment');
    return gateway > 1
      ? `; gateway ${gateway.toFixed(0)} µs → ~${(1e6 / gateway).toFixed(0)}; enrollment ${enrollment.toFixed(0)} µs → ~${(1e6 / enrollment).toFixed(0)}`
      : '';
  });
  for (const line of ceilings) console.log(line);
  console.log('\nPostgreSQL work per request (pg_stat_database, mean of rounds):');
  for (const { scenario, runs } of heavy.filter((entry) => entry.scenario.list)) {
    console.log(
      `  ${scenario.name.padEnd(44)} ${mean(runs.map((run) => run.pg.transactions)).toFixed(2)} transactions, ` +
        `${mean(runs.map((run) => run.pg.rowsRead)).toFixed(1)} rows read; enrollment.devices: ` +
        `${mean(runs.map((run) => run.devicesTable.indexScans)).toFixed(2)} index scans fetching ` +
        `${mean(runs.map((run) => run.devicesTable.indexRows)).toFixed(1)} rows, ` +
        `${mean(runs.map((run) => run.devicesTable.seqScans)).toFixed(2)} sequential scans reading ` +
        `${mean(runs.map((run) => run.devicesTable.seqRows)).toFixed(1)} rows`,
    );
  }
}

runBenchmark(main);
