import { randomInt } from 'node:crypto';
import type { JetStreamManager } from '@nats-io/jetstream';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/**
 * A fresh NATS namespace for one test file (valid for `NATS_NAMESPACE`: `^[a-z][a-z0-9_]{0,31}$`),
 * so that its streams and subjects never meet those of other files running in parallel.
 */
export function uniqueNatsNamespace(prefix = 't'): string {
  if (!/^[a-z][a-z0-9_]{0,20}$/.test(prefix)) throw new Error(`invalid namespace prefix "${prefix}"`);
  let suffix = '';
  for (let i = 0; i < 10; i++) suffix += ALPHABET[randomInt(ALPHABET.length)];
  return `${prefix}${suffix}`;
}

/**
 * Deletes every stream of `namespace` (named `<NAMESPACE>_…`, `KV_<NAMESPACE>_…` or capturing
 * `<namespace>.…` subjects), with their consumers. For `afterAll`.
 */
export async function deleteNamespaceStreams(jsm: JetStreamManager, namespace: string): Promise<string[]> {
  const namePrefix = `${namespace.toUpperCase()}_`;
  const subjectPrefix = `${namespace}.`;
  const doomed: string[] = [];
  for await (const info of jsm.streams.list()) {
    const subjects = info.config.subjects ?? [];
    if (
      info.config.name.startsWith(namePrefix) ||
      // Key-value buckets named after the namespace (the gateway's rate-limit counters).
      info.config.name.startsWith(`KV_${namePrefix}`) ||
      subjects.some((subject) => subject.startsWith(subjectPrefix))
    ) {
      doomed.push(info.config.name);
    }
  }
  await Promise.all(doomed.map((name) => jsm.streams.delete(name)));
  return doomed;
}
