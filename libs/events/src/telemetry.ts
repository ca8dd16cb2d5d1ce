/**
 * Telemetry batches: what a device reports, as the gateway hands it to JetStream and the analytics
 * service reads it. Not domain events (no outbox, no catalogue entry): a stream of their own, sized
 * for volume, with one message per accepted batch.
 */

export const VERDICTS = ['allowed', 'blocked', 'warned'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** What a batch may hold (docs/decisions.md, "Telemetry"). */
export const TELEMETRY_LIMITS = {
  eventsPerBatch: 5_000,
  bodyBytes: 2 * 1024 * 1024,
  urlLength: 4_096,
  batchIdLength: 128,
  /** observed_at may lie this far in the past (an agent's spool after a long time offline)… */
  pastMs: 30 * 24 * 60 * 60 * 1000,
  /** …and this far in the future (device clocks drift). */
  futureMs: 5 * 60 * 1000,
  /** A classification that took longer is a measuring error, not a latency. */
  classificationMs: 600_000,
} as const;

/** Stream of telemetry batches of a namespace. */
export function telemetryStreamName(namespace: string): string {
  return `${namespace.toUpperCase()}_TELEMETRY`;
}

/**
 * Key-value bucket where analytics replicas claim the batches they store (so that two copies of one
 * batch taken by two replicas at once are stored once). Its stream is `KV_<bucket>`.
 */
export function telemetryClaimsBucketName(namespace: string): string {
  return `${namespace.toUpperCase()}_TELEMETRY_CLAIMS`;
}

/** Subject of a batch: by organization, so that a deployment can later split the stream by tenant. */
export function telemetrySubject(namespace: string, orgId: string): string {
  return `${namespace}.telemetry.${orgId}`;
}

export function allTelemetrySubject(namespace: string): string {
  return `${namespace}.telemetry.>`;
}

/** `Nats-Msg-Id` of a batch: a device repeating a batch id within the stream's window is stored once. */
export function telemetryMessageId(deviceId: string, batchId: string): string {
  return `${deviceId}:${batchId}`;
}

/**
 * Headers of a batch message, so that a consumer that needs only who sent it and when (enrollment's
 * `last_seen_at`) does not parse the body.
 */
export const TELEMETRY_HEADERS = {
  orgId: 'Sts-Org-Id',
  deviceId: 'Sts-Device-Id',
  /** Epoch milliseconds, as `received_at`. */
  receivedAt: 'Sts-Received-At',
} as const;

/** One analyzed address. Only the host is kept of the URL (docs/decisions.md, "Telemetry"). */
export interface TelemetryEvent {
  /** Epoch milliseconds. */
  observed_at: number;
  host: string;
  verdict: Verdict;
  classification_ms: number;
}

export interface TelemetryBatchMessage {
  org_id: string;
  device_id: string;
  batch_id: string;
  /** When the gateway accepted it, epoch milliseconds. */
  received_at: number;
  events: TelemetryEvent[];
}

const isText = (value: unknown, max: number): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= max;
const isEpochMs = (value: unknown): value is number =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

/**
 * Checks a batch message (the gateway's output, read back by a consumer) and returns it as typed; throws
 * naming the first problem. A loop, not a zod schema: it runs for every event at ingestion rates
 * (bench/ingestion.bench.ts), and it returns the parsed object itself instead of a copy.
 */
export function parseTelemetryBatch(json: unknown): TelemetryBatchMessage {
  const batch = json as Partial<Record<keyof TelemetryBatchMessage, unknown>> | null;
  if (typeof batch !== 'object' || batch === null) throw new TypeError('batch is not an object');
  if (!isText(batch.org_id, 64) || !isText(batch.device_id, 64)) throw new TypeError('batch without sender');
  if (!isText(batch.batch_id, TELEMETRY_LIMITS.batchIdLength)) throw new TypeError('batch_id is invalid');
  if (!isEpochMs(batch.received_at)) throw new TypeError('received_at is invalid');
  const events = batch.events;
  if (!Array.isArray(events) || events.length === 0 || events.length > TELEMETRY_LIMITS.eventsPerBatch) {
    throw new TypeError('events must be a non-empty array within the limit');
  }
  for (let index = 0; index < events.length; index++) {
    const event = events[index] as Partial<Record<keyof TelemetryEvent, unknown>> | null;
    if (
      typeof event !== 'object' ||
      event === null ||
      !isEpochMs(event.observed_at) ||
      typeof event.host !== 'string' ||
      event.host.length > TELEMETRY_LIMITS.urlLength ||
      (event.verdict !== 'allowed' && event.verdict !== 'blocked' && event.verdict !== 'warned') ||
      typeof event.classification_ms !== 'number' ||
      !(event.classification_ms >= 0 && event.classification_ms <= TELEMETRY_LIMITS.classificationMs)
    ) {
      throw new TypeError(`event ${index} is invalid`);
    }
  }
  return batch as TelemetryBatchMessage;
}
