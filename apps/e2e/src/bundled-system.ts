import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import type { Lifecycle } from '@sts/runtime/lifecycle';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';

/** The repository root, where `dist/apps/<app>/main.js` is built. */
export const ROOT = resolve(__dirname, '../../..');

/** The production bundle of an app (`npm run build`). */
export const bundle = (app: string) => join(ROOT, 'dist', 'apps', app, 'main.js');

/** Fails with what to do when a bundle the spec runs has not been built. */
export function requireBundles(apps: readonly string[]): void {
  const missing = apps.filter((app) => !existsSync(bundle(app)));
  if (missing.length > 0) {
    throw new Error(`no bundle for ${missing.join(', ')}: run \`npm run build\` first (npm test does)`);
  }
}

/**
 * What the processes of a bundles spec share and the spec owns: a database of its own and a NATS
 * namespace of its own, both removed when `lifecycle` closes.
 */
export async function isolatedStores(
  lifecycle: Lifecycle,
  label: string,
): Promise<{ database: TestDatabase; natsUrl: string; namespace: string }> {
  const database = await createTestDatabase(label);
  lifecycle.add('database', () => database.drop());
  const namespace = uniqueNatsNamespace(label.slice(0, 4));
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  lifecycle.add('nats streams', async () => {
    const logger = createLogger(`e2e-${label}`, 'silent');
    const nats = await connectJetStream({ url: natsUrl, name: `e2e-${label}-cleanup`, logger });
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
  });
  return { database, natsUrl, namespace };
}
