import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

/**
 * A local peer that speaks Stripe's HTTP API (API version 2026-10-28.endive) to the official `stripe`
 * package: form-encoded requests in Stripe's bracket syntax, JSON answers, errors in Stripe's shape and
 * status, idempotency keys honoured. It holds customers, prices, Checkout and portal sessions,
 * subscriptions and invoices in memory; what a customer does in Stripe's hosted pages (paying, switching
 * plans, cancelling) tests do through plain methods, and they build and sign the webhook events Stripe
 * would send with `event` and `signed`. `stripe-hosted-pages.ts` adds those pages for a browser (dev-stripe),
 * delivering the signed events through `stripe-webhook-sender.ts`.
 */

/** A decoded parameter of Stripe's bracket syntax: `a=1`, `a[b]=1`, `a[0]=1`, `a[]=1`. */
export type StripeParamValue = string | StripeParamValue[] | { [key: string]: StripeParamValue };
export type StripeParams = { [key: string]: StripeParamValue };

export interface StripePriceSeed {
  lookupKey: string;
  /** In cents. */
  unitAmount: number;
  interval: 'month' | 'year';
  /** Name of the product the price belongs to (one product per name). */
  productName: string;
  currency?: string;
}

/** One active recurring price per `<plan>_<cycle>`; an annual price costs ten months. */
export const defaultStripePriceSeeds: readonly StripePriceSeed[] = (
  [
    ['basic', 900],
    ['pro', 2900],
    ['enterprise', 9900],
  ] as const
).flatMap(([plan, monthly]) => [
  { lookupKey: `${plan}_monthly`, unitAmount: monthly, interval: 'month' as const, productName: plan },
  { lookupKey: `${plan}_annual`, unitAmount: monthly * 10, interval: 'year' as const, productName: plan },
]);

export interface StripeStandInOptions {
  /** The secret key requests must carry (default `sk_test_standin`). */
  apiKey?: string;
  /** Replaces the default prices. */
  prices?: readonly StripePriceSeed[];
  /** Source of `created` and period timestamps (default the system clock), e.g. `ManualClock`. */
  clock?: { now(): Date };
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** Port to listen on (default 0: a free one). */
  port?: number;
  /** Base of the URLs it hands out (sessions' `url`); default `http://<host>:<port>`. */
  publicUrl?: string;
  /**
   * What a browser sees of Stripe (`/checkout/…`, `/portal/…`): offered every request outside `/v1/`
   * before the API key is checked; it answers and returns true, or returns false to leave the request
   * to the API (a 404 in Stripe's shape). Not recorded in `requests`. See `stripe-hosted-pages.ts`.
   */
  hostedPages?: StripeStandInPageHandler;
}

/** Answers a browser's request to the stand-in (returns true), or leaves it (false). */
export type StripeStandInPageHandler = (
  request: IncomingMessage,
  response: ServerResponse,
  body: string,
) => boolean;

export interface StandInProduct {
  id: string;
  object: 'product';
  active: boolean;
  name: string;
  created: number;
  livemode: false;
  metadata: Record<string, string>;
}

export interface StandInPrice {
  id: string;
  object: 'price';
  active: boolean;
  billing_scheme: 'per_unit';
  created: number;
  currency: string;
  livemode: false;
  lookup_key: string | null;
  metadata: Record<string, string>;
  nickname: string | null;
  product: string;
  recurring: { interval: 'month' | 'year'; interval_count: 1; usage_type: 'licensed' };
  type: 'recurring';
  unit_amount: number;
}

export interface StandInCustomer {
  id: string;
  object: 'customer';
  created: number;
  description: string | null;
  email: string | null;
  livemode: false;
  metadata: Record<string, string>;
  name: string | null;
}

export interface StandInCheckoutSession {
  id: string;
  object: 'checkout.session';
  /** Null once the session is complete, as at Stripe. */
  url: string | null;
  mode: 'subscription';
  customer: string;
  client_reference_id: string | null;
  metadata: Record<string, string>;
  status: 'open' | 'complete' | 'expired';
  payment_status: 'unpaid' | 'paid';
  subscription: string | null;
  success_url: string | null;
  cancel_url: string | null;
  currency: string;
  amount_total: number;
  created: number;
  expires_at: number;
  livemode: false;
}

export interface StandInPortalSession {
  id: string;
  object: 'billing_portal.session';
  url: string;
  customer: string;
  return_url: string | null;
  created: number;
  livemode: false;
}

export interface StandInSubscriptionItem {
  id: string;
  object: 'subscription_item';
  created: number;
  current_period_start: number;
  current_period_end: number;
  metadata: Record<string, string>;
  price: StandInPrice;
  quantity: number;
  subscription: string;
}

export type StandInSubscriptionStatus =
  'incomplete' | 'incomplete_expired' | 'trialing' | 'active' | 'past_due' | 'canceled' | 'unpaid' | 'paused';

export interface StandInSubscription {
  id: string;
  object: 'subscription';
  billing_cycle_anchor: number;
  cancel_at: number | null;
  cancel_at_period_end: boolean;
  canceled_at: number | null;
  collection_method: 'charge_automatically';
  created: number;
  currency: string;
  customer: string;
  ended_at: number | null;
  items: StandInList<StandInSubscriptionItem>;
  latest_invoice: string | null;
  livemode: false;
  metadata: Record<string, string>;
  start_date: number;
  status: StandInSubscriptionStatus;
}

export interface StandInInvoice {
  id: string;
  object: 'invoice';
  amount_due: number;
  amount_paid: number;
  amount_remaining: number;
  attempt_count: number;
  attempted: boolean;
  billing_reason: 'subscription_cycle';
  collection_method: 'charge_automatically';
  created: number;
  currency: string;
  customer: string;
  hosted_invoice_url: string;
  lines: StandInList<StandInInvoiceLine>;
  livemode: false;
  metadata: Record<string, string>;
  next_payment_attempt: number | null;
  parent: {
    type: 'subscription_details';
    quote_details: null;
    subscription_details: { subscription: string; metadata: Record<string, string> };
  };
  period_start: number;
  period_end: number;
  status: 'paid' | 'open';
  status_transitions: { finalized_at: number; paid_at: number | null };
  total: number;
}

export interface StandInInvoiceLine {
  id: string;
  object: 'line_item';
  amount: number;
  currency: string;
  invoice: string;
  livemode: false;
  metadata: Record<string, string>;
  parent: {
    type: 'subscription_item_details';
    invoice_item_details: null;
    subscription_item_details: {
      invoice_item: null;
      proration: false;
      proration_details: null;
      subscription: string;
      subscription_item: string;
    };
  };
  period: { start: number; end: number };
  pricing: {
    type: 'price_details';
    price_details: { price: string; product: string };
    unit_amount_decimal: string;
  };
  quantity: number;
  subscription: string;
}

export interface StandInList<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  url: string;
}

export interface StripeStandInRequest {
  method: string;
  /** Without the query string. */
  path: string;
  /** Query (GET, DELETE) or form body (POST), decoded. */
  params: StripeParams;
  idempotencyKey: string | null;
}

export interface StripeEvent<T = unknown> {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  data: { object: T; previous_attributes?: Record<string, unknown> };
  livemode: false;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: string;
}

export interface StripeEventOptions {
  id?: string;
  created?: Date;
  /** `data.previous_attributes`, as in `*.updated` events. */
  previousAttributes?: Record<string, unknown>;
}

/** `none` answers normally; `error` answers 500 `api_error`; `unreachable` drops the connection unanswered. */
export type StripeFailureMode = 'none' | 'error' | 'unreachable';

export interface StripeStandIn {
  /** `http://127.0.0.1:<port>` (or the `publicUrl` option): the base of the API and of the hosted pages. */
  url: string;
  port: number;
  apiKey: string;
  /** Every request that reached the stand-in, oldest first (also the refused and the dropped ones). */
  requests: StripeStandInRequest[];
  customers: ReadonlyMap<string, StandInCustomer>;
  products: ReadonlyMap<string, StandInProduct>;
  prices: ReadonlyMap<string, StandInPrice>;
  checkoutSessions: ReadonlyMap<string, StandInCheckoutSession>;
  portalSessions: ReadonlyMap<string, StandInPortalSession>;
  subscriptions: ReadonlyMap<string, StandInSubscription>;
  invoices: ReadonlyMap<string, StandInInvoice>;
  /** The seeded price with this lookup key (throws if there is none). */
  price(lookupKey: string): StandInPrice;
  /** What a Checkout Session sells (its first line item), or undefined for an unknown session. */
  checkoutLine(
    sessionId: string,
  ): { price: StandInPrice; product: StandInProduct | undefined; quantity: number } | undefined;
  /** What Stripe does when the customer pays on the Checkout page: a subscription for the session's price. */
  completeCheckout(
    sessionId: string,
    opts?: { currentPeriodEnd?: Date },
  ): { session: StandInCheckoutSession; subscription: StandInSubscription };
  /** A plan change, a cancellation scheduled or withdrawn in the portal, a renewal, a dunning state. */
  updateSubscription(
    id: string,
    changes: {
      lookupKey?: string;
      cancelAtPeriodEnd?: boolean;
      currentPeriodEnd?: Date;
      status?: StandInSubscriptionStatus;
    },
  ): StandInSubscription;
  /** The subscription ended (cancelled now, or at the end of its period). */
  deleteSubscription(id: string): StandInSubscription;
  /** An invoice for the subscription's current period, paid or left open after a failed attempt. */
  createInvoice(subscriptionId: string, opts: { paid: boolean }): StandInInvoice;
  failRequests(mode: StripeFailureMode): void;
  event<T>(type: string, object: T, opts?: StripeEventOptions): StripeEvent<T>;
  signed(
    event: StripeEvent | string,
    secret: string,
    opts?: { timestamp?: number },
  ): { payload: string; signature: string };
  close(): Promise<void>;
}

const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A Stripe-looking id: `cus_` and 24 letters or digits. */
function stripeId(prefix: string): string {
  const bytes = randomBytes(24);
  let id = `${prefix}_`;
  for (const byte of bytes) id += alphabet[byte % alphabet.length];
  return id;
}

const unixSeconds = (date: Date): number => Math.floor(date.getTime() / 1000);

/** A webhook event shaped as Stripe sends it, for the API version of the installed `stripe` package. */
export function stripeEvent<T>(type: string, object: T, opts: StripeEventOptions = {}): StripeEvent<T> {
  return {
    id: opts.id ?? stripeId('evt'),
    object: 'event',
    api_version: Stripe.API_VERSION,
    created: unixSeconds(opts.created ?? new Date()),
    data: opts.previousAttributes ? { object, previous_attributes: opts.previousAttributes } : { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

/** The body and `Stripe-Signature` header Stripe would send, signed by the SDK's own test helper. */
export function signStripePayload(
  event: StripeEvent | string,
  secret: string,
  opts: { timestamp?: number } = {},
): { payload: string; signature: string } {
  const payload = typeof event === 'string' ? event : JSON.stringify(event, null, 2);
  const signature = Stripe.webhooks.generateTestHeaderString({
    payload,
    secret,
    ...(opts.timestamp === undefined ? {} : { timestamp: opts.timestamp }),
  });
  return { payload, signature };
}

interface FormTree {
  [key: string]: string | FormTree;
}

const unsafeKeys = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Decodes Stripe's bracket syntax (`line_items[0][price]=…`, `expand[]=…`) into objects and arrays, as
 * Stripe's servers and `qs` do. Own few lines because `qs` is no direct dependency of the repository.
 */
export function parseStripeForm(encoded: string): StripeParams {
  const root: FormTree = {};
  for (const [key, value] of new URLSearchParams(encoded)) {
    const match = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
    const segments = match
      ? [match[1] ?? '', ...Array.from((match[2] ?? '').matchAll(/\[([^[\]]*)\]/g), (m) => m[1] ?? '')]
      : [key];
    if (segments.some((segment) => unsafeKeys.has(segment))) continue;
    let node = root;
    segments.forEach((segment, index) => {
      const name = segment === '' ? String(Object.keys(node).length) : segment;
      if (index === segments.length - 1) {
        node[name] = value;
        return;
      }
      const next = node[name];
      if (typeof next === 'object') {
        node = next;
      } else {
        const created: FormTree = {};
        node[name] = created;
        node = created;
      }
    });
  }
  return toParams(root) as StripeParams;
}

/** Objects whose keys are all indexes become arrays (`a[0]`, `a[1]`). */
function toParams(tree: FormTree): StripeParamValue {
  const entries = Object.entries(tree).map(([key, value]): [string, StripeParamValue] => [
    key,
    typeof value === 'string' ? value : toParams(value),
  ]);
  if (entries.length > 0 && entries.every(([key]) => /^(0|[1-9]\d*)$/.test(key))) {
    return entries.sort(([a], [b]) => Number(a) - Number(b)).map(([, value]) => value);
  }
  return Object.fromEntries(entries);
}

interface StripeErrorBody {
  type: 'invalid_request_error' | 'api_error' | 'idempotency_error';
  message: string;
  code?: string;
  param?: string;
  doc_url?: string;
}

/** An answer in Stripe's error shape, thrown by route handlers. */
class StripeHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: StripeErrorBody,
  ) {
    super(body.message);
  }
}

const resourceMissing = (kind: string, id: string, param: string, status: 400 | 404): StripeHttpError =>
  new StripeHttpError(status, {
    type: 'invalid_request_error',
    code: 'resource_missing',
    message: `No such ${kind}: '${id}'`,
    param,
    doc_url: 'https://stripe.com/docs/error-codes/resource-missing',
  });

const parameterMissing = (param: string): StripeHttpError =>
  new StripeHttpError(400, {
    type: 'invalid_request_error',
    code: 'parameter_missing',
    message: `Missing required param: ${param}.`,
    param,
    doc_url: 'https://stripe.com/docs/error-codes/parameter-missing',
  });

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A plain parameter; empty means unset, which is how the SDK sends `null`. */
function stringParam(params: StripeParams, name: string): string | undefined {
  const value = params[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** `metadata[k]=v` pairs; an empty value unsets the key, as at Stripe. */
function metadataParam(value: StripeParamValue | undefined): Record<string, string> {
  if (!isRecord(value)) return {};
  return Object.fromEntries(
    Object.entries(value).filter(
      (entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1] !== '',
    ),
  );
}

function stringList(value: StripeParamValue | undefined): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((item): item is string => typeof item === 'string');
  return [];
}

function addInterval(from: Date, interval: 'month' | 'year'): Date {
  const next = new Date(from);
  if (interval === 'month') next.setUTCMonth(next.getUTCMonth() + 1);
  else next.setUTCFullYear(next.getUTCFullYear() + 1);
  return next;
}

const clone = <T>(value: T): T => structuredClone(value);

interface StoredAnswer {
  path: string;
  params: string;
  status: number;
  body: string;
}

interface SessionLine {
  price: string;
  quantity: number;
  subscriptionMetadata: Record<string, string>;
}

/** Starts the stand-in, by default on 127.0.0.1 at a free port. */
export async function startStripeStandIn(options: StripeStandInOptions = {}): Promise<StripeStandIn> {
  const apiKey = options.apiKey ?? 'sk_test_standin';
  const host = options.host ?? '127.0.0.1';
  const now = (): Date => options.clock?.now() ?? new Date();
  const requests: StripeStandInRequest[] = [];
  const products = new Map<string, StandInProduct>();
  const prices = new Map<string, StandInPrice>();
  const customers = new Map<string, StandInCustomer>();
  const checkoutSessions = new Map<string, StandInCheckoutSession>();
  const sessionLines = new Map<string, SessionLine>();
  const portalSessions = new Map<string, StandInPortalSession>();
  const subscriptions = new Map<string, StandInSubscription>();
  const invoices = new Map<string, StandInInvoice>();
  // Stripe keeps an idempotency key's first successful answer (24 hours); refusals of invalid
  // parameters are not kept there either, and keeping our injected failures would make them stick.
  const answers = new Map<string, StoredAnswer>();
  let failure: StripeFailureMode = 'none';
  let url = '';

  const created = unixSeconds(now());
  const productIds = new Map<string, string>();
  for (const seed of options.prices ?? defaultStripePriceSeeds) {
    let productId = productIds.get(seed.productName);
    if (!productId) {
      productId = stripeId('prod');
      productIds.set(seed.productName, productId);
      products.set(productId, {
        id: productId,
        object: 'product',
        active: true,
        name: seed.productName,
        created,
        livemode: false,
        metadata: {},
      });
    }
    const id = stripeId('price');
    prices.set(id, {
      id,
      object: 'price',
      active: true,
      billing_scheme: 'per_unit',
      created,
      currency: seed.currency ?? 'usd',
      livemode: false,
      lookup_key: seed.lookupKey,
      metadata: {},
      nickname: null,
      product: productId,
      recurring: { interval: seed.interval, interval_count: 1, usage_type: 'licensed' },
      type: 'recurring',
      unit_amount: seed.unitAmount,
    });
  }

  const priceByLookupKey = (lookupKey: string): StandInPrice => {
    const found = [...prices.values()].find((price) => price.lookup_key === lookupKey);
    if (!found) throw new Error(`Stripe stand-in: no price with lookup key ${lookupKey}`);
    return found;
  };

  const requireSubscription = (id: string): StandInSubscription => {
    const subscription = subscriptions.get(id);
    if (!subscription) throw new Error(`Stripe stand-in: no subscription ${id}`);
    return subscription;
  };

  const firstItem = (subscription: StandInSubscription): StandInSubscriptionItem => {
    const item = subscription.items.data[0];
    if (!item) throw new Error(`Stripe stand-in: subscription ${subscription.id} has no items`);
    return item;
  };

  /** What `expand[]` may replace: any id this stand-in issued. */
  const findById = (id: string): unknown =>
    customers.get(id) ??
    prices.get(id) ??
    products.get(id) ??
    checkoutSessions.get(id) ??
    portalSessions.get(id) ??
    subscriptions.get(id) ??
    invoices.get(id);

  /** Stripe's `expand[]`: `a` replaces the id in field `a` by its object, `a.b` goes on inside it. */
  const expand = (answer: unknown, paths: string[]): unknown => {
    const result = clone(answer);
    for (const path of paths) {
      const cannot = new StripeHttpError(400, {
        type: 'invalid_request_error',
        message: `This property cannot be expanded (${path}).`,
        param: 'expand',
      });
      const walk = (node: unknown, segments: string[]): void => {
        if (Array.isArray(node)) {
          node.forEach((item) => walk(item, segments));
          return;
        }
        const [head, ...rest] = segments;
        if (!isRecord(node) || head === undefined || !(head in node)) throw cannot;
        let field = node[head];
        if (typeof field === 'string') {
          const found = findById(field);
          if (found === undefined) throw cannot;
          field = clone(found);
          node[head] = field;
        }
        if (rest.length > 0 && field !== null) walk(field, rest);
      };
      walk(result, path.split('.'));
    }
    return result;
  };

  const requireCustomerParam = (params: StripeParams): string => {
    const customer = stringParam(params, 'customer');
    if (!customer) throw parameterMissing('customer');
    if (!customers.has(customer)) throw resourceMissing('customer', customer, 'customer', 400);
    return customer;
  };

  const routes: Array<{
    method: string;
    path: RegExp;
    answer: (params: StripeParams, ids: string[]) => unknown;
  }> = [
    {
      method: 'POST',
      path: /^\/v1\/customers$/,
      answer: (params) => {
        const customer: StandInCustomer = {
          id: stripeId('cus'),
          object: 'customer',
          created: unixSeconds(now()),
          description: stringParam(params, 'description') ?? null,
          email: stringParam(params, 'email') ?? null,
          livemode: false,
          metadata: metadataParam(params.metadata),
          name: stringParam(params, 'name') ?? null,
        };
        customers.set(customer.id, customer);
        return customer;
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/customers\/([^/]+)$/,
      answer: (params, [id = '']) => {
        const customer = customers.get(id) ?? throwError(resourceMissing('customer', id, 'id', 404));
        const email = stringParam(params, 'email');
        const updated: StandInCustomer = {
          ...customer,
          email: email ?? customer.email,
          metadata: { ...customer.metadata, ...metadataParam(params.metadata) },
        };
        customers.set(id, updated);
        return updated;
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/customers\/([^/]+)$/,
      answer: (_params, [id = '']) =>
        customers.get(id) ?? throwError(resourceMissing('customer', id, 'id', 404)),
    },
    {
      method: 'GET',
      path: /^\/v1\/prices$/,
      answer: (params) => {
        const lookupKeys = stringList(params.lookup_keys);
        const active = stringParam(params, 'active');
        const limit = Math.min(Math.max(Number(stringParam(params, 'limit') ?? 10) || 10, 1), 100);
        const matching = [...prices.values()].filter(
          (price) =>
            (lookupKeys.length === 0 ||
              (price.lookup_key !== null && lookupKeys.includes(price.lookup_key))) &&
            (active === undefined || String(price.active) === active),
        );
        return {
          object: 'list',
          data: matching.slice(0, limit),
          has_more: matching.length > limit,
          url: '/v1/prices',
        } satisfies StandInList<StandInPrice>;
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/prices\/([^/]+)$/,
      answer: (_params, [id = '']) => prices.get(id) ?? throwError(resourceMissing('price', id, 'id', 404)),
    },
    {
      method: 'POST',
      path: /^\/v1\/checkout\/sessions$/,
      answer: (params) => {
        const mode = stringParam(params, 'mode');
        if (!mode) throw parameterMissing('mode');
        if (mode !== 'subscription') {
          throw new StripeHttpError(400, {
            type: 'invalid_request_error',
            message: `The Stripe stand-in only knows mode=subscription, not ${mode}.`,
            param: 'mode',
          });
        }
        const customer = requireCustomerParam(params);
        const lines = params.line_items;
        const first = Array.isArray(lines) ? lines[0] : undefined;
        const priceId = isRecord(first) && typeof first.price === 'string' ? first.price : undefined;
        if (!priceId) throw parameterMissing('line_items[0][price]');
        const price = prices.get(priceId);
        if (!price) throw resourceMissing('price', priceId, 'line_items[0][price]', 400);
        const quantity = isRecord(first) && typeof first.quantity === 'string' ? Number(first.quantity) : 1;
        const subscriptionData = params.subscription_data;
        const id = stripeId('cs_test');
        const at = unixSeconds(now());
        const session: StandInCheckoutSession = {
          id,
          object: 'checkout.session',
          url: `${url}/checkout/${id}`,
          mode,
          customer,
          client_reference_id: stringParam(params, 'client_reference_id') ?? null,
          metadata: metadataParam(params.metadata),
          status: 'open',
          payment_status: 'unpaid',
          subscription: null,
          success_url: stringParam(params, 'success_url') ?? null,
          cancel_url: stringParam(params, 'cancel_url') ?? null,
          currency: price.currency,
          amount_total: price.unit_amount * quantity,
          created: at,
          expires_at: at + 86_400,
          livemode: false,
        };
        checkoutSessions.set(id, session);
        sessionLines.set(id, {
          price: price.id,
          quantity,
          subscriptionMetadata: metadataParam(
            isRecord(subscriptionData) ? subscriptionData.metadata : undefined,
          ),
        });
        return session;
      },
    },
    {
      // As at Stripe: only an open session can be expired.
      method: 'POST',
      path: /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/,
      answer: (_params, [id = '']) => {
        const session =
          checkoutSessions.get(id) ?? throwError(resourceMissing('checkout.session', id, 'session', 404));
        if (session.status !== 'open') {
          throw new StripeHttpError(400, {
            type: 'invalid_request_error',
            message: `Only Checkout Sessions with a status in ["open"] can be expired. This Checkout Session has a status of "${session.status}".`,
          });
        }
        const expired: StandInCheckoutSession = { ...session, status: 'expired', url: null };
        checkoutSessions.set(id, expired);
        return expired;
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/checkout\/sessions\/([^/]+)$/,
      answer: (_params, [id = '']) =>
        checkoutSessions.get(id) ?? throwError(resourceMissing('checkout.session', id, 'session', 404)),
    },
    {
      method: 'POST',
      path: /^\/v1\/billing_portal\/sessions$/,
      answer: (params) => {
        const customer = requireCustomerParam(params);
        const id = stripeId('bps');
        const session: StandInPortalSession = {
          id,
          object: 'billing_portal.session',
          url: `${url}/portal/${id}`,
          customer,
          return_url: stringParam(params, 'return_url') ?? null,
          created: unixSeconds(now()),
          livemode: false,
        };
        portalSessions.set(id, session);
        return session;
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/subscriptions\/([^/]+)$/,
      answer: (_params, [id = '']) =>
        subscriptions.get(id) ?? throwError(resourceMissing('subscription', id, 'id', 404)),
    },
    {
      method: 'GET',
      path: /^\/v1\/invoices\/([^/]+)$/,
      answer: (_params, [id = '']) =>
        invoices.get(id) ?? throwError(resourceMissing('invoice', id, 'invoice', 404)),
    },
  ];

  const route = (method: string, path: string, params: StripeParams): { status: number; body: unknown } => {
    try {
      for (const candidate of routes) {
        const match = candidate.path.exec(path);
        if (candidate.method !== method || !match) continue;
        const ids = match.slice(1).map((part) => decodeURIComponent(part));
        return { status: 200, body: expand(candidate.answer(params, ids), stringList(params.expand)) };
      }
      throw new StripeHttpError(404, {
        type: 'invalid_request_error',
        message: `Unrecognized request URL (${method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
      });
    } catch (error) {
      if (error instanceof StripeHttpError) return { status: error.status, body: { error: error.body } };
      throw error;
    }
  };

  const respond = (
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    body: string,
    extraHeaders: Record<string, string> = {},
  ): void => {
    const version = req.headers['stripe-version'];
    res
      .writeHead(status, {
        'content-type': 'application/json',
        'request-id': stripeId('req'),
        'stripe-version': typeof version === 'string' ? version : Stripe.API_VERSION,
        ...extraHeaders,
      })
      .end(body);
  };

  const handle = (req: IncomingMessage, res: ServerResponse, rawBody: string): void => {
    const method = req.method ?? 'GET';
    const target = new URL(req.url ?? '/', 'http://127.0.0.1');
    const params = parseStripeForm(method === 'POST' ? rawBody : target.search.slice(1));
    const keyHeader = req.headers['idempotency-key'];
    const idempotencyKey = typeof keyHeader === 'string' ? keyHeader : null;
    requests.push({ method, path: target.pathname, params, idempotencyKey });

    if (failure === 'unreachable') {
      req.socket.destroy();
      return;
    }
    if (failure === 'error') {
      const body: StripeErrorBody = {
        type: 'api_error',
        message: 'An unknown error occurred (Stripe stand-in told to fail).',
      };
      respond(req, res, 500, JSON.stringify({ error: body }));
      return;
    }

    const authorization = req.headers.authorization ?? '';
    const bearer = /^Bearer (.+)$/i.exec(authorization)?.[1];
    const basic = /^Basic (.+)$/i.exec(authorization)?.[1];
    const presented =
      bearer ?? (basic ? Buffer.from(basic, 'base64').toString('utf8').split(':')[0] : undefined);
    if (presented !== apiKey) {
      // As at Stripe: status 401 with type invalid_request_error; the SDK picks its error class by status.
      const message = presented
        ? `Invalid API Key provided: ${presented.slice(0, 8)}${'*'.repeat(Math.max(presented.length - 12, 0))}${presented.slice(-4)}`
        : "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').";
      const body: StripeErrorBody = { type: 'invalid_request_error', message };
      respond(req, res, 401, JSON.stringify({ error: body }));
      return;
    }

    const keyed = method === 'POST' && idempotencyKey !== null;
    const echo: Record<string, string> = keyed ? { 'idempotency-key': idempotencyKey } : {};
    const canonicalParams = JSON.stringify(params);
    const previous = keyed ? answers.get(idempotencyKey) : undefined;
    if (previous) {
      if (previous.path !== target.pathname || previous.params !== canonicalParams) {
        const body: StripeErrorBody = {
          type: 'idempotency_error',
          message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
        };
        respond(req, res, 400, JSON.stringify({ error: body }), echo);
        return;
      }
      respond(req, res, previous.status, previous.body, { ...echo, 'idempotent-replayed': 'true' });
      return;
    }

    const { status, body } = route(method, target.pathname, params);
    const text = JSON.stringify(body);
    if (keyed && status < 300) {
      answers.set(idempotencyKey, { path: target.pathname, params: canonicalParams, status, body: text });
    }
    respond(req, res, status, text, echo);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        const body = Buffer.concat(chunks).toString('utf8');
        const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
        if (options.hostedPages && !path.startsWith('/v1/') && options.hostedPages(req, res, body)) return;
        handle(req, res, body);
      } catch (error) {
        const body: StripeErrorBody = {
          type: 'api_error',
          message: `Stripe stand-in failed: ${String(error)}`,
        };
        respond(req, res, 500, JSON.stringify({ error: body }));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  // A wildcard interface is reached through loopback on this machine.
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  url = (
    options.publicUrl ?? `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`
  ).replace(/\/+$/, '');

  const newInvoice = (subscription: StandInSubscription, paid: boolean): StandInInvoice => {
    const item = firstItem(subscription);
    const id = stripeId('in');
    const at = unixSeconds(now());
    const amount = item.price.unit_amount * item.quantity;
    const invoice: StandInInvoice = {
      id,
      object: 'invoice',
      amount_due: amount,
      amount_paid: paid ? amount : 0,
      amount_remaining: paid ? 0 : amount,
      attempt_count: 1,
      attempted: true,
      billing_reason: 'subscription_cycle',
      collection_method: 'charge_automatically',
      created: at,
      currency: item.price.currency,
      customer: subscription.customer,
      hosted_invoice_url: `${url}/invoice/${id}`,
      lines: {
        object: 'list',
        data: [
          {
            id: stripeId('il'),
            object: 'line_item',
            amount,
            currency: item.price.currency,
            invoice: id,
            livemode: false,
            metadata: {},
            parent: {
              type: 'subscription_item_details',
              invoice_item_details: null,
              subscription_item_details: {
                invoice_item: null,
                proration: false,
                proration_details: null,
                subscription: subscription.id,
                subscription_item: item.id,
              },
            },
            period: { start: item.current_period_start, end: item.current_period_end },
            pricing: {
              type: 'price_details',
              price_details: { price: item.price.id, product: item.price.product },
              unit_amount_decimal: String(item.price.unit_amount),
            },
            quantity: item.quantity,
            subscription: subscription.id,
          },
        ],
        has_more: false,
        url: `/v1/invoices/${id}/lines`,
      },
      livemode: false,
      metadata: {},
      next_payment_attempt: paid ? null : at + 3 * 86_400,
      parent: {
        type: 'subscription_details',
        quote_details: null,
        subscription_details: { subscription: subscription.id, metadata: { ...subscription.metadata } },
      },
      period_start: item.current_period_start,
      period_end: item.current_period_end,
      status: paid ? 'paid' : 'open',
      status_transitions: { finalized_at: at, paid_at: paid ? at : null },
      total: amount,
    };
    invoices.set(id, invoice);
    subscriptions.set(subscription.id, { ...subscription, latest_invoice: id });
    return invoice;
  };

  return {
    url,
    port,
    apiKey,
    requests,
    customers,
    products,
    prices,
    checkoutSessions,
    portalSessions,
    subscriptions,
    invoices,
    price: priceByLookupKey,
    checkoutLine: (sessionId) => {
      const line = sessionLines.get(sessionId);
      const price = line && prices.get(line.price);
      if (!line || !price) return undefined;
      return { price, product: products.get(price.product), quantity: line.quantity };
    },
    completeCheckout: (sessionId, opts = {}) => {
      const session = checkoutSessions.get(sessionId);
      const line = sessionLines.get(sessionId);
      if (!session || !line) throw new Error(`Stripe stand-in: no checkout session ${sessionId}`);
      if (session.status !== 'open')
        throw new Error(`Stripe stand-in: checkout session ${sessionId} is ${session.status}`);
      const price = prices.get(line.price);
      if (!price) throw new Error(`Stripe stand-in: no price ${line.price}`);
      const start = now();
      const id = stripeId('sub');
      const subscription: StandInSubscription = {
        id,
        object: 'subscription',
        billing_cycle_anchor: unixSeconds(start),
        cancel_at: null,
        cancel_at_period_end: false,
        canceled_at: null,
        collection_method: 'charge_automatically',
        created: unixSeconds(start),
        currency: price.currency,
        customer: session.customer,
        ended_at: null,
        items: {
          object: 'list',
          data: [
            {
              id: stripeId('si'),
              object: 'subscription_item',
              created: unixSeconds(start),
              current_period_start: unixSeconds(start),
              current_period_end: unixSeconds(
                opts.currentPeriodEnd ?? addInterval(start, price.recurring.interval),
              ),
              metadata: {},
              price,
              quantity: line.quantity,
              subscription: id,
            },
          ],
          has_more: false,
          url: `/v1/subscription_items?subscription=${id}`,
        },
        latest_invoice: null,
        livemode: false,
        metadata: { ...line.subscriptionMetadata },
        start_date: unixSeconds(start),
        status: 'active',
      };
      subscriptions.set(id, subscription);
      newInvoice(subscription, true);
      const completed: StandInCheckoutSession = {
        ...session,
        url: null,
        status: 'complete',
        payment_status: 'paid',
        subscription: id,
      };
      checkoutSessions.set(sessionId, completed);
      return { session: completed, subscription: requireSubscription(id) };
    },
    updateSubscription: (id, changes) => {
      const current = requireSubscription(id);
      const item = firstItem(current);
      const price = changes.lookupKey === undefined ? item.price : priceByLookupKey(changes.lookupKey);
      const periodEnd =
        changes.currentPeriodEnd === undefined
          ? item.current_period_end
          : unixSeconds(changes.currentPeriodEnd);
      const cancelAtPeriodEnd = changes.cancelAtPeriodEnd ?? current.cancel_at_period_end;
      const updated: StandInSubscription = {
        ...current,
        cancel_at_period_end: cancelAtPeriodEnd,
        cancel_at: cancelAtPeriodEnd ? periodEnd : null,
        currency: price.currency,
        status: changes.status ?? current.status,
        items: { ...current.items, data: [{ ...item, price, current_period_end: periodEnd }] },
      };
      subscriptions.set(id, updated);
      return updated;
    },
    deleteSubscription: (id) => {
      const at = unixSeconds(now());
      const updated: StandInSubscription = {
        ...requireSubscription(id),
        status: 'canceled',
        canceled_at: at,
        ended_at: at,
      };
      subscriptions.set(id, updated);
      return updated;
    },
    createInvoice: (subscriptionId, opts) => newInvoice(requireSubscription(subscriptionId), opts.paid),
    failRequests: (mode) => {
      failure = mode;
    },
    event: (type, object, opts = {}) => stripeEvent(type, object, { created: now(), ...opts }),
    signed: signStripePayload,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // The SDK keeps connections alive; close them, or `close` waits for their idle timeout.
        server.closeAllConnections();
      }),
  };
}

function throwError(error: Error): never {
  throw error;
}
