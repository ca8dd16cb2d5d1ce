import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireCaller, requireRoles } from '../caller-context';
import {
  emailedEnrollmentCodeToContract,
  enrollmentCodeToContract,
  enrollmentKeyToContract,
} from '../contract-mapping';
import { enrollmentCodePayload, enrollmentKeyPayload, errorResponses } from '../contract-schemas';
import type { UpstreamClients } from '../upstream-clients';
import { callOptionsFor } from '../http-observability';

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
          'The e-mail carries the code, the enrollment key and the agent command. Needs a current enrollment key (409 otherwise).',
        security,
        body: z.object({ email: z.email().max(254) }).strict(),
        response: {
          200: z
            .object({ email: z.string(), expires_at: z.iso.datetime() })
            .meta({ id: 'EmailedEnrollmentCode' }),
          ...errorResponses(400, 401, 403, 409),
        },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const emailed = await clients.enrollment.emailEnrollmentCode(
        {
          orgId: caller.org.id,
          email: request.body.email,
          requestedByName: caller.name,
          orgName: caller.org.name,
        },
        callOptionsFor(request),
      );
      return emailedEnrollmentCodeToContract(request.body.email.toLowerCase(), emailed);
    },
  );
};
