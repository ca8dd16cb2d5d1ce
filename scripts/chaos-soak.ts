/**
 * `npm run chaos:soak -- [--rounds 20] [--restarts 0] [--seed 1]`: the whole system under
 * `STS_CLUSTER=1 npm start`, while its cluster's nodes die. Not part of `npm test` (it takes the machine's
 * ports 8080, 4224–4226 and the shared ClickHouse cluster for several minutes).
 *
 * Each round picks a node (the first three one of each kind, then at random: a ClickHouse replica,
 * ZooKeeper, or one of npm start's three NATS nodes), SIGKILLs it while the devices send telemetry through the gateway (each batch retried with its
 * own id until the gateway takes it, as the agent does), and waits for npm start's supervisor to bring the
 * node back by itself: nothing here starts it. Then `--restarts` times, npm start is stopped with SIGINT (as
 * Ctrl-C) and started again, and must come up with its data. It ends with an exact reconciliation: the
 * summary counts every event sent once, and every node answers. It prints each round: the node, how long it
 * took to come back, and the repairs the supervisor reported (a ClickHouse replica that refused to start,
 * parts moved aside). Exits 1 when anything does not hold.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs, promisify } from 'node:util';
import { clickhouseNodeUrl, localCluster } from '@sts/testing/local-cluster';
import { portOpen } from '@sts/testing/service-process';
import { seededRandom } from '../apps/agent/src/simulated-traffic';

const ROOT = resolve(__dirname, '..');
const LOG_DIR = resolve(ROOT, '.dev/logs');
const SERVER = 'http://localhost:8080';
const NATS_PORTS = [4224, 4225, 4226];
const DEVICES = 4;
const BATCHES_PER_ROUND = 3;
const EVENTS_PER_BATCH = 5;
const run = promisify(execFile);
/** What cluster-node.sh prints when it had to repair a ClickHouse replica (scripts/infra/cluster-nodes.sh). */
const REPAIR = /refused to start|moved aside|DDL worker has stopped|exited while starting/;

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    restarts: { type: 'string', default: '0' },
    seed: { type: 'string', default: String(Date.now() % 100_000) },
  },
});
const rounds = Number(values.rounds);
const restarts = Number(values.restarts);
const seed = Number(values.seed);
const random = seededRandom(seed);

/** Prints a line and appends it to the soak's own log. */
function say(line: string): void {
  console.log(line);
  appendFileSync(resolve(LOG_DIR, 'chaos-soak.log'), `${new Date().toISOString()} ${line}\n`);
}

/** `STS_CLUSTER=1 npm start` (scripts/start.sh), its output kept for the supervisor's lines. */
class NpmStart {
  readonly output: string[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;

  constructor() {
    this.child = spawn('bash', ['scripts/start.sh'], {
      cwd: ROOT,
      env: { ...process.env, STS_CLUSTER: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        this.output.push(line);
        appendFileSync(resolve(LOG_DIR, 'chaos-soak-npm-start.log'), `${line}\n`);
      }
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.exited = new Promise((done) => this.child.once('exit', (code) => done(code)));
  }

  async up(timeoutMs = 600_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let ended = false;
    void this.exited.then(() => (ended = true));
    while (!this.output.some((line) => line.includes('Security telemetry service is up'))) {
      if (ended) throw new Error(`npm start exited before it was up:\n${this.output.slice(-30).join('\n')}`);
      if (Date.now() > deadline) throw new Error(`npm start was not up within ${timeoutMs / 1000} s`);
      await sleep(500);
    }
  }

  /** As Ctrl-C: SIGINT to the supervisor, which stops every child. */
  async stop(): Promise<void> {
    this.child.kill('SIGINT');
    await this.exited;
  }
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await probe().catch(() => false)) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await sleep(250);
  }
}

async function api<T>(
  method: string,
  path: string,
  init: { token?: string; device?: string; body?: unknown } = {},
) {
  const response = await fetch(`${SERVER}${path}`, {
    method,
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.device ? { 'x-device-token': init.device } : {}),
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
}

const clusterNode = async (action: 'kill' | 'status', node: string) =>
  run('bash', ['scripts/infra/cluster-node.sh', action, node], { cwd: ROOT }).then(
    ({ stdout }) => stdout.trim(),
    (error: { stdout?: string }) => (error.stdout ?? '').trim(),
  );

/** The nodes a round may kill: the shared cluster's ClickHouse replicas and ZooKeeper, npm start's NATS nodes. */
function killableNodes(): string[] {
  return [
    ...localCluster().clickhouse.nodes.map((node) => node.name),
    'zookeeper',
    'nats-n1',
    'nats-n2',
    'nats-n3',
  ];
}

/** SIGKILLs one node; npm start's NATS nodes are found by their config file on the command line. */
async function kill(node: string): Promise<void> {
  if (!node.startsWith('nats-')) {
    await clusterNode('kill', node);
    return;
  }
  const config = resolve(ROOT, `.dev/nats-cluster/${node.slice('nats-'.length)}.conf`);
  const { stdout } = await run('pgrep', ['-f', `nats-server -c ${config}`]);
  for (const pid of stdout.split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
}

/** Whether the node answers again: ClickHouse SELECT 1, ZooKeeper running, a NATS node's client port. */
async function answers(node: string): Promise<boolean> {
  if (node.startsWith('nats-')) return portOpen(NATS_PORTS[Number(node.slice('nats-n'.length)) - 1]!);
  if (node === 'zookeeper') return (await clusterNode('status', node)) === 'running';
  const response = await fetch(`${clickhouseNodeUrl(node)}/?query=SELECT%201`, {
    signal: AbortSignal.timeout(3_000),
  });
  return (await response.text()).trim() === '1';
}

/** The npm start now running, stopped whatever happens. */
let system: NpmStart | undefined;

async function main(): Promise<void> {
  mkdirSync(LOG_DIR, { recursive: true });
  if (await portOpen(8080)) throw new Error('something already listens on 8080: stop npm start first');
  say(`chaos soak: ${rounds} rounds, ${restarts} restarts, seed ${seed}`);
  system = new NpmStart();
  await system.up();
  const email = `chaos-${Date.now().toString(36)}@soak.test`;
  const { stdout: token } = await run(
    process.execPath,
    ['--import', 'tsx', 'apps/dev-idp/src/cli.ts', 'token', email],
    {
      cwd: ROOT,
    },
  );
  const admin = token.trim();
  if ((await api('GET', '/api/session', { token: admin })).status !== 200)
    throw new Error('the token is refused');
  const key = (await api<{ key: string }>('POST', '/api/enrollment-key', { token: admin })).body.key;
  const { codes } = (
    await api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
      token: admin,
      body: { count: DEVICES },
    })
  ).body;
  const devices: string[] = [];
  for (const [i, { code }] of codes.entries()) {
    const response = await fetch(`${SERVER}/api/device/enroll`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-enrollment-key': key },
      body: JSON.stringify({ code, machine_id: `${email}-machine-${i}`, hostname: `chaos-${i}` }),
    });
    devices.push(((await response.json()) as { device_token: string }).device_token);
  }

  let sent = 0;
  /** One batch, sent until the gateway takes it (202), with the same id each time, as the agent retries. */
  const report = async (device: string, batchId: string) => {
    const body = {
      batch_id: batchId,
      events: Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({
        observed_at: new Date(Date.now() - 60_000 - i).toISOString(),
        url: `https://site-${i}.soak.test/`,
        verdict: i === 0 ? 'blocked' : 'allowed',
        classification_ms: 3,
      })),
    };
    await until(
      `batch ${batchId} taken`,
      async () => (await api('POST', '/api/device/telemetry', { device, body })).status === 202,
      300_000,
    );
    sent += EVENTS_PER_BATCH;
  };

  const nodes = killableNodes();
  const repairsBefore = readLog('cluster-nodes.log').length;
  const results: { round: number; node: string; backMs: number; repairs: string[] }[] = [];
  for (let round = 1; round <= rounds; round++) {
    // The first three rounds take one node of each kind; the rest are drawn.
    const node =
      [nodes[Math.floor(random() * 4)]!, 'zookeeper', `nats-n${1 + Math.floor(random() * 3)}`][round - 1] ??
      nodes[Math.floor(random() * nodes.length)]!;
    const from = system.output.length;
    const repairsLogged = readLog('cluster-nodes.log').length;
    const ingest = (batch: number) =>
      Promise.all(devices.map((device, d) => report(device, `r${round}-d${d}-b${batch}`)));
    await ingest(0);
    await kill(node);
    const killedAt = Date.now();
    for (let batch = 1; batch < BATCHES_PER_ROUND; batch++) await ingest(batch);
    await until(`${node} back (round ${round})`, () => answers(node), 300_000);
    const repairs = [
      ...system.output
        .slice(from)
        .filter((line) => / exited| is down|DDL worker|started .* again/.test(line)),
      ...readLog('cluster-nodes.log')
        .slice(repairsLogged)
        .filter((line) => REPAIR.test(line)),
    ];
    results.push({ round, node, backMs: Date.now() - killedAt, repairs });
    say(
      `round ${round}: killed ${node}; back after ${((Date.now() - killedAt) / 1000).toFixed(1)} s; ${repairs.join(' | ') || 'no lines'}`,
    );
  }

  const summary = async () =>
    (await api<{ total_analyzed: number }>('GET', '/api/analytics/summary?window=24h', { token: admin })).body
      .total_analyzed;
  const reconcile = async (when: string) => {
    await until(
      `the summary counts ${sent} events ${when}`,
      async () => (await summary()) === sent,
      300_000,
    ).catch(async (error: Error) => {
      throw new Error(`${error.message}: it counts ${await summary().catch(() => 'nothing')}`);
    });
    // Settled: nothing more arrives (a batch counted twice would show now).
    await sleep(5_000);
    const counted = await summary();
    if (counted !== sent) throw new Error(`${when}: the summary counts ${counted} of ${sent} events`);
    say(`reconciled ${when}: ${counted} of ${sent} events, each once`);
  };
  await reconcile('after the rounds');

  for (let restart = 1; restart <= restarts; restart++) {
    await system.stop();
    system = new NpmStart();
    const started = Date.now();
    await system.up();
    say(`restart ${restart}: up again after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await reconcile(`after restart ${restart}`);
  }

  for (const node of nodes) {
    if (!(await answers(node))) throw new Error(`${node} does not answer at the end`);
  }
  say(`every node answers: ${nodes.join(', ')}`);
  const repaired = results.filter((result) => result.repairs.some((line) => REPAIR.test(line)));
  say(
    `rounds needing a repair: ${repaired.length} of ${results.length}` +
      (repaired.length
        ? ` (${repaired.map((result) => `round ${result.round} ${result.node}`).join(', ')})`
        : ''),
  );
  // A repair may come after its round (a DDL worker found stopped a few seconds later): all of the soak's.
  const allRepairs = readLog('cluster-nodes.log')
    .slice(repairsBefore)
    .filter((line) => REPAIR.test(line));
  say(
    `repairs during the whole soak: ${allRepairs.length}${allRepairs.length ? `: ${allRepairs.join(' | ')}` : ''}`,
  );
  const back = results.map((result) => result.backMs).sort((a, b) => a - b);
  if (back.length)
    say(
      `back after a kill: median ${(back[Math.floor(back.length / 2)]! / 1000).toFixed(1)} s, max ${(back.at(-1)! / 1000).toFixed(1)} s`,
    );
}

function readLog(name: string): string[] {
  try {
    return readFileSync(resolve(LOG_DIR, name), 'utf8').split('\n');
  } catch {
    return [];
  }
}

main().then(
  async () => {
    await system?.stop();
    say('chaos soak: passed');
  },
  async (error: unknown) => {
    say(`chaos soak: FAILED: ${error instanceof Error ? error.message : String(error)}`);
    await system?.stop();
    process.exit(1);
  },
);
