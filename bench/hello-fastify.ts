/**
 * Baseline of the benchmarks: a bare Fastify hello-world (`GET /` → `{"hello":"world"}`), same Fastify
 * version as the gateway, no logger, no plugins. Spawned as its own process by bench-harness.ts's
 * startSystem for gateway-session.bench.ts and enrollment.bench.ts, listening on `PORT`.
 */
import Fastify from 'fastify';

async function main(): Promise<void> {
  const app = Fastify({ logger: false });
  app.get('/', async () => ({ hello: 'world' }));
  await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
  const stop = () => void app.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
