/**
 * Baseline of the benchmarks: a bare Fastify hello-world (`GET /` → `{"hello":"world"}`), same Fastify
 * version as the gateway, no logger, no plugins. Spawned as its own process by bench-harness.ts's
 * startSystem for gateway-session.bench.ts and enrollment.bench.ts, listening on `PORT`. With
 * `BASELINE_WEBHOOK_SECRET`, also `POST /stripe-webhook`: the raw body verified with Stripe's
 * `constructEvent`, then `{"received":true}` (billing-webhook.bench.ts).
 */
import Fastify from 'fastify';
import Stripe from 'stripe';

async function main(): Promise<void> {
  const app = Fastify({ logger: false });
  app.get('/', async () => ({ hello: 'world' }));
  const webhookSecret = process.env.BASELINE_WEBHOOK_SECRET;
  if (webhookSecret) {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) =>
      done(null, body),
    );
    app.post('/stripe-webhook', async (request) => {
      Stripe.webhooks.constructEvent(
        request.body as Buffer,
        String(request.headers['stripe-signature']),
        webhookSecret,
      );
      return { received: true };
    });
  }
  await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
  const stop = () => void app.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
