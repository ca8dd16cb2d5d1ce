/**
 * Stripe webhook benchmark (`npm run bench:billing [-- options]`), not a test.
 *
 * Every service in its own process as in production, two gateway processes, and a local stand-in of
 * Stripe's API in this process (billing reads subscriptions from it). 100 organizations check out
 * through the API and pay (the stand-in completes their sessions). Then:
 * - throughput: signed events, each with its own id, POSTed to the gateway by 16 connections as fast as
 *   they are answered: `customer.subscription.updated` (plan changes: a license write and an outbox
 *   event each, no call to Stripe) and `invoice.payment_succeeded` (renewals: billing reads the
 *   subscription from the stand-in first). Every answer must be 2xx.
 * - the baseline, same run: a bare Fastify process that verifies the same signed bodies with Stripe's
 *   `constructEvent` and answers, same connections.
 * - visibility: a plan change POSTed to gateway 1; from its 2xx, GET /api/session is polled every 5 ms
 *   on gateway 1 and on gateway 2 (whose cached license the `billing.updated` event must evict) until
 *   the new plan shows. Goal: p99 ≤ 1 s.
 *
 * Options (flag or environment variable):
 *   --events N    BENCH_EVENTS    events per throughput scenario (3000)
 *   --samples N   BENCH_SAMPLES   visibility samples (200)
 * Exit code 0 when the measurement completed (whether or not the target is met), 1 on any error.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { startStripeStandIn, type StripeEvent } from '@sts/stand-ins/stripe-stand-in';
import {
  call,
  cpuTable,
  cpuWindow,
  type CpuColumn,
  DatabaseMonitor,
  expectStatus,
  machineDescription,
  parseOptions,
  percentile,
  runBenchmark,
  runLoad,
  startSystem,
} from './bench-harness';

const options = parseOptions(
  process.argv.slice(2),
  process.env,
  {
    events: { variable: 'BENCH_EVENTS', fallback: 3_000, min: 100 },
    samples: { variable: 'BENCH_SAMPLES', fallback: 200, min: 10 },
  },
  {},
);

const ORGANIZATIONS = 100;
const CONNECTIONS = 16;
const WEBHOOK_SECRET = `whsec_bench_${randomUUID().replaceAll('-', '')}`;

interface Org {
  orgId: string;
  token: string;
  subscriptionId: string;
}

runBenchmark(async (lifecycle) => {
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${ORGANIZATIONS} organizations, ${options.events} events per scenario over ${CONNECTIONS} connections, ${options.samples} visibility samples`,
  );
  const stripe = await startStripeStandIn();
  lifecycle.add('stripe stand-in', () => stripe.close());
  const system = await startSystem(lifecycle, {
    billingEnv: {
      STRIPE_SECRET_KEY: stripe.apiKey,
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      STRIPE_API_BASE: stripe.url,
    },
    secondGateway: true,
    baselineWebhookSecret: WEBHOOK_SECRET,
  });
  const secondGateway = system.secondGatewayUrl!;
  const monitor = await DatabaseMonitor.connect(lifecycle, system.database.url);
  const deliver = async (base: string, event: StripeEvent) => {
    const { payload, signature } = stripe.signed(event, WEBHOOK_SECRET);
    const response = await fetch(`${base}/api/billing/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
    });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`webhook answered ${response.status}`);
  };

  // Organizations that checked out and paid.
  const orgs: Org[] = [];
  for (let o = 0; o < ORGANIZATIONS; o++) {
    const token = await system.idp.issueUserToken({ email: `admin-${o}@billing.bench`, name: `Admin ${o}` });
    const session = await call<{ org: { id: string } }>(system.gatewayUrl, 'GET', '/api/session', token);
    expectStatus('session', session, 200);
    const started = await call<{ url: string }>(
      system.gatewayUrl,
      'POST',
      '/api/billing/checkout-session',
      token,
      { plan: 'pro', cycle: 'monthly' },
    );
    expectStatus('checkout', started, 200);
    const { session: paid, subscription } = stripe.completeCheckout(started.body.url.split('/').pop()!);
    await deliver(system.gatewayUrl, stripe.event('checkout.session.completed', paid));
    orgs.push({ orgId: session.body.org.id, token, subscriptionId: subscription.id });
  }
  console.log(`${ORGANIZATIONS} organizations checked out and active`);

  // Signed bodies, made before each run (signatures stay valid for 300 s), each event id once.
  let createdSeconds = Math.floor(Date.now() / 1000);
  const planChange = (org: Org, index: number): StripeEvent => {
    const subscription = stripe.updateSubscription(org.subscriptionId, {
      lookupKey: index % 2 === 0 ? 'enterprise_monthly' : 'pro_monthly',
    });
    return stripe.event('customer.subscription.updated', subscription, {
      created: new Date(++createdSeconds * 1000),
    });
  };
  const renewal = (org: Org): StripeEvent => {
    const current = stripe.subscriptions.get(org.subscriptionId)!;
    const periodEnd = current.items.data[0]!.current_period_end;
    stripe.updateSubscription(org.subscriptionId, {
      currentPeriodEnd: new Date((periodEnd + 86_400) * 1000),
    });
    return stripe.event(
      'invoice.payment_succeeded',
      stripe.createInvoice(org.subscriptionId, { paid: true }),
    );
  };
  const signedBodies = (make: (index: number) => StripeEvent) =>
    Array.from({ length: options.events }, (_, index) => stripe.signed(make(index), WEBHOOK_SECRET));
  /** One request whose body is the next unsent event, whichever connection sends it. */
  const queue = (bodies: { payload: string; signature: string }[], path: string): autocannon.Request[] => {
    let next = 0;
    return [
      {
        method: 'POST',
        path,
        setupRequest: (request) => {
          const body = bodies[next++ % bodies.length]!;
          return Object.assign(request, {
            headers: { 'content-type': 'application/json', 'stripe-signature': body.signature },
            body: body.payload,
          });
        },
      },
    ];
  };

  const scenarios = [
    {
      name: 'subscription.updated',
      make: (index: number) => planChange(orgs[index % ORGANIZATIONS]!, Math.floor(index / ORGANIZATIONS)),
    },
    { name: 'invoice.payment_succeeded', make: (index: number) => renewal(orgs[index % ORGANIZATIONS]!) },
  ];
  const rows: string[] = [];
  const cpuColumns: CpuColumn[] = [];
  for (const scenario of scenarios) {
    const bodies = signedBodies(scenario.make);
    const baseline = await runLoad({
      name: `baseline ${scenario.name}`,
      url: system.baselineUrl,
      requests: queue(bodies, '/stripe-webhook'),
      connections: CONNECTIONS,
      amount: options.events,
      recordLatencies: true,
    });
    const before = await monitor.snapshot();
    const measured = await runLoad({
      name: scenario.name,
      url: system.gatewayUrl,
      requests: queue(signedBodies(scenario.make), '/api/billing/webhook'),
      connections: CONNECTIONS,
      amount: options.events,
      recordLatencies: true,
    });
    const cpu = cpuWindow(before, await monitor.snapshot());
    const rate = measured.completed / measured.activeSeconds;
    cpuColumns.push({ name: scenario.name, runs: [{ ...cpu, opsPerSecond: rate }] });
    const baselineRate = baseline.completed / baseline.activeSeconds;
    rows.push(
      `| ${scenario.name} | ${rate.toFixed(0)} | ${percentile(measured.latenciesMs, 0.5).toFixed(1)} | ${percentile(measured.latenciesMs, 0.99).toFixed(1)} | ${baselineRate.toFixed(0)} | ${percentile(baseline.latenciesMs, 0.5).toFixed(1)} | ${percentile(baseline.latenciesMs, 0.99).toFixed(1)} | 1/${(baselineRate / rate).toFixed(1)} |`,
    );
  }
  console.log(
    '\n| events | webhooks/s | p50 ms | p99 ms | baseline/s | baseline p50 | baseline p99 | ratio |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const row of rows) console.log(row);
  console.log(`\nCPU per webhook:\n${cpuTable(cpuColumns, 'webhook')}`);

  // Visibility: from the webhook's 2xx on gateway 1 to the new plan in GET /api/session on each gateway.
  const visible = { first: [] as number[], second: [] as number[] };
  for (let sample = 0; sample < options.samples; sample++) {
    const org = orgs[sample % ORGANIZATIONS]!;
    const target = sample % 2 === 0 ? 'enterprise' : 'pro';
    const event = planChange(org, target === 'enterprise' ? 0 : 1);
    // Both gateways hold the old license in their caches (LICENSE_CACHE_TTL_MS, 5 s by default).
    for (const base of [system.gatewayUrl, secondGateway]) {
      expectStatus('session', await call(base, 'GET', '/api/session', org.token), 200);
    }
    await deliver(system.gatewayUrl, event);
    const answeredAt = performance.now();
    const waitFor = async (base: string) => {
      for (;;) {
        const session = await call<{ license: { plan: string } }>(base, 'GET', '/api/session', org.token);
        if (session.body.license.plan === target) return performance.now() - answeredAt;
        if (performance.now() - answeredAt > 10_000)
          throw new Error(`license not visible on ${base} after 10 s`);
        await sleep(5);
      }
    };
    const [first, second] = await Promise.all([waitFor(system.gatewayUrl), waitFor(secondGateway)]);
    visible.first.push(first);
    visible.second.push(second);
  }
  const describe = (values: number[]) => {
    const sorted = Float64Array.from(values).sort();
    return `p50 ${percentile(sorted, 0.5).toFixed(1)} ms, p99 ${percentile(sorted, 0.99).toFixed(1)} ms, max ${sorted[sorted.length - 1]!.toFixed(1)} ms`;
  };
  console.log(
    `\nwebhook 2xx → license visible in GET /api/session (${options.samples} samples, goal p99 ≤ 1000 ms):`,
  );
  console.log(`  gateway that took the webhook: ${describe(visible.first)}`);
  console.log(`  other gateway (billing.updated evicts): ${describe(visible.second)}`);
});
