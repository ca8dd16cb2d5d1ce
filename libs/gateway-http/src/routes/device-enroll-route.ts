import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError, isAppError } from '@sts/errors/app-error';
import type { ErrorCode } from '@sts/errors/error-code';
import { METADATA_MAX_BYTES, METADATA_MAX_DEPTH, nestsDeeperThan } from '@sts/vocabulary/device-metadata';
import { clientAddressKey, clientNetworkKey } from '../limits/client-address';
import { errorResponses } from '../contract/contract-schemas';
import type { EnrollFailureLimiter } from '../limits/enroll-failure-limiter';
import { RateLimitExceeded, type RateLimiter } from '../limits/rate-limiter';
import type { UpstreamClients } from '../upstream-clients';
import { callOptionsFor } from '../observability/http-observability';

/**
 * Answers that count as a failed enrollment: a wrong key or code, and a machine enrolled in another
 * organization (that answer tells its holder a machine id is in use elsewhere, so asking it is throttled
 * like guessing; docs/decisions.md, "What a failed enrollment is"). Malformed requests count too (below).
 */
const GUESSING_FAILURES: ReadonlySet<ErrorCode> = new Set([
  'ENROLLMENT_KEY_INVALID',
  'ENROLLMENT_CODE_INVALID',
  'ENROLLMENT_CODE_EXPIRED',
  'ENROLLMENT_CODE_USED',
  'MACHINE_ENROLLED_ELSEWHERE',
]);

/** C0 and C1 control characters and DEL, as the enrollment service's own check. */
const CONTROL_CHARACTER = /\p{Cc}/u;

/** Length in characters (code points), as JSON Schema's maxLength and the enrollment service count it. */
function characterCount(value: string): number {
  let count = 0;
  for (const _character of value) count++;
  return count;
}

const printable = (max: number) =>
  z
    .string()
    .min(1)
    .refine((value) => characterCount(value) <= max, `must be at most ${max} characters`)
    .refine((value) => !CONTROL_CHARACTER.test(value), 'must not contain control characters')
    .meta({ maxLength: max });

/**
 * POST /api/device/enroll: the agent's call, authenticated by the enrollment key (no user JWT).
 * Guessing is throttled by failures per address, and per key for the addresses that fail with it;
 * successful roll-outs are not slowed, and a guesser cannot lock a key for everyone.
 */
export const deviceEnrollRoute: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  limiter: RateLimiter;
  perAddressPerMinute: number;
  failures: EnrollFailureLimiter;
}> = async (app, { clients, limiter, perAddressPerMinute, failures }) => {
  app.post(
    '/api/device/enroll',
    {
      // A malformed request is a failed enrollment too: the handler counts it, then answers its 400.
      attachValidation: true,
      onRequest: limiter.perAddress({ scope: 'post-api-device-enroll', max: perAddressPerMinute }),
      schema: {
        tags: ['Enrollment'],
        summary: "Enroll a device (the agent's enroll command)",
        description:
          'Authenticated by the X-Enrollment-Key header. Re-enrolling a machine already in the organization ' +
          'keeps its device_id and issues a new device_token (the old one stops working); it needs proof that ' +
          'the caller is that device: its current device token in X-Device-Token, or an administrator having ' +
          'allowed the re-enrollment (POST /api/devices/{device_id}/re-enrollment). Otherwise 409 ' +
          'MACHINE_ALREADY_ENROLLED, and nothing changes.',
        headers: z.object({
          'x-enrollment-key': z.string().optional(),
          'x-device-token': z
            .string()
            .max(200)
            .optional()
            .describe("The agent's current device token, when it has one (proof for a re-enrollment)"),
        }),
        body: z
          .object({
            code: z.string().min(1).max(64),
            machine_id: printable(128),
            hostname: printable(255),
            // Depth first: JSON.stringify recurses, and hostile nesting would exhaust its stack (a 500).
            // Then serialized once: the size check measures the very text sent to the enrollment service.
            metadata: z
              .record(z.string(), z.unknown())
              .default({})
              .refine(
                (value) => !nestsDeeperThan(value, METADATA_MAX_DEPTH),
                `must not nest deeper than ${METADATA_MAX_DEPTH} levels`,
              )
              .transform((value) => JSON.stringify(value))
              .refine(
                (json) => Buffer.byteLength(json) <= METADATA_MAX_BYTES,
                `must be at most ${METADATA_MAX_BYTES} bytes as JSON`,
              ),
          })
          .strict(),
        response: {
          200: z
            .object({
              device_id: z.string(),
              org_id: z.string(),
              device_token: z.string().describe('Shown once: the credential of this device for later calls'),
              re_enrolled: z.boolean(),
            })
            .meta({ id: 'EnrolledDevice' }),
          ...errorResponses(400, 401, 409, 429),
        },
      },
    },
    async (request) => {
      const key = request.headers['x-enrollment-key'];
      // A request without a key is a failure too, counted against its address (docs/decisions.md).
      const source = {
        key: key || null,
        address: clientAddressKey(request.ip),
        network: clientNetworkKey(request.ip),
      };
      const blocked = await failures.check(source);
      if (blocked.over) {
        throw new RateLimitExceeded(
          blocked.resetInMs,
          'Too many failed enrollments; wait before trying again',
        );
      }
      if (request.validationError) {
        await failures.recordFailure(source);
        throw request.validationError;
      }
      if (!key) {
        await failures.recordFailure(source);
        throw new AppError('ENROLLMENT_KEY_INVALID', 'X-Enrollment-Key header is missing');
      }
      try {
        const enrolled = await clients.enrollment.enrollDevice(
          {
            enrollmentKey: key,
            code: request.body.code,
            machineId: request.body.machine_id,
            hostname: request.body.hostname,
            metadataJson: request.body.metadata,
            deviceToken: request.headers['x-device-token'] ?? '',
          },
          callOptionsFor(request),
        );
        return {
          device_id: enrolled.deviceId,
          org_id: enrolled.orgId,
          device_token: enrolled.deviceToken,
          re_enrolled: enrolled.reEnrolled,
        };
      } catch (error) {
        if (isAppError(error) && GUESSING_FAILURES.has(error.code)) await failures.recordFailure(source);
        throw error;
      }
    },
  );
};
