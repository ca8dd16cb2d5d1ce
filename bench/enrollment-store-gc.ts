/**
 * What the enrollment service's listing path leaves to the young-generation collector, a diagnostic, not a
 * target (`npx tsx bench/enrollment-store-gc.ts`, docs/decisions.md "Platform"). A fresh database holds an
 * organization of 5,000 devices; for each mode a child process (the services' Node flags, plus
 * `--trace-gc-nvp`) asks for the first page of 50 with 64 calls in flight for 10 s (a burst to saturation, as in
 * the full benchmark), then as an open loop at 500 pages/s for 8 s, and reports over the open loop: bytes the
 * scavenges promoted, their pauses, and p50/p99 of the calls. Modes:
 * - `execute`, the baseline: the page's SQL straight through MikroORM's connection, rows left as they come;
 * - `store`: `MikroEnrollmentStore.read → listDevices`, as the service runs it (rows mapped to ListedDevice).
 * The gap between the two is what our own code adds (a per-row hidden class made it ~30× the baseline).
 */
import { spawn } from 'node:child_process';
import { createLogger } from '@sts/logger/create-logger';
import { createServiceOrm, migrateToLatest } from '@sts/db/service-orm';
import { ENROLLMENT_MIGRATIONS, ENROLLMENT_SCHEMA } from '@sts/enrollment-infra/enrollment-migrations';
import { listDevicesQuery, MikroEnrollmentStore } from '@sts/enrollment-infra/mikro-enrollment-store';
import { createTestDatabase } from '@sts/testing/postgres';
import { percentile, SERVICE_NODE_FLAGS } from './bench-harness';
import { traceGcNvpField } from './gc-pauses';

const ORG = '11111111-1111-4111-8111-111111111111';
const DEVICES = 5_000;
const MODES = ['execute', 'store'] as const;
type Mode = (typeof MODES)[number];

async function child(mode: Mode, databaseUrl: string): Promise<void> {
  const logger = createLogger('enrollment-store-gc', 'silent');
  const orm = await createServiceOrm({
    databaseUrl,
    schema: ENROLLMENT_SCHEMA,
    entities: [],
    migrations: [],
    logger,
  });
  const store = new MikroEnrollmentStore(orm);
  const connection = orm.em.getConnection();
  const page = { limit: 50, after: null };
  const allDevices = { status: null, query: null };
  const listPage = (): Promise<unknown> => {
    if (mode === 'store')
      return store.read((repositories) => repositories.listDevices(ORG, allDevices, page));
    const { sql, params } = listDevicesQuery(ORG, allDevices, page);
    return connection.execute(sql, params, 'all');
  };
  const burstEnd = Date.now() + 10_000;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (Date.now() < burstEnd) await listPage();
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  console.log('OPEN-LOOP start');
  const latencies: number[] = [];
  const pending: Promise<unknown>[] = [];
  const started = performance.now();
  // Five calls every 10 ms, each timed from when it was due.
  for (let tick = 0; tick < 800; tick += 1) {
    const due = started + tick * 10;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    for (let i = 0; i < 5; i += 1)
      pending.push(listPage().then(() => latencies.push(performance.now() - due)));
  }
  await Promise.all(pending);
  console.log('OPEN-LOOP end');
  latencies.sort((a, b) => a - b);
  console.log(
    `LATENCY ${percentile(latencies, 50).toFixed(2)} ${percentile(latencies, 99).toFixed(2)} ${latencies.length}`,
  );
  await orm.close();
}

async function seed(databaseUrl: string): Promise<void> {
  const logger = createLogger('enrollment-store-gc', 'silent');
  const orm = await createServiceOrm({
    databaseUrl,
    schema: ENROLLMENT_SCHEMA,
    entities: [],
    migrations: ENROLLMENT_MIGRATIONS,
    logger,
  });
  await migrateToLatest(orm, logger);
  const connection = orm.em.getConnection();
  await connection.execute(
    `insert into enrollment.devices (id, org_id, machine_id, hostname, status, metadata, token_hash, enrolled_at, last_seen_at)
     select gen_random_uuid(), ?, 'machine-' || i, 'ws-' || lpad(i::text, 4, '0'), 'active',
            jsonb_build_object('os', 'linux', 'arch', 'x64', 'agent_version', '1.4.2'),
            lpad(to_hex(i), 64, '0'), now() - make_interval(secs => i), now()
     from generate_series(1, ?) i`,
    [ORG, DEVICES],
  );
  await connection.execute('analyze enrollment.devices');
  await orm.close();
}

interface ModeFigures {
  scavenges: number;
  promotedMb: number;
  pausesMs: number[];
  p50: number;
  p99: number;
}

function runMode(mode: Mode, databaseUrl: string): Promise<ModeFigures> {
  const childProcess = spawn(
    process.execPath,
    [...SERVICE_NODE_FLAGS, '--trace-gc-nvp', '--import', 'tsx', __filename, '--child', mode, databaseUrl],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let output = '';
  childProcess.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return new Promise((resolve, reject) =>
    childProcess.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${mode}: child exited with ${code}`));
      const figures: ModeFigures = { scavenges: 0, promotedMb: 0, pausesMs: [], p50: NaN, p99: NaN };
      let inOpenLoop = false;
      for (const line of output.split('\n')) {
        if (line.startsWith('OPEN-LOOP')) inOpenLoop = line.endsWith('start');
        if (line.startsWith('LATENCY')) {
          const [, p50, p99] = line.split(' ').map(Number);
          figures.p50 = p50 ?? NaN;
          figures.p99 = p99 ?? NaN;
        }
        if (!inOpenLoop || !line.includes('gc=s ')) continue;
        figures.scavenges += 1;
        figures.promotedMb += traceGcNvpField(line, 'promoted') / 1e6;
        figures.pausesMs.push(traceGcNvpField(line, 'pause'));
      }
      resolve(figures);
    }),
  );
}

async function main(): Promise<void> {
  const database = await createTestDatabase('storegc');
  try {
    await seed(database.url);
    console.log(
      `${DEVICES} devices; per mode: 10 s at 64 in flight, then 8 s at 500 pages/s (figures below)`,
    );
    for (const mode of MODES) {
      const f = await runMode(mode, database.url);
      const pauses = [...f.pausesMs].sort((a, b) => a - b);
      console.log(
        `${mode.padEnd(8)} ${f.scavenges} scavenges, ${f.promotedMb.toFixed(1)} MB promoted, pauses median ` +
          `${percentile(pauses, 50).toFixed(1)} ms, max ${(pauses.at(-1) ?? 0).toFixed(1)} ms; ` +
          `calls p50 ${f.p50.toFixed(2)} ms, p99 ${f.p99.toFixed(2)} ms`,
      );
    }
  } finally {
    await database.drop();
  }
}

const [role, childMode, childDatabaseUrl] = process.argv.slice(2);
if (role === '--child' && childDatabaseUrl) void child(childMode as Mode, childDatabaseUrl);
else void main();
