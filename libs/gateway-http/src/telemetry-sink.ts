import type { JetStreamClient } from '@nats-io/jetstream';
import { AppError } from '@sts/errors/app-error';
import { headers } from '@nats-io/nats-core';
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
 * Publishes a batch to the telemetry stream and waits for JetStream's acknowledgement, never for
 * ClickHouse. When NATS cannot take it (unreachable, stream full) the batch is refused with
 * SERVICE_UNAVAILABLE (503), so the agent keeps it and sends it again later.
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
