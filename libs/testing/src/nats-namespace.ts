import { randomInt } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager } from '@nats-io/jetstream';
import { TimeoutError } from '@nats-io/nats-core';

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
  await Promise.all(doomed.map((name) => deleteStream(jsm, name)));
  return doomed;
}

/**
 * A delete asked again when its answer is late: on the three-node JetStream each one goes through the
 * meta group, which other files running at the same time keep busy (an answer may take longer than the
 * API's 5 s). A delete that went through before its answer was lost finds no stream the next time.
 */
async function deleteStream(jsm: JetStreamManager, name: string, attempts = 4): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await jsm.streams.delete(name);
      return;
    } catch (error) {
      if (
        attempt > 1 &&
        error instanceof JetStreamApiError &&
        error.code === JetStreamApiCodes.StreamNotFound
      )
        return;
      if (!(error instanceof TimeoutError) || attempt === attempts) throw error;
    }
  }
}
