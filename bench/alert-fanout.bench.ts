/**
 * Alert fan-out benchmark (`npm run bench:alerts [-- options]`), not a test.
 *
 * Every service in its own process as in production; 10 organizations with 10 alert endpoints each
 * (100 endpoints, registered through the API) on local HTTPS receivers with a CA of their own. One
 * endpoint of the hundred never answers (every attempt runs into ALERT_ATTEMPT_TIMEOUT_MS). The
 * benchmark publishes `threat.detected` events, as the analytics service does, at a fixed rate spread
 * over the organizations, and measures at the receivers:
 * - deliveries/s to the 99 answering endpoints: messages, divided by the time from the first event
 *   until the last of them arrived;
 * - latency from an event's publication to the first attempt at each endpoint (p50, p99), for the
 *   answering endpoints;
 * - the check: every answering endpoint got every alert of its organization exactly once, with a valid
 *   signature (standardwebhooks, the reference library);
 * - the baseline, same run: the same signed bodies POSTed by this process straight to the receivers
 *   over kept connections, as the service's sender does, 32 at a time.
 *
 * Options (flag or environment variable):
 *   --alerts N     BENCH_ALERTS     threat.detected events in all (1000)
 *   --rate N       BENCH_RATE       deliveries per second offered: events/s × 10 endpoints (500)
 *   --baseline N   BENCH_BASELINE   POSTs of the baseline (2000)
 * Exit code 0 when the measurement completed (whether or not the target is met), 1 on any error.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { newEnvelope } from '@sts/events/event-envelope';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { signedHeaders } from '@sts/notification-domain/alert-delivery-policy';
import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
} from '@sts/stand-ins/https-receiver';
import {
  DatabaseMonitor,
  call,
  cpuTable,
  cpuWindow,
  expectStatus,
  machineDescription,
  parseOptions,
  percentile,
  runBenchmark,
  startSystem,
} from './bench-harness';

const options = parseOptions(
  process.argv.slice(2),
  process.env,
  {
    alerts: { variable: 'BENCH_ALERTS', fallback: 1_000, min: 10 },
    rate: { variable: 'BENCH_RATE', fallback: 500, min: 10 },
    baseline: { variable: 'BENCH_BASELINE', fallback: 2_000, min: 100 },
  },
  {},
);

const ORGANIZATIONS = 10;
const ENDPOINTS_PER_ORGANIZATION = 10;
const RECEIVERS = 4;
const SILENT_PATH = '/org-0/endpoint-0';

runBenchmark(async (lifecycle) => {
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${options.alerts} alerts over ${ORGANIZATIONS} organizations × ${ENDPOINTS_PER_ORGANIZATION} endpoints, ` +
      `${options.rate} deliveries/s offered; endpoint ${SILENT_PATH} never answers`,
  );
  const ca = await testCertificateAuthority();
  const receivers: HttpsReceiver[] = [];
  for (let i = 0; i < RECEIVERS; i++) {
    const receiver = await startHttpsReceiver(ca);
    receiver.behave((received) => (received.path === SILENT_PATH ? 'never-answer' : { status: 204 }));
    lifecycle.add(`receiver ${i}`, () => receiver.close());
    receivers.push(receiver);
  }
  const caDir = await mkdtemp(join(tmpdir(), 'sts-bench-ca-'));
  lifecycle.add('ca file', () => rm(caDir, { recursive: true, force: true }));
  await writeFile(join(caDir, 'ca.pem'), ca.certPem);

  const system = await startSystem(lifecycle, {
    notificationEnv: { ALERT_ALLOW_PRIVATE_NETWORKS: 'true', ALERT_EXTRA_CA_FILE: join(caDir, 'ca.pem') },
  });
  const monitor = await DatabaseMonitor.connect(lifecycle, system.database.url);

  // Organizations (an admin's first login creates one) and their endpoints, through the API.
  const orgs: { orgId: string; secrets: Map<string, string> }[] = [];
  for (let o = 0; o < ORGANIZATIONS; o++) {
    const admin = await system.idp.issueUserToken({ email: `admin-${o}@alerts.bench`, name: `Admin ${o}` });
    const session = await call<{ org: { id: string } }>(system.gatewayUrl, 'GET', '/api/session', admin);
    expectStatus('session', session, 200);
    const secrets = new Map<string, string>();
    for (let e = 0; e < ENDPOINTS_PER_ORGANIZATION; e++) {
      const path = `/org-${o}/endpoint-${e}`;
      const receiver = receivers[(o * ENDPOINTS_PER_ORGANIZATION + e) % RECEIVERS]!;
      const created = await call<{ secret: string }>(
        system.gatewayUrl,
        'POST',
        '/api/org-alert-endpoints',
        admin,
        {
          url: `${receiver.url}${path}`,
        },
      );
      expectStatus('alert endpoint', created, 201);
      secrets.set(path, created.body.secret);
    }
    orgs.push({ orgId: session.body.org.id, secrets });
  }
  console.log(`registered ${ORGANIZATIONS * ENDPOINTS_PER_ORGANIZATION} endpoints`);

  // Baseline: the same kind of signed body, straight from here to the receivers, 32 at a time.
  const baselineAgent = new Agent({ keepAlive: true, ca: ca.certPem });
  lifecycle.add('baseline agent', () => baselineAgent.destroy());
  const baselineBody = JSON.stringify({
    id: randomUUID(),
    type: 'alert.test',
    created_at: new Date().toISOString(),
    data: {},
  });
  const baselineSecret = orgs[0]!.secrets.get('/org-0/endpoint-1')!;
  let baselineSent = 0;
  const baselineStart = performance.now();
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (baselineSent < options.baseline) {
        const index = baselineSent++;
        const receiver = receivers[index % RECEIVERS]!;
        await new Promise<void>((resolve, reject) => {
          const outgoing = request(
            `${receiver.url}/baseline`,
            {
              method: 'POST',
              headers: signedHeaders(`msg_${index}`, baselineBody, [baselineSecret], new Date()),
              agent: baselineAgent,
            },
            (response) => {
              response.resume();
              response.once('end', () => resolve());
            },
          );
          outgoing.once('error', reject);
          outgoing.end(baselineBody);
        });
      }
    }),
  );
  const baselineRate = options.baseline / ((performance.now() - baselineStart) / 1000);
  console.log(
    `baseline: ${options.baseline} signed POSTs straight to the receivers → ${baselineRate.toFixed(0)}/s`,
  );
  for (const receiver of receivers) receiver.requests.length = 0;

  // Load: events at fixed intervals, round-robin over the organizations.
  const logger = createLogger('bench', 'silent');
  const nats = await connectJetStream({ url: system.nats.url, name: 'bench-alerts', logger });
  lifecycle.add('bench nats', () => nats.close());
  const publish = createEventPublisher(nats.js, system.nats.namespace);
  const eventsPerSecond = options.rate / ENDPOINTS_PER_ORGANIZATION;
  const publishedAt = new Map<string, number>();
  const before = await monitor.snapshot();
  const start = performance.now();
  for (let i = 0; i < options.alerts; i++) {
    const due = start + (i * 1000) / eventsPerSecond;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const org = orgs[i % ORGANIZATIONS]!;
    const event = newEnvelope('threat.detected', {
      org_id: org.orgId,
      device_id: randomUUID(),
      hostname: `host-${i}`,
      dangerous_blocks: 5,
      window_minutes: 10,
      detected_at: new Date().toISOString(),
    });
    publishedAt.set(event.id, performance.now());
    await publish(event);
  }
  const expected = options.alerts * ENDPOINTS_PER_ORGANIZATION - Math.ceil(options.alerts / ORGANIZATIONS);
  const answered = () =>
    receivers.flatMap((receiver) => receiver.requests).filter((received) => received.path !== SILENT_PATH);
  while (
    answered().length < expected &&
    performance.now() - start < (options.alerts / eventsPerSecond + 120) * 1000
  ) {
    await sleep(100);
  }
  const received = answered();
  const lastAt = Math.max(...received.map((r) => r.at));
  const cpu = cpuWindow(before, await monitor.snapshot());

  // Checks: once per endpoint and alert, valid signatures; latency from publication (wall clock at the receiver).
  const wallOffset = Date.now() - performance.now();
  const latencies: number[] = [];
  const seen = new Set<string>();
  let duplicates = 0;
  for (const r of received) {
    const [, orgPart] = /^\/org-(\d+)\//.exec(r.path) ?? [];
    const secret = orgs[Number(orgPart)]?.secrets.get(r.path);
    if (!secret) throw new Error(`a delivery to an unknown path ${r.path}`);
    const payload = new Webhook(secret).verify(r.body, {
      'webhook-id': String(r.headers['webhook-id']),
      'webhook-timestamp': String(r.headers['webhook-timestamp']),
      'webhook-signature': String(r.headers['webhook-signature']),
    }) as { id: string };
    const key = `${r.path}|${payload.id}`;
    if (seen.has(key)) duplicates++;
    seen.add(key);
    latencies.push(r.at - wallOffset - publishedAt.get(payload.id)!);
  }
  latencies.sort((a, b) => a - b);
  const silent = receivers
    .flatMap((receiver) => receiver.requests)
    .filter((r) => r.path === SILENT_PATH).length;
  const seconds = (lastAt - wallOffset - start) / 1000;
  const rate = received.length / seconds;

  console.log('');
  console.log(
    `published ${options.alerts} alerts over ${(options.alerts / eventsPerSecond).toFixed(1)} s (${options.rate} deliveries/s offered)`,
  );
  console.log(
    `delivered ${received.length} of ${expected} to the answering endpoints in ${seconds.toFixed(1)} s → ${rate.toFixed(0)} deliveries/s; ` +
      `${(rate / baselineRate).toFixed(2)}× the baseline (${baselineRate.toFixed(0)}/s)`,
  );
  console.log(
    `publication → first attempt: p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms, max ${latencies.at(-1)?.toFixed(0)} ms`,
  );
  console.log(`the silent endpoint was tried ${silent} times meanwhile (each attempt waits for the timeout)`);
  console.log(
    `check: ${duplicates === 0 && received.length === expected ? 'every alert once per answering endpoint, signatures valid' : `${duplicates} duplicates, ${received.length} of ${expected}`}`,
  );
  console.log('\nCPU during the run (% of one core · µs of CPU per delivery):\n');
  console.log(cpuTable([{ name: 'fan-out', runs: [{ ...cpu, opsPerSecond: rate }] }], 'delivery'));
  if (duplicates > 0 || received.length !== expected) throw new Error('the delivery check failed');
});
