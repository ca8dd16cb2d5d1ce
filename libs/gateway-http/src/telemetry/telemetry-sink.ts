import type { JetStreamClient } from '@nats-io/jetstream';
import { AppError } from '@sts/errors/app-error';
import { headers, InvalidArgumentError } from '@nats-io/nats-core';
import { traceHeaders } from '@sts/nats/trace-headers';
import type { Context } from '@sts/observability/trace-context';
import {
  TELEMETRY_HEADERS,
  telemetryMessageId,
  telemetryStreamName,
  telemetrySubject,
  type TelemetryBatchMessage,
} from '@sts/events/telemetry';

/**
 * Where accepted telemetry goes. Resolves once the batch is durable; `duplicate` when it was already.
 * `traceContext` is the request's (the consumer's span continues it).
 */
export type TelemetrySink = (
  batch: TelemetryBatchMessage,
  traceContext?: Context,
) => Promise<{ duplicate: boolean }>;

/**
 * Room a batch message needs beyond the request body it came in: its headers (message id, organization,
 * device, time, trace context; under 1 KiB), the envelope (organization, device, time) and up to one byte
 * per event (`host` is a letter longer than `url`). The published events are otherwise smaller than the
 * request's (a host instead of a URL, a number instead of an ISO timestamp).
 */
export const TELEMETRY_MESSAGE_HEADROOM_BYTES = 16 * 1024;

/**
 * The body limit of POST /api/device/telemetry: the configured one, but never more than NATS takes in
 * one message (`max_payload`, headers included, less the headroom), so that an accepted batch can be
 * published and a larger one gets 413 (which the agent answers by splitting it), never 503 (which it
 * would retry forever).
 */
export function telemetryBodyLimit(configuredBytes: number, natsMaxPayloadBytes: number | undefined): number {
  if (natsMaxPayloadBytes === undefined || !(natsMaxPayloadBytes > 0)) return configuredBytes;
  return Math.max(1024, Math.min(configuredBytes, natsMaxPayloadBytes - TELEMETRY_MESSAGE_HEADROOM_BYTES));
}

/**
 * Publishes a batch to the telemetry stream and waits for JetStream's acknowledgement, never for
 * ClickHouse. When NATS cannot take it (unreachable, stream full) the batch is refused with
 * SERVICE_UNAVAILABLE (503), so the agent keeps it and sends it again later. A batch whose message
 * would pass NATS's max_payload (only possible for bodies near the limit whose hosts grow, such as
 * internationalized names in punycode) is PAYLOAD_TOO_LARGE (413): sending it again cannot help.
 */
export function jetStreamTelemetrySink(
  js: JetStreamClient,
  namespace: string,
  timeoutMs: number,
): TelemetrySink {
  const stream = telemetryStreamName(namespace);
  return async (batch, traceContext) => {
    try {
      const meta = headers();
      meta.set(TELEMETRY_HEADERS.orgId, batch.org_id);
      meta.set(TELEMETRY_HEADERS.deviceId, batch.device_id);
      meta.set(TELEMETRY_HEADERS.receivedAt, String(batch.received_at));
      traceHeaders(meta, traceContext);
      const ack = await js.publish(telemetrySubject(namespace, batch.org_id), JSON.stringify(batch), {
        headers: meta,
        msgID: telemetryMessageId(batch.device_id, batch.batch_id),
        expect: { streamName: stream },
        timeout: timeoutMs,
      });
      return { duplicate: ack.duplicate };
    } catch (error) {
      if (isOverMaxPayload(error)) {
        throw new AppError(
          'PAYLOAD_TOO_LARGE',
          'This batch is too large to be accepted; send its events in smaller batches',
          { cause: error },
        );
      }
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        'Telemetry cannot be accepted right now; send it again later',
        {
          cause: error,
        },
      );
    }
  };
}

/** The NATS client's refusal of a message over the server's max_payload (checked before sending). */
function isOverMaxPayload(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 3; depth++) {
    if (cause instanceof InvalidArgumentError && cause.message.includes('max_payload')) return true;
    cause = cause.cause;
  }
  return false;
}
