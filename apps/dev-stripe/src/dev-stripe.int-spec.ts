import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startStripeWithHostedPages, type StripeWithHostedPages } from '@sts/stand-ins/stripe-hosted-pages';
import { defaultStripePriceSeeds } from '@sts/stand-ins/stripe-stand-in';
import { eventually } from '@sts/testing/eventually';
import Stripe from 'stripe';

jest.setTimeout(30_000);

const ROOT = join(__dirname, '..', '..', '..');
const MAIN = join(__dirname, 'main.ts');
const SECRET = 'whsec_devstripe_test_secret';
const API_KEY = 'sk_test_devstripe_0123456789';
const NASTY = `<script>alert(1)</script> & "Pro's"`;

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook endpoint: records each request and answers the queued statuses, then 200. */
async function startReceiver() {
  const received: Received[] = [];
  const statuses: number[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      const status = statuses.shift() ?? 200;
      response.writeHead(status, { 'content-type': 'application/json' }).end('{"received":true}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/billing/webhook`,
    received,
    statuses,
    /** The events received, each verified against the secret as billing does. */
    events: () =>
      received.map((request) =>
        Stripe.webhooks.constructEvent(request.body, String(request.headers['stripe-signature']), SECRET),
      ),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The SDK pointed at the peer as billing points it (libs/billing-infra createStripeClient, STRIPE_API_BASE). */
function sdkFor(apiBase: string, apiKey = API_KEY): Stripe {
  const base = new URL(apiBase);
  return new Stripe(apiKey, {
    host: base.hostname,
    port: base.port,
    protocol: base.protocol === 'http:' ? 'http' : 'https',
    maxNetworkRetries: 0,
    telemetry: false,
  });
}

/** The subscription a completed session made (an id: nothing is expanded in events). */
function subscriptionOf(session: Stripe.Checkout.Session): string {
  expect(typeof session.subscription).toBe('string');
  return session.subscription as string;
}

const post = (url: string, form: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });

describe('development Stripe: hosted pages and webhooks', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let peer: StripeWithHostedPages;
  let stripe: Stripe;

  beforeAll(async () => {
    receiver = await startReceiver();
    peer = await startStripeWithHostedPages({
      apiKey: API_KEY,
      prices: [
        ...defaultStripePriceSeeds,
        { lookupKey: 'nasty_monthly', unitAmount: 2900, interval: 'month', productName: NASTY },
      ],
      webhook: { url: receiver.url, secret: SECRET, retryDelaysMs: [20] },
    });
    stripe = sdkFor(peer.standIn.url);
  });

  afterAll(async () => {
    await peer?.close();
    await receiver?.close();
  });

  beforeEach(() => {
    receiver.received.length = 0;
    receiver.statuses.length = 0;
  });

  /** A checkout session created as billing creates one: customer, price by lookup key, return URLs. */
  async function newSession(lookupKey: string) {
    const customer = await stripe.customers.create({
      email: 'admin@acme.test',
      metadata: { org_id: 'org-1' },
    });
    const prices = await stripe.prices.list({ lookup_keys: [lookupKey], active: true });
    const session = await stripe.checkout.sessions.create({
      mode: 'subscription',
      customer: customer.id,
      client_reference_id: 'org-1',
      line_items: [{ price: prices.data[0]!.id, quantity: 1 }],
      success_url: 'http://localhost:8080/billing?checkout=success&session={CHECKOUT_SESSION_ID}',
      cancel_url: 'http://localhost:8080/billing?checkout=cancelled',
    });
    return { customer, session };
  }

  it('shows the checkout page: plan and price, escaped, no script, Pay and Cancel forms', async () => {
    const { session } = await newSession('nasty_monthly');
    expect(session.url).toBe(`${peer.standIn.url}/checkout/${session.id}`);

    const response = await fetch(session.url!);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("form-action 'self' http://localhost:8080");
    const html = await response.text();
    expect(html).not.toMatch(/<script/i);
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Pro&#39;s&quot;');
    expect(html).toContain('$29.00');
    expect(html).toContain('per month');
    expect(html).toContain(`<form method="post" action="/checkout/${session.id}/pay">`);
    expect(html).toContain(`<form method="post" action="/checkout/${session.id}/cancel">`);
    expect(html).toMatch(/>Pay \$29\.00</);
    expect(html).toMatch(/>Cancel</);

    expect((await fetch(`${peer.standIn.url}/checkout/cs_test_unknown`)).status).toBe(404);
    expect((await post(session.url!)).status).toBe(405);
  });

  it('pays: the session completes, a signed checkout.session.completed arrives, then 303 to success_url', async () => {
    const { customer, session } = await newSession('pro_annual');
    const before = Math.floor(Date.now() / 1000);

    const response = await post(`${session.url}/pay`);
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe(
      `http://localhost:8080/billing?checkout=success&session=${session.id}`,
    );

    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0]!.headers['content-type']).toBe('application/json; charset=utf-8');
    const [event] = receiver.events();
    expect(event!.type).toBe('checkout.session.completed');
    const paid = event!.data.object as Stripe.Checkout.Session;
    expect(paid).toMatchObject({
      id: session.id,
      status: 'complete',
      payment_status: 'paid',
      customer: customer.id,
      client_reference_id: 'org-1',
    });
    // Signed with this secret and no other.
    expect(() =>
      Stripe.webhooks.constructEvent(
        receiver.received[0]!.body,
        String(receiver.received[0]!.headers['stripe-signature']),
        'whsec_another',
      ),
    ).toThrow();

    // The subscription billing then reads: active, one year (an annual price).
    const subscription = await stripe.subscriptions.retrieve(subscriptionOf(paid));
    expect(subscription.status).toBe('active');
    const item = subscription.items.data[0]!;
    expect(item.price.lookup_key).toBe('pro_annual');
    const days = (item.current_period_end - item.current_period_start) / 86_400;
    expect(days).toBeGreaterThanOrEqual(365);
    expect(days).toBeLessThanOrEqual(366);
    expect(item.current_period_start).toBeGreaterThanOrEqual(before);

    // Paying again (a second submit) goes on to success_url without a second event.
    const again = await post(`${session.url}/pay`);
    expect(again.status).toBe(303);
    expect(receiver.received).toHaveLength(1);
  });

  it('gives a monthly price a period of one month', async () => {
    const { session } = await newSession('basic_monthly');
    expect((await post(`${session.url}/pay`)).status).toBe(303);
    const paid = receiver.events()[0]!.data.object as Stripe.Checkout.Session;
    const item = (await stripe.subscriptions.retrieve(subscriptionOf(paid))).items.data[0]!;
    const days = (item.current_period_end - item.current_period_start) / 86_400;
    expect(days).toBeGreaterThanOrEqual(28);
    expect(days).toBeLessThanOrEqual(31);
  });

  it('cancels: 303 to cancel_url, no event, the session still open', async () => {
    const { session } = await newSession('basic_monthly');
    const response = await post(`${session.url}/cancel`);
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe('http://localhost:8080/billing?checkout=cancelled');
    expect(receiver.received).toEqual([]);
    expect((await stripe.checkout.sessions.retrieve(session.id)).status).toBe('open');
  });

  it('cancels a subscription in the portal: a signed customer.subscription.deleted, then 303 to return_url', async () => {
    const { customer, session } = await newSession('pro_monthly');
    expect((await post(`${session.url}/pay`)).status).toBe(303);
    const subscriptionId = subscriptionOf(receiver.events()[0]!.data.object as Stripe.Checkout.Session);
    receiver.received.length = 0;

    const portal = await stripe.billingPortal.sessions.create({
      customer: customer.id,
      return_url: 'http://localhost:8080/billing',
    });
    expect(portal.url).toBe(`${peer.standIn.url}/portal/${portal.id}`);
    const page = await fetch(portal.url);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).not.toMatch(/<script/i);
    expect(html).toContain('pro_monthly');
    expect(html).toContain(`name="subscription" value="${subscriptionId}"`);
    expect(html).toMatch(/>Cancel subscription</);
    expect(html).toMatch(/>Return</);

    const returned = await post(`${portal.url}/return`);
    expect(returned.status).toBe(303);
    expect(returned.headers.get('location')).toBe('http://localhost:8080/billing');
    expect(receiver.received).toEqual([]);

    const cancelled = await post(`${portal.url}/cancel-subscription`, { subscription: subscriptionId });
    expect(cancelled.status).toBe(303);
    expect(cancelled.headers.get('location')).toBe('http://localhost:8080/billing');
    const events = receiver.events();
    expect(events.map((event) => event.type)).toEqual(['customer.subscription.deleted']);
    expect(events[0]!.data.object).toMatchObject({
      id: subscriptionId,
      status: 'canceled',
      customer: customer.id,
    });
    expect((await stripe.subscriptions.retrieve(subscriptionId)).status).toBe('canceled');

    // Another customer's subscription cannot be cancelled through this portal session.
    const other = await newSession('basic_monthly');
    expect((await post(`${other.session.url}/pay`)).status).toBe(303);
    const otherSubscription = subscriptionOf(
      receiver.events().at(-1)!.data.object as Stripe.Checkout.Session,
    );
    const refused = await post(`${portal.url}/cancel-subscription`, { subscription: otherSubscription });
    expect(refused.status).toBe(404);
    expect((await stripe.subscriptions.retrieve(otherSubscription)).status).toBe('active');
  });

  it('retries a webhook the endpoint refuses, each attempt signed anew', async () => {
    receiver.statuses.push(500, 500);
    const { session } = await newSession('basic_monthly');
    const response = await post(`${session.url}/pay`);
    expect(response.status).toBe(303);
    expect(receiver.received).toHaveLength(3);
    const events = receiver.events(); // throws unless every attempt carries a valid signature
    expect(new Set(events.map((event) => event.id)).size).toBe(1);
    expect(events[0]!.type).toBe('checkout.session.completed');
  });

  it('says so instead of redirecting when the webhook is never taken', async () => {
    receiver.statuses.push(500, 500, 500, 500, 500, 500);
    const { session } = await newSession('basic_monthly');
    const response = await post(`${session.url}/pay`);
    expect(response.status).toBe(502);
    expect(receiver.received).toHaveLength(4);
    const html = await response.text();
    expect(html).toContain('the webhook was not delivered');
    expect(html).toContain('answered 500');
    // Paid at the stand-in all the same.
    expect((await stripe.checkout.sessions.retrieve(session.id)).status).toBe('complete');
  });

  it('answers the API only with its key', async () => {
    await expect(sdkFor(peer.standIn.url, 'sk_test_wrong').customers.create({})).rejects.toThrow(
      /Invalid API Key/,
    );
  });
});

describe('dev-stripe process', () => {
  function run(env: Record<string, string>) {
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
      cwd: ROOT,
      env: {
        ...process.env,
        LOG_LEVEL: 'info',
        STRIPE_SECRET_KEY: API_KEY,
        STRIPE_WEBHOOK_SECRET: SECRET,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const lines = () =>
      output
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    return { child, lines, output: () => output };
  }

  it('refuses to start with NODE_ENV=production', async () => {
    const { child, output } = run({ NODE_ENV: 'production' });
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(output()).toContain('refuses to run with NODE_ENV=production');
  });

  it('answers the SDK with its key, pays on its page, delivers the event, and stops on SIGTERM', async () => {
    const receiver = await startReceiver();
    const { child, lines } = run({
      NODE_ENV: 'development',
      DEV_STRIPE_PORT: '0',
      DEV_STRIPE_WEBHOOK_URL: receiver.url,
    });
    try {
      const ready = await eventually(() => lines().find((line) => typeof line.url === 'string'), 20_000);
      const stripe = sdkFor(ready.url as string);
      const customer = await stripe.customers.create({ email: 'a@example.com' });
      const [price] = (await stripe.prices.list({ lookup_keys: ['enterprise_monthly'] })).data;
      const session = await stripe.checkout.sessions.create({
        mode: 'subscription',
        customer: customer.id,
        line_items: [{ price: price!.id, quantity: 1 }],
        success_url: 'http://localhost:8080/billing?checkout=success',
        cancel_url: 'http://localhost:8080/billing?checkout=cancelled',
      });
      expect(session.url).toMatch(new RegExp(`^${ready.url as string}/checkout/cs_test_`));
      expect((await post(`${session.url}/pay`)).status).toBe(303);
      expect(receiver.events().map((event) => event.type)).toEqual(['checkout.session.completed']);
      // The child's log line comes through a pipe, after its answer: waited for, not read at once.
      const delivered = await eventually(
        () => lines().find((line) => line.msg === 'webhook delivered'),
        10_000,
      );
      expect(delivered).toMatchObject({
        type: 'checkout.session.completed',
      });
      // The secrets stay out of the log.
      expect(JSON.stringify(lines())).not.toContain(SECRET);
    } finally {
      child.kill('SIGTERM');
      await receiver.close();
    }
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(0);
  });
});
