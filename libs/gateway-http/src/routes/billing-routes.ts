import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError, isAppError } from '@sts/errors/app-error';
import { stripeSignatureHeaderProblem } from '@sts/vocabulary/stripe-signature';
import { requireCaller, requireRoles } from '../auth/caller-context';
import { BILLING_CYCLE_TO_PROTO, PLAN_TO_PROTO } from '@sts/grpc/proto-enums';
import { errorResponses } from '../contract/contract-schemas';
import type { GatewayCaches } from '../caching/gateway-caches';
import type { UpstreamClients } from '../upstream-clients';
import { callOptionsFor } from '../observability/http-observability';
import { clientAddressKey } from '../limits/client-address';
import { RateLimitExceeded, type Limit, type RateLimiter } from '../limits/rate-limiter';

/**
 * Billing calls wait on Stripe: each request up to STRIPE_TIMEOUT_MS and tried twice. A webhook makes
 * at most one request (≈ 11 s when Stripe hangs); a checkout usually two to four (the first one a few
 * more), so it gets the longer deadline. When Stripe is that slow the caller sees 504 and tries again.
 */
const WEBHOOK_DEADLINE_MS = 15_000;
const CHECKOUT_DEADLINE_MS = 30_000;
/** Stripe's events are at most a few hundred KB. */
const WEBHOOK_BODY_LIMIT_BYTES = 1024 * 1024;

const urlPayload = z.object({ url: z.string() });

/** Checkout and customer portal (contract section 4, Billing): ORG_ADMIN only (DESIGN section 3). */
export const billingRoutes: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  caches: GatewayCaches;
}> = async (app, { clients, caches }) => {
  const security = [{ bearerAuth: [] }];
  const tags = ['Billing'];

  app.post(
    '/api/billing/checkout-session',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags,
        summary: 'Start a Stripe Checkout for a plan and billing cycle',
        description:
          'Answers the address of a Stripe Checkout page (subscription mode); the license moves to `onboarding` ' +
          'until Stripe reports the payment. 409 SUBSCRIPTION_ALREADY_ACTIVE when the organization pays already ' +
          '(plan changes go through the portal); 503 BILLING_NOT_CONFIGURED on a deployment without Stripe.',
        security,
        body: z
          .object({ plan: z.enum(['basic', 'pro', 'enterprise']), cycle: z.enum(['monthly', 'annual']) })
          .strict(),
        response: { 200: urlPayload, ...errorResponses(400, 401, 403, 409, 503) },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const { url } = await clients.billing.createCheckoutSession(
        {
          orgId: caller.org.id,
          plan: PLAN_TO_PROTO[request.body.plan],
          billingCycle: BILLING_CYCLE_TO_PROTO[request.body.cycle],
          requestedByEmail: caller.email,
        },
        callOptionsFor(request, CHECKOUT_DEADLINE_MS),
      );
      // The license may have moved to onboarding: its caller reads their own write.
      caches.licenseChanged(caller.org.id);
      return { url };
    },
  );

  app.post(
    '/api/billing/portal',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags,
        summary: "Open Stripe's customer portal (subscription, payment methods, invoices)",
        description:
          '409 BILLING_ACCOUNT_NOT_FOUND when the organization never started a checkout; 503 BILLING_NOT_CONFIGURED on a deployment without Stripe.',
        security,
        response: { 200: urlPayload, ...errorResponses(401, 403, 409, 503) },
      },
    },
    async (request) => {
      const { url } = await clients.billing.createPortalSession(
        { orgId: requireCaller(request).org.id },
        callOptionsFor(request, WEBHOOK_DEADLINE_MS),
      );
      return { url };
    },
  );
};

/**
 * POST /api/billing/webhook: Stripe's payment events, authenticated by the Stripe-Signature header
 * (contract section 5.7). The body reaches billing byte for byte (the signature covers it), so this
 * route reads JSON as a buffer in a scope of its own. The answer to the caller's own license read is
 * evicted here; other gateways evict on `billing.updated`.
 */
/**
 * POST /api/billing/webhook, for Stripe only: the body is forwarded to billing, which verifies it with the
 * signing secret. Before that, the gateway refuses what cannot be a live Stripe delivery (the signature
 * header's shape and its timestamp's tolerance), and an address whose webhooks failed `failuresPerMinute`
 * times this minute waits, before its body is read. Only failures count: Stripe's own bursts are never
 * slowed (docs/decisions.md, "The Stripe webhook is throttled on failures").
 */
export const billingWebhookRoute: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  caches: GatewayCaches;
  limiter: RateLimiter;
  failuresPerMinute: number;
  now: () => number;
}> = async (app, { clients, caches, limiter, failuresPerMinute, now }) => {
  const failures: Limit = { scope: 'billing-webhook-failures', max: failuresPerMinute };
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) =>
    done(null, body),
  );

  app.post(
    '/api/billing/webhook',
    {
      bodyLimit: WEBHOOK_BODY_LIMIT_BYTES,
      onRequest: async (request) => {
        const verdict = await limiter.check(failures, clientAddressKey(request.ip));
        if (verdict.over) {
          throw new RateLimitExceeded(
            verdict.resetInMs,
            'Too many failed webhooks; wait before trying again',
          );
        }
      },
      schema: {
        tags: ['Billing'],
        summary: "Stripe's payment events (for Stripe only)",
        description:
          'Verified with the Stripe-Signature header and the endpoint signing secret; each event id is applied once. ' +
          '400 for a missing, wrong or stale signature or a malformed event; 503 when Stripe itself could not be ' +
          'reached to read the subscription (Stripe sends the event again). Event types billing does not act on are acknowledged. ' +
          '429 for an address whose webhooks failed too often this minute.',
        headers: z.object({ 'stripe-signature': z.string().optional() }),
        response: { 200: z.object({ received: z.boolean() }), ...errorResponses(400, 413, 415, 429, 503) },
      },
    },
    async (request) => {
      const address = clientAddressKey(request.ip);
      try {
        const signature = request.headers['stripe-signature'];
        if (!signature)
          throw new AppError('WEBHOOK_SIGNATURE_INVALID', 'The Stripe-Signature header is missing');
        const problem = stripeSignatureHeaderProblem(signature, Math.floor(now() / 1000));
        if (problem) throw new AppError('WEBHOOK_SIGNATURE_INVALID', problem);
        if (!Buffer.isBuffer(request.body))
          throw new AppError('MALFORMED_REQUEST', 'The body is not a JSON event');
        const { orgId } = await clients.billing.handlePaymentEvent(
          { payload: request.body, signature },
          callOptionsFor(request, WEBHOOK_DEADLINE_MS),
        );
        if (orgId) caches.licenseChanged(orgId);
        return { received: true };
      } catch (error) {
        if (
          isAppError(error) &&
          (error.code === 'WEBHOOK_SIGNATURE_INVALID' || error.code === 'MALFORMED_REQUEST')
        )
          await limiter.record(failures, address);
        throw error;
      }
    },
  );
};
