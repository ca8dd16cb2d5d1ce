import type { ServerResponse } from 'node:http';
import {
  startStripeStandIn,
  type StandInCheckoutSession,
  type StandInPrice,
  type StandInSubscription,
  type StripeStandIn,
  type StripeStandInOptions,
  type StripeStandInPageHandler,
} from './stripe-stand-in';
import {
  createStripeWebhookSender,
  type StandInLog,
  type StripeWebhookDelivery,
  type StripeWebhookSender,
  type StripeWebhookSenderOptions,
} from './stripe-webhook-sender';
import { escapeHtml } from '@sts/vocabulary/html';

/**
 * What a browser sees of Stripe, on the stand-in's own address (where sessions' `url` points):
 *
 * - `GET /checkout/:id`: the plan and price, "Pay" and "Cancel". Paying completes the session at once (no
 *   card; a period of one month or one year, by the price's interval), delivers the signed
 *   `checkout.session.completed` event to the webhook, then 303 to `success_url`. Cancel: 303 to `cancel_url`.
 * - `GET /portal/:id`: the customer's subscriptions, each with "Cancel subscription" (ended at once, the signed
 *   `customer.subscription.deleted` delivered, then 303 to `return_url`), and "Return".
 *
 * Everything shown is escaped, the pages carry no script, and Content-Security-Policy forbids scripts and
 * allows forms to post only here and to be redirected only to the session's own return addresses.
 */
export interface StripeHostedPagesOptions {
  standIn: StripeStandIn;
  webhook: StripeWebhookSender;
  log?: StandInLog;
}

export function createStripeHostedPages(options: StripeHostedPagesOptions): StripeStandInPageHandler {
  const { standIn, webhook, log } = options;

  return (request, response, body) => {
    const path = new URL(request.url ?? '/', 'http://stripe.local').pathname;
    const match = /^\/(checkout|portal)\/([A-Za-z0-9_]+)(?:\/([a-z-]+))?$/.exec(path);
    if (!match) return false;
    const [, kind, id = '', action] = match;
    const method = request.method ?? 'GET';
    const answer =
      kind === 'checkout'
        ? checkout(id, action, method, body, response)
        : portal(id, action, method, body, response);
    answer.catch((error: unknown) => {
      log?.error({ err: error, path }, 'hosted page failed');
      if (!response.headersSent) sendHtml(response, 500, page('Error', '<p>The page failed.</p>'));
      else response.end();
    });
    return true;
  };

  async function checkout(
    id: string,
    action: string | undefined,
    method: string,
    _body: string,
    response: ServerResponse,
  ): Promise<void> {
    const session = standIn.checkoutSessions.get(id);
    const line = standIn.checkoutLine(id);
    if (!session || !line) {
      sendHtml(response, 404, page('Not found', '<p>No such Checkout Session.</p>'));
      return;
    }
    const success = returnUrl(session.success_url, id);
    const cancel = returnUrl(session.cancel_url, id);
    const targets = [success, cancel];

    if (action === undefined) {
      if (!allowMethod(method, 'GET', response)) return;
      sendHtml(
        response,
        200,
        renderCheckout(session, line.price, line.product?.name, line.quantity),
        targets,
      );
      return;
    }
    if (!allowMethod(method, 'POST', response)) return;
    if (action === 'cancel') {
      // As at Stripe, leaving Checkout keeps the session open (it expires later, or when replaced).
      redirectOr(response, cancel, 'Payment cancelled', '<p>You left Checkout without paying.</p>');
      return;
    }
    if (action !== 'pay') {
      sendHtml(response, 404, page('Not found', '<p>No such page.</p>'));
      return;
    }
    if (session.status === 'complete') {
      // A second submit of the form: already paid, go where paying goes.
      redirectOr(response, success, 'Paid', '<p>This Checkout Session is already paid.</p>');
      return;
    }
    if (session.status !== 'open') {
      sendHtml(
        response,
        410,
        page(
          'Expired',
          `<p>This Checkout Session has ${escapeHtml(session.status)}. ${backLink(cancel)}</p>`,
        ),
        targets,
      );
      return;
    }
    const { session: paid, subscription } = standIn.completeCheckout(id);
    log?.info(
      { session: id, subscription: subscription.id, customer: paid.customer, price: line.price.lookup_key },
      'checkout paid',
    );
    const delivery = await webhook.send(standIn.event('checkout.session.completed', paid));
    if (!delivery.delivered) {
      sendHtml(response, 502, undelivered('Paid', delivery, success), targets);
      return;
    }
    redirectOr(response, success, 'Paid', '<p>Payment received.</p>');
  }

  async function portal(
    id: string,
    action: string | undefined,
    method: string,
    body: string,
    response: ServerResponse,
  ): Promise<void> {
    const session = standIn.portalSessions.get(id);
    if (!session) {
      sendHtml(response, 404, page('Not found', '<p>No such billing portal session.</p>'));
      return;
    }
    const back = returnUrl(session.return_url, id);
    const owned = [...standIn.subscriptions.values()].filter(
      (subscription) => subscription.customer === session.customer,
    );

    if (action === undefined) {
      if (!allowMethod(method, 'GET', response)) return;
      const customer = standIn.customers.get(session.customer);
      sendHtml(response, 200, renderPortal(id, customer?.email ?? session.customer, owned, back), [back]);
      return;
    }
    if (!allowMethod(method, 'POST', response)) return;
    if (action === 'return') {
      redirectOr(response, back, 'Done', '<p>You may close this page.</p>');
      return;
    }
    if (action !== 'cancel-subscription') {
      sendHtml(response, 404, page('Not found', '<p>No such page.</p>'));
      return;
    }
    const subscriptionId = new URLSearchParams(body).get('subscription') ?? '';
    const subscription = owned.find((candidate) => candidate.id === subscriptionId);
    if (!subscription) {
      sendHtml(response, 404, page('Not found', '<p>No such subscription of this customer.</p>'), [back]);
      return;
    }
    if (subscription.status === 'canceled') {
      redirectOr(response, back, 'Cancelled', '<p>The subscription is already cancelled.</p>');
      return;
    }
    const ended = standIn.deleteSubscription(subscription.id);
    log?.info({ subscription: ended.id, customer: ended.customer }, 'subscription cancelled in the portal');
    const delivery = await webhook.send(standIn.event('customer.subscription.deleted', ended));
    if (!delivery.delivered) {
      sendHtml(response, 502, undelivered('Cancelled', delivery, back), [back]);
      return;
    }
    redirectOr(response, back, 'Cancelled', '<p>The subscription is cancelled.</p>');
  }

  function undelivered(title: string, delivery: StripeWebhookDelivery, next: string | undefined): string {
    return page(
      title,
      `<h1>${escapeHtml(title)}, but the webhook was not delivered</h1>
<p>The development Stripe recorded it, but ${escapeHtml(webhook.url)} did not take the event after
${delivery.attempts} attempts (${escapeHtml(delivery.error ?? 'no answer')}). Is the gateway running, with the same
STRIPE_WEBHOOK_SECRET?</p><p>${backLink(next)}</p>`,
    );
  }
}

export interface StripeWithHostedPages {
  standIn: StripeStandIn;
  webhook: StripeWebhookSender;
  close(): Promise<void>;
}

/** The Stripe stand-in with its hosted pages, delivering webhook events as `webhook` says. */
export async function startStripeWithHostedPages(
  options: Omit<StripeStandInOptions, 'hostedPages'> & {
    webhook: Omit<StripeWebhookSenderOptions, 'log'>;
    log?: StandInLog;
  },
): Promise<StripeWithHostedPages> {
  const { webhook: webhookOptions, log, ...standInOptions } = options;
  const webhook = createStripeWebhookSender({ ...webhookOptions, ...(log ? { log } : {}) });
  // The pages need the stand-in, which needs them: they are attached once it listens.
  const attached: { pages?: StripeStandInPageHandler } = {};
  const standIn = await startStripeStandIn({
    ...standInOptions,
    hostedPages: (request, response, body) => attached.pages?.(request, response, body) ?? false,
  });
  attached.pages = createStripeHostedPages({ standIn, webhook, ...(log ? { log } : {}) });
  return { standIn, webhook, close: () => standIn.close() };
}

// --- rendering -----------------------------------------------------------------------------------

/** An http(s) return address, with Stripe's `{CHECKOUT_SESSION_ID}` filled in; anything else is none. */
function returnUrl(value: string | null, sessionId: string): string | undefined {
  if (!value) return undefined;
  try {
    const url = new URL(value.replaceAll('{CHECKOUT_SESSION_ID}', sessionId));
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.toString() : undefined;
  } catch {
    return undefined;
  }
}

export function formatMoney(cents: number, currency: string): string {
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency: currency.toUpperCase() }).format(
      cents / 100,
    );
  } catch {
    return `${(cents / 100).toFixed(2)} ${currency.toUpperCase()}`;
  }
}

const STYLE = `
body{font:15px/1.5 system-ui,sans-serif;margin:3rem auto;max-width:34rem;padding:0 1rem;color:#1a1f36}
.card{border:1px solid #e3e8ee;border-radius:8px;padding:1.5rem;box-shadow:0 2px 6px rgba(0,0,0,.06)}
.test{display:inline-block;background:#ffde92;color:#5c3b00;border-radius:4px;padding:0 .4rem;font-size:12px;font-weight:600}
.price{font-size:2rem;font-weight:600;margin:.25rem 0}.muted{color:#697386}
form{display:inline}button{font:inherit;border-radius:6px;padding:.5rem 1.1rem;cursor:pointer;border:1px solid #c1c9d2;background:#fff}
button.primary{background:#635bff;border-color:#635bff;color:#fff}.actions{margin-top:1.25rem;display:flex;gap:.5rem;flex-wrap:wrap}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e3e8ee;padding:.4rem .3rem;text-align:left}
`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)} · development Stripe</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><p><span class="test">TEST MODE</span> <span class="muted">development Stripe: nothing is charged</span></p>
${body}</body></html>`;
}

function backLink(url: string | undefined): string {
  return url ? `<a href="${escapeHtml(url)}">Continue</a>` : '';
}

const every = (interval: StandInPrice['recurring']['interval']) => (interval === 'year' ? 'year' : 'month');

function renderCheckout(
  session: StandInCheckoutSession,
  price: StandInPrice,
  productName: string | undefined,
  quantity: number,
): string {
  const total = formatMoney(price.unit_amount * quantity, price.currency);
  const plan = productName ?? price.lookup_key ?? price.id;
  const open = session.status === 'open';
  const actions = open
    ? `<div class="actions">
<form method="post" action="/checkout/${escapeHtml(session.id)}/pay"><button class="primary" type="submit">Pay ${escapeHtml(total)}</button></form>
<form method="post" action="/checkout/${escapeHtml(session.id)}/cancel"><button type="submit">Cancel</button></form>
</div>`
    : `<p>This Checkout Session is ${escapeHtml(session.status)}.</p>`;
  return page(
    `Subscribe to ${plan}`,
    `<div class="card"><p class="muted">Subscribe to</p><h1>${escapeHtml(plan)}</h1>
<p class="price">${escapeHtml(total)} <span class="muted">per ${every(price.recurring.interval)}</span></p>
<p class="muted">${quantity > 1 ? `${quantity} × ${escapeHtml(formatMoney(price.unit_amount, price.currency))}, ` : ''}price ${escapeHtml(price.lookup_key ?? price.id)}</p>
${actions}
<p class="muted">Pay completes the subscription at once, without a card, and sends the signed event to the webhook.</p></div>`,
  );
}

function renderPortal(
  portalId: string,
  customer: string,
  subscriptions: StandInSubscription[],
  back: string | undefined,
): string {
  const rows = subscriptions
    .map((subscription) => {
      const item = subscription.items.data[0];
      const plan = item ? (item.price.lookup_key ?? item.price.id) : '';
      const until = item ? new Date(item.current_period_end * 1000).toISOString().slice(0, 10) : '';
      const cancel =
        subscription.status === 'canceled'
          ? ''
          : `<form method="post" action="/portal/${escapeHtml(portalId)}/cancel-subscription"><input type="hidden" name="subscription" value="${escapeHtml(subscription.id)}"><button type="submit">Cancel subscription</button></form>`;
      return `<tr><td>${escapeHtml(plan)}</td><td>${escapeHtml(subscription.status)}</td><td>${escapeHtml(until)}</td><td>${cancel}</td></tr>`;
    })
    .join('\n');
  const table = subscriptions.length
    ? `<table><thead><tr><th>Plan</th><th>Status</th><th>Period ends</th><th></th></tr></thead><tbody>${rows}</tbody></table>`
    : '<p class="muted">No subscriptions.</p>';
  const ret = back
    ? `<form method="post" action="/portal/${escapeHtml(portalId)}/return"><button type="submit">Return</button></form>`
    : '';
  return page(
    'Billing portal',
    `<div class="card"><h1>Billing</h1><p class="muted">${escapeHtml(customer)}</p>${table}
<div class="actions">${ret}</div>
<p class="muted">Cancelling ends the subscription now and sends the signed customer.subscription.deleted event to the webhook.</p></div>`,
  );
}

// --- responses -----------------------------------------------------------------------------------

/** No scripts or remote loads; forms post here and may be redirected only to the given addresses. */
function securityHeaders(targets: readonly (string | undefined)[]): Record<string, string> {
  const origins = [...new Set(targets.flatMap((target) => (target ? [new URL(target).origin] : [])))];
  return {
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'${origins.map((origin) => ` ${origin}`).join('')}`,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  };
}

function sendHtml(
  response: ServerResponse,
  status: number,
  html: string,
  targets: readonly (string | undefined)[] = [],
): void {
  const payload = Buffer.from(html, 'utf8');
  response.writeHead(status, {
    ...securityHeaders(targets),
    'content-type': 'text/html; charset=utf-8',
    'content-length': String(payload.length),
  });
  response.end(response.req.method === 'HEAD' ? undefined : payload);
}

/** 303 to `url`, or a page saying what happened when the session has no usable address. */
function redirectOr(response: ServerResponse, url: string | undefined, title: string, body: string): void {
  if (url) {
    response.writeHead(303, { location: url, 'cache-control': 'no-store', 'content-length': '0' }).end();
    return;
  }
  sendHtml(response, 200, page(title, body));
}

function allowMethod(method: string, allowed: 'GET' | 'POST', response: ServerResponse): boolean {
  if (method === allowed || (allowed === 'GET' && method === 'HEAD')) return true;
  response
    .writeHead(405, { allow: allowed === 'GET' ? 'GET, HEAD' : 'POST', 'content-type': 'text/plain' })
    .end('method not allowed');
  return false;
}
