import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireCaller, requireRoles } from '../caller-context';
import { enrollmentCodePayload, enrollmentKeyPayload, errorResponses } from '../contract-schemas';
import type { UpstreamClients } from '../upstream-clients';

/** The maximum count per POST /api/enrollment-codes; the service enforces the same limit. */
export const MAX_CODES_PER_REQUEST = 100;

function keyToContract(key: { key: string; createdAt?: Date } | undefined) {
  if (!key?.createdAt) throw new Error('enrollment returned an incomplete key');
  return { key: key.key, created_at: key.createdAt.toISOString() };
}

/** Enrollment key and one-time codes: ORG_ADMIN only (DESIGN.md section 3). */
export const enrollmentRoutes: FastifyPluginAsyncZod<{ clients: UpstreamClients }> = async (app, { clients }) => {
  const adminOnly = { onRequest: [requireRoles('ORG_ADMIN')] };
  const security = [{ bearerAuth: [] }];

  app.get(
    '/api/enrollment-key',
    {
      ...adminOnly,
      schema: {
        tags: ['Enrollment'],
        summary: "The organization's current enrollment key",
        security,
        response: { 200: enrollmentKeyPayload, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { key } = await clients.enrollment.getEnrollmentKey({ orgId: requireCaller(request).org.id }, { requestId: request.id });
      return keyToContract(key);
    },
  );

  app.post(
    '/api/enrollment-key',
    {
      ...adminOnly,
      schema: {
        tags: ['Enrollment'],
        summary: 'Create the enrollment key, or rotate it (the previous key stops working at once)',
        description: 'Devices already enrolled keep working: they use their own device tokens.',
        security,
        response: { 200: enrollmentKeyPayload, ...errorResponses(401, 403) },
      },
    },
    async (request) => {
      const { key } = await clients.enrollment.rotateEnrollmentKey({ orgId: requireCaller(request).org.id }, { requestId: request.id });
      return keyToContract(key);
    },
  );

  app.delete(
    '/api/enrollment-key',
    {
      ...adminOnly,
      schema: {
        tags: ['Enrollment'],
        summary: 'Revoke the enrollment key: new enrollments are blocked until a key is created again',
        security,
        response: { 204: z.null().describe('No content'), ...errorResponses(401, 403) },
      },
    },
    async (request, reply) => {
      await clients.enrollment.revokeEnrollmentKey({ orgId: requireCaller(request).org.id }, { requestId: request.id });
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/enrollment-codes',
    {
      ...adminOnly,
      schema: {
        tags: ['Enrollment'],
        summary: 'Generate one-time enrollment codes (valid 24 hours)',
        description: `count defaults to 1 and may be at most ${MAX_CODES_PER_REQUEST}.`,
        security,
        body: z.object({ count: z.number().int().min(1).max(MAX_CODES_PER_REQUEST).optional() }).strict().nullish(),
        response: {
          200: z.object({ codes: z.array(enrollmentCodePayload) }).meta({ id: 'EnrollmentCodes' }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      const { codes } = await clients.enrollment.createEnrollmentCodes(
        { orgId: requireCaller(request).org.id, count: request.body?.count ?? 1 },
        { requestId: request.id },
      );
      return {
        codes: codes.map((code) => {
          if (!code.expiresAt) throw new Error('enrollment returned a code without expiry');
          return { code: code.code, expires_at: code.expiresAt.toISOString() };
        }),
      };
    },
  );

  app.post(
    '/api/enrollment-codes/email',
    {
      ...adminOnly,
      schema: {
        tags: ['Enrollment'],
        summary: 'E-mail one code with installation instructions',
        description: 'The e-mail carries the code, the enrollment key and the agent command. Needs a current enrollment key (409 otherwise).',
        security,
        body: z.object({ email: z.email().max(254) }).strict(),
        response: {
          200: z.object({ email: z.string(), expires_at: z.iso.datetime() }).meta({ id: 'EmailedEnrollmentCode' }),
          ...errorResponses(400, 401, 403, 409),
        },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const { expiresAt } = await clients.enrollment.emailEnrollmentCode(
        { orgId: caller.org.id, email: request.body.email, requestedByName: caller.name, orgName: caller.org.name },
        { requestId: request.id },
      );
      if (!expiresAt) throw new Error('enrollment returned no expiry');
      return { email: request.body.email.toLowerCase(), expires_at: expiresAt.toISOString() };
    },
  );
};
