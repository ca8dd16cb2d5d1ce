import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError, isAppError } from '@sts/errors/app-error';
import { TELEMETRY_LIMITS, VERDICTS, type TelemetryEvent } from '@sts/events/telemetry';
import { errorResponses } from '../contract-schemas';
import type { DeviceCredentials } from '../device-credentials';
import type { TelemetrySink } from '../telemetry-sink';
import type { WindowCounter } from '../window-counter';
import { callOptionsFor, traceContextOf } from '../http-observability';

/** C0 and C1 control characters and DEL. */
const CONTROL_CHARACTER = /\p{Cc}/u;
/** Seconds an agent should wait before sending again when the batch could not be taken. */
const RETRY_AFTER_SECONDS = 5;

const telemetryEvent = z
  .object({
    observed_at: z.iso.datetime({ offset: true }),
    url: z
      .string()
      .min(1)
      .max(TELEMETRY_LIMITS.urlLength)
      .refine((value) => !CONTROL_CHARACTER.test(value), 'must not contain control characters'),
    verdict: z.enum(VERDICTS),
    classification_ms: z.number().min(0).max(TELEMETRY_LIMITS.classificationMs),
  })
  .strict();

const telemetryBody = z
  .object({
    batch_id: z
      .string()
      .min(1)
      .max(TELEMETRY_LIMITS.batchIdLength)
      .regex(/^[\x21-\x7e]+$/, 'must be visible ASCII without spaces'),
    events: z.array(telemetryEvent).min(1),
  })
  .strict();

/**
 * The host of an analyzed address: all that is kept of it (docs/decisions.md, "Telemetry"). An address
 * without a scheme (`example.com/path`, as DNS filters report) is read as http.
 */
export function hostOf(url: string): string | null {
  try {
    const parsed = new URL(/^[a-z][a-z0-9+.-]*:/i.test(url) ? url : `http://${url}`);
    return parsed.hostname ? parsed.hostname.toLowerCase() : null;
  } catch {
    return null;
  }
}

/**
 * POST /api/device/telemetry (DESIGN.md section 4): a device's batch of analyzed addresses, authenticated
 * by its X-Device-Token. 202 once the batch is durable in JetStream; the analytics service stores it.
 */
export const telemetryRoute: FastifyPluginAsyncZod<{
  credentials: DeviceCredentials;
  sink: TelemetrySink;
  bodyLimit: number;
  /** Where batches per device are counted (shared by the gateway replicas). */
  limits: WindowCounter;
  perDevicePerMinute: number;
  now: () => number;
}> = async (app, { credentials, sink, bodyLimit, limits, perDevicePerMinute, now }) => {
  app.post(
    '/api/device/telemetry',
    {
      bodyLimit,
      // Counted before validation: a batch of 200,000 events is refused without checking each.
      preValidation: async (request) => {
        const events = (request.body as { events?: unknown } | undefined)?.events;
        if (Array.isArray(events) && events.length > TELEMETRY_LIMITS.eventsPerBatch) {
          throw new AppError(
            'PAYLOAD_TOO_LARGE',
            `A batch holds at most ${TELEMETRY_LIMITS.eventsPerBatch} events; send the rest in another batch`,
          );
        }
      },
      schema: {
        tags: ['Telemetry'],
        summary: "Report analyzed addresses (the agent's report command)",
        description: `Authenticated by the X-Device-Token header. At most ${TELEMETRY_LIMITS.eventsPerBatch} events and ${bodyLimit} bytes per batch, and ${perDevicePerMinute} batches per device per minute (then 429 with Retry-After); observed_at at most 30 days in the past and 5 minutes in the future. A repeated batch_id of the same device is accepted and counted once. Only the host of each url is stored.`,
        headers: z.object({ 'x-device-token': z.string().optional() }),
        body: telemetryBody,
        response: {
          202: z
            .object({
              batch_id: z.string(),
              accepted: z.number().describe('Events in the batch'),
              duplicate: z.boolean().describe('True when this batch id was accepted before (counted once)'),
            })
            .meta({ id: 'AcceptedTelemetry' }),
          ...errorResponses(400, 401, 403, 413, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const device = await credentials.authenticate(
        request.headers['x-device-token'],
        callOptionsFor(request),
      );
      // Per device, before the events are checked: a batch refused for its events counts too.
      const sent = await limits.increment('telemetry', device.deviceId, 60_000, perDevicePerMinute + 1);
      if (sent.count > perDevicePerMinute) {
        const seconds = Math.max(1, Math.ceil(sent.resetInMs / 1000));
        reply.header('retry-after', String(seconds));
        throw new AppError(
          'RATE_LIMITED',
          `At most ${perDevicePerMinute} batches per device per minute; retry in ${seconds} s`,
        );
      }
      const receivedAt = now();
      const earliest = receivedAt - TELEMETRY_LIMITS.pastMs;
      const latest = receivedAt + TELEMETRY_LIMITS.futureMs;
      const fields: { path: string; message: string }[] = [];
      const events: TelemetryEvent[] = request.body.events.map((event, index) => {
        const observedAt = Date.parse(event.observed_at);
        if (!(observedAt >= earliest && observedAt <= latest)) {
          fields.push({
            path: `events.${index}.observed_at`,
            message: 'must be within the last 30 days and at most 5 minutes ahead',
          });
        }
        const host = hostOf(event.url);
        if (host === null)
          fields.push({ path: `events.${index}.url`, message: 'must be a URL or a host name' });
        return {
          observed_at: observedAt,
          host: host ?? '',
          verdict: event.verdict,
          classification_ms: event.classification_ms,
        };
      });
      if (fields.length > 0) {
        throw new AppError('VALIDATION_FAILED', 'Some events are not valid; nothing was stored', {
          fields: fields.slice(0, 20),
        });
      }
      try {
        const { duplicate } = await sink(
          {
            org_id: device.orgId,
            device_id: device.deviceId,
            batch_id: request.body.batch_id,
            received_at: receivedAt,
            events,
          },
          traceContextOf(request),
        );
        return reply.code(202).send({ batch_id: request.body.batch_id, accepted: events.length, duplicate });
      } catch (error) {
        if (isAppError(error) && error.code === 'SERVICE_UNAVAILABLE') {
          reply.header('retry-after', String(RETRY_AFTER_SECONDS));
        }
        throw error;
      }
    },
  );
};
