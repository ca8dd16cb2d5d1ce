import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isAppError } from '@sts/errors/app-error';
import type { EmailEnrollmentCodeResponse } from '@sts/proto/gen/enrollment/v1/enrollment';
import { requireCaller, requireRoles } from '../auth/caller-context';
import {
  emailedEnrollmentCodeToContract,
  enrollmentCodeToContract,
  enrollmentKeyToContract,
} from '../contract/contract-mapping';
import {
  enrollmentCodePayload,
  enrollmentKeyPayload,
  errorResponses,
  idParam,
} from '../contract/contract-schemas';
import type { UpstreamClients } from '../upstream-clients';
import { required } from '../contract/upstream-answer';
import { callOptionsFor } from '../observability/http-observability';

/** The maximum count per POST /api/enrollment-codes; the service enforces the same limit. */
const MAX_CODES_PER_REQUEST = 100;

/** Enrollment key and one-time codes: ORG_ADMIN only (DESIGN.md section 3). */
export const enrollmentRoutes: FastifyPluginAsyncZod<{ clients: UpstreamClients }> = async (
  app,
  { clients },
) => {
  // Every route of this (encapsulated) plugin; runs after the parent's authenticate hook.
  app.addHook('onRequest', requireRoles('ORG_ADMIN'));
  const security = [{ bearerAuth: [] }];

  app.get(
    '/api/enrollment-key',
    {
      schema: {
        tags: ['Enrollment'],
        summary: "The organization's current enrollment key",
        security,
        response: { 200: enrollmentKeyPayload, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { key } = await clients.enrollment.getEnrollmentKey(
        { orgId: requireCaller(request).org.id },
        callOptionsFor(request),
      );
      return enrollmentKeyToContract(key);
    },
  );

  app.post(
    '/api/enrollment-key',
    {
      schema: {
        tags: ['Enrollment'],
        summary: 'Create the enrollment key, or rotate it (the previous key stops working at once)',
        description: 'Devices already enrolled keep working: they use their own device tokens.',
        security,
        response: { 200: enrollmentKeyPayload, ...errorResponses(401, 403) },
      },
    },
    async (request) => {
      const { key } = await clients.enrollment.rotateEnrollmentKey(
        { orgId: requireCaller(request).org.id },
        callOptionsFor(request),
      );
      return enrollmentKeyToContract(key);
    },
  );

  app.delete(
    '/api/enrollment-key',
    {
      schema: {
        tags: ['Enrollment'],
        summary: 'Revoke the enrollment key: new enrollments are blocked until a key is created again',
        security,
        response: { 204: z.null().describe('No content'), ...errorResponses(401, 403) },
      },
    },
    async (request, reply) => {
      await clients.enrollment.revokeEnrollmentKey(
        { orgId: requireCaller(request).org.id },
        callOptionsFor(request),
      );
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/enrollment-codes',
    {
      schema: {
        tags: ['Enrollment'],
        summary: 'Generate one-time enrollment codes (valid 24 hours)',
        description: `count defaults to 1 and may be at most ${MAX_CODES_PER_REQUEST}.`,
        security,
        body: z
          .object({ count: z.number().int().min(1).max(MAX_CODES_PER_REQUEST).optional() })
          .strict()
          .nullish(),
        response: {
          200: z.object({ codes: z.array(enrollmentCodePayload) }).meta({ id: 'EnrollmentCodes' }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      const { codes } = await clients.enrollment.createEnrollmentCodes(
        { orgId: requireCaller(request).org.id, count: request.body?.count ?? 1 },
        callOptionsFor(request),
      );
      return { codes: codes.map(enrollmentCodeToContract) };
    },
  );

  app.post(
    '/api/enrollment-codes/email',
    {
      schema: {
        tags: ['Enrollment'],
        summary: 'E-mail one code with installation instructions',
        description:
          'The e-mail carries the code, the enrollment key and the agent command. Needs a current enrollment key ' +
          '(409 otherwise). Counts against the daily quota of e-mails the organization sends to outsiders, which ' +
          'invites share, and the daily limit per recipient: 429 RATE_LIMITED beyond either, with nothing sent.',
        security,
        body: z.object({ email: z.email().max(254) }).strict(),
        response: {
          200: z
            .object({ email: z.string(), expires_at: z.iso.datetime() })
            .meta({ id: 'EmailedEnrollmentCode' }),
          ...errorResponses(400, 401, 403, 409, 429),
        },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const options = callOptionsFor(request);
      // The quota lives in identity (it counts invites in their own transaction); this e-mail takes its
      // place there first, so a refusal leaves nothing written anywhere (docs/decisions.md).
      const { reservationId } = await clients.identity.reserveOutboundEmail(
        { orgId: caller.org.id, email: request.body.email },
        options,
      );
      let emailed: EmailEnrollmentCodeResponse;
      try {
        emailed = await clients.enrollment.emailEnrollmentCode(
          {
            orgId: caller.org.id,
            email: request.body.email,
            requestedByName: caller.name,
            orgName: caller.org.name,
          },
          options,
        );
      } catch (error) {
        // Given back only when the e-mail was certainly not requested (a refusal). After a timeout or a
        // lost answer it may have been, so it stays counted: the quota errs on the side of fewer e-mails.
        if (isAppError(error) && error.httpStatus < 500) {
          await clients.identity
            .releaseOutboundEmail({ orgId: caller.org.id, reservationId }, options)
            .catch((releaseError: unknown) =>
              request.log.warn({ err: releaseError }, 'could not give an e-mail reservation back'),
            );
        }
        throw error;
      }
      return emailedEnrollmentCodeToContract(request.body.email.toLowerCase(), emailed);
    },
  );

  app.post(
    '/api/devices/:device_id/re-enrollment',
    {
      schema: {
        tags: ['Enrollment'],
        summary: 'Allow a device to re-enroll without its device token (once, within 1 hour)',
        description:
          "For a reinstall that lost its credential: the next enrollment of this device's machine id with a " +
          'valid code re-enrolls it (same device_id, new device_token) without X-Device-Token. Without this, ' +
          'such an enrollment is refused with 409 MACHINE_ALREADY_ENROLLED, so that a code and a machine id ' +
          'never take a device over. Asking again renews the hour.',
        security,
        params: z.object({ device_id: idParam }),
        response: {
          200: z
            .object({ device_id: z.string(), allowed_until: z.iso.datetime() })
            .meta({ id: 'ReEnrollmentApproval' }),
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => {
      const { allowedUntil } = await clients.enrollment.allowReEnrollment(
        { orgId: requireCaller(request).org.id, deviceId: request.params.device_id },
        callOptionsFor(request),
      );
      return {
        device_id: request.params.device_id,
        allowed_until: required(allowedUntil, 'allowed_until').toISOString(),
      };
    },
  );
};
