import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError, isAppError } from '@sts/errors/app-error';
import { TELEMETRY_LIMITS, VERDICTS, type TelemetryEvent } from '@sts/events/telemetry';
import { looksLikeDeviceToken } from '@sts/vocabulary/device-token';
import { errorResponses } from '../contract/contract-schemas';
import { clientAddressKey } from '../limits/client-address';
import type { AuthenticatedDevice, DeviceCredentials } from '../auth/device-credentials';
import { RateLimitExceeded, type Limit, type LimitVerdict, type RateLimiter } from '../limits/rate-limiter';
import type { TelemetrySink } from '../telemetry/telemetry-sink';
import { callOptionsFor, traceContextOf } from '../observability/http-observability';

/** C0 and C1 control characters and DEL. */
const CONTROL_CHARACTER = /\p{Cc}/u;
/** Seconds an agent should wait before sending again when the batch could not be taken. */
const RETRY_AFTER_SECONDS = 5;
/**
 * Lookups of unknown tokens an address may cause per minute, as a multiple of its allowed failures. Failures
 * are counted once a lookup has answered, so requests in flight together could each pass the failure check;
 * this bounds them (with room for many new devices behind one address after a gateway restart).
 */
const AUTH_LOOKUPS_PER_FAILURE = 10;

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
 *
 * Everything that does not need the body is decided before it is read (`onRequest`): the token (401/403,
 * before any body validation; a value not shaped like a token never reaches the enrollment service),
 * failed authentications per client address, batches per device and the organization's bytes per minute
 * (429). So a client without a valid token costs a header check, however large its body.
 */
export const telemetryRoute: FastifyPluginAsyncZod<{
  credentials: DeviceCredentials;
  sink: TelemetrySink;
  bodyLimit: number;
  /** Where every limit below is counted (shared by the gateway replicas). */
  limiter: RateLimiter;
  perDevicePerMinute: number;
  /** Accepted telemetry bytes per organization per minute. */
  orgBytesPerMinute: number;
  /** Failed device authentications per client address per minute. */
  authFailuresPerMinute: number;
  now: () => number;
}> = async (
  app,
  {
    credentials,
    sink,
    bodyLimit,
    limiter,
    perDevicePerMinute,
    orgBytesPerMinute,
    authFailuresPerMinute,
    now,
  },
) => {
  // Scopes are the names of the shared counters: they stay the same across releases.
  const batchesPerDevice: Limit = { scope: 'telemetry', max: perDevicePerMinute };
  // Bytes per organization are charged before the body is read.
  const bytesPerOrg: Limit = { scope: 'telemetry-org-bytes', max: orgBytesPerMinute };
  const authFailures: Limit = { scope: 'device-auth-failures', max: authFailuresPerMinute };
  // Lookups of tokens this gateway does not know, per client address.
  const authLookups: Limit = {
    scope: 'device-auth-lookups',
    max: authFailuresPerMinute * AUTH_LOOKUPS_PER_FAILURE,
  };
  // The device each request's token named, found before its body was read.
  const admitted = new WeakMap<FastifyRequest, AuthenticatedDevice>();

  /**
   * The device of the request's token. A token this gateway knows to be valid is never held up by
   * failures at its address (devices behind one NAT with a client that keeps failing go on reporting);
   * any other token is refused with 429 once the address has had its failures this minute, without a
   * call. Missing, malformed and unknown tokens count as failures of the address.
   */
  async function authenticate(request: FastifyRequest): Promise<AuthenticatedDevice> {
    const header = request.headers['x-device-token'];
    const token = typeof header === 'string' ? header : undefined;
    const address = `address:${clientAddressKey(request.ip)}`;
    if (!credentials.recognises(token)) {
      const refuse = (verdict: LimitVerdict) =>
        new RateLimitExceeded(
          verdict.resetInMs,
          'Too many failed device authentications from this address; wait before trying again',
        );
      const failed = await limiter.check(authFailures, address);
      if (failed.over) throw refuse(failed);
      // Counted before the lookup, so that concurrent requests cannot all pass the check above.
      if (token !== undefined && looksLikeDeviceToken(token)) {
        const lookups = await limiter.charge(authLookups, address);
        if (lookups.over) throw refuse(lookups);
      }
    }
    try {
      return await credentials.authenticate(token, callOptionsFor(request));
    } catch (error) {
      if (isAppError(error) && error.code === 'DEVICE_TOKEN_INVALID')
        await limiter.record(authFailures, address);
      throw error;
    }
  }

  app.post(
    '/api/device/telemetry',
    {
      bodyLimit,
      onRequest: async (request) => {
        const device = await authenticate(request);
        // Before the body is read, per device (a batch refused for its size or events counts too) and per
        // organization: the bytes the request declares (its whole limit when it declares none) are charged
        // now, so requests in flight together cannot all pass the budget; a refused batch's bytes count too.
        const declared = Number(request.headers['content-length']);
        const bytes =
          Number.isSafeInteger(declared) && declared > 0 ? Math.min(declared, bodyLimit) : bodyLimit;
        const [sent, used] = await Promise.all([
          limiter.charge(batchesPerDevice, device.deviceId),
          limiter.charge(bytesPerOrg, device.orgId, bytes),
        ]);
        if (sent.over) {
          throw new RateLimitExceeded(
            sent.resetInMs,
            (seconds) => `At most ${perDevicePerMinute} batches per device per minute; retry in ${seconds} s`,
          );
        }
        if (used.over) {
          throw new RateLimitExceeded(
            used.resetInMs,
            (seconds) =>
              `This organization has sent its ${orgBytesPerMinute} bytes of telemetry for this minute; retry in ${seconds} s`,
          );
        }
        admitted.set(request, device);
      },
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
        description: `Authenticated by the X-Device-Token header, checked before the body is read (401 for a missing or invalid token, 403 for a disabled device, before any body validation). At most ${TELEMETRY_LIMITS.eventsPerBatch} events and ${bodyLimit} bytes per batch (413: split the batch), ${perDevicePerMinute} batches per device per minute and ${orgBytesPerMinute} bytes of accepted batches per organization per minute (then 429 with Retry-After); after repeated failed authentications from one address, tokens the gateway does not know get 429 until the minute ends. observed_at at most 30 days in the past and 5 minutes in the future. A repeated batch_id of the same device is accepted and counted once. Only the host of each url is stored.`,
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
      const device = admitted.get(request);
      if (!device) throw new AppError('INTERNAL', 'telemetry request without an authenticated device');
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
      let duplicate: boolean;
      try {
        ({ duplicate } = await sink(
          {
            org_id: device.orgId,
            device_id: device.deviceId,
            batch_id: request.body.batch_id,
            received_at: receivedAt,
            events,
          },
          traceContextOf(request),
        ));
      } catch (error) {
        if (isAppError(error) && error.code === 'SERVICE_UNAVAILABLE') {
          reply.header('retry-after', String(RETRY_AFTER_SECONDS));
        }
        throw error;
      }
      return reply.code(202).send({ batch_id: request.body.batch_id, accepted: events.length, duplicate });
    },
  );
};
