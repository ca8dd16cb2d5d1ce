import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Role } from '@sts/vocabulary/roles';
import { maskedUrl } from '@sts/vocabulary/urls';
import type {
  AlertDelivery as ProtoAlertDelivery,
  AlertEndpoint as ProtoAlertEndpoint,
} from '@sts/proto/gen/notification/v1/notification';
import { requireCaller, requireRoles } from '../auth/caller-context';
import { errorResponses, idParam } from '../contract/contract-schemas';
import type { UpstreamClients } from '../upstream-clients';
import { required } from '../contract/upstream-answer';
import { callOptionsFor } from '../observability/http-observability';

const alertEndpointPayload = z
  .object({
    id: z.string(),
    url: z
      .string()
      .describe(
        'HTTPS URL that receives alerts. Only ORG_ADMIN reads it whole: others get the origin with the path ' +
          'and query masked (`https://hooks.slack.com/services/…/…/…`, `?token=…`), as they often hold a secret',
      ),
    description: z.string().optional(),
    created_at: z.string(),
    disabled_at: z
      .string()
      .optional()
      .describe(
        'Present when deliveries failed for days and the endpoint was switched off (enable it again)',
      ),
  })
  .meta({ id: 'AlertEndpoint' });

const createdAlertEndpointPayload = alertEndpointPayload
  .extend({
    secret: z
      .string()
      .describe('Signing secret (Standard Webhooks, `whsec_` + base64): shown once, never listed again'),
  })
  .meta({ id: 'CreatedAlertEndpoint' });

const alertDeliveryPayload = z
  .object({
    id: z.string().describe('The message id, sent as `webhook-id` on every attempt'),
    endpoint_id: z.string(),
    event_type: z.enum(['alert.threat_detected', 'alert.test']),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number(),
    last_response_code: z
      .number()
      .nullable()
      .describe('HTTP status of the last attempt; null without an answer'),
    last_error: z.string().nullable(),
    last_duration_ms: z.number().nullable(),
    last_attempt_at: z.string().nullable(),
    next_attempt_at: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'AlertDelivery' });

/**
 * The endpoint as `viewer` may read it. Its URL is often the credential itself (Slack, Teams, `?token=`):
 * ORG_ADMIN, who registers and replaces it, reads it whole; any other role gets it masked.
 */
function endpointToContract(
  endpoint: ProtoAlertEndpoint,
  viewer: Role,
): z.infer<typeof alertEndpointPayload> {
  // Optional fields are left out when empty (undefined is not serialized).
  return {
    id: endpoint.id,
    url: viewer === 'ORG_ADMIN' ? endpoint.url : maskedUrl(endpoint.url),
    description: endpoint.description || undefined,
    created_at: required(endpoint.createdAt, 'created_at').toISOString(),
    disabled_at: endpoint.disabledAt?.toISOString(),
  };
}

function deliveryToContract(delivery: ProtoAlertDelivery): z.infer<typeof alertDeliveryPayload> {
  const attempted = delivery.attempts > 0;
  return {
    id: delivery.id,
    endpoint_id: delivery.endpointId,
    event_type: delivery.eventType as z.infer<typeof alertDeliveryPayload>['event_type'],
    status: delivery.status as z.infer<typeof alertDeliveryPayload>['status'],
    attempts: delivery.attempts,
    last_response_code: attempted && delivery.lastResponseCode ? delivery.lastResponseCode : null,
    last_error: delivery.lastError || null,
    last_duration_ms: attempted ? delivery.lastDurationMs : null,
    last_attempt_at: delivery.lastAttemptAt?.toISOString() ?? null,
    next_attempt_at: delivery.nextAttemptAt?.toISOString() ?? null,
    created_at: required(delivery.createdAt, 'created_at').toISOString(),
  };
}

/**
 * The organization's alert endpoints (contract section 2), and our extensions: a test message and the
 * delivery log of an endpoint. Reading: ORG_ADMIN and ANALYST (who reads URLs masked); changing and test
 * sends: ORG_ADMIN.
 */
export const alertEndpointRoutes: FastifyPluginAsyncZod<{ clients: UpstreamClients }> = async (
  app,
  { clients },
) => {
  const security = [{ bearerAuth: [] }];
  const tags = ['Alert endpoints'];

  app.get(
    '/api/org-alert-endpoints',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags,
        summary: 'Alert endpoints of the organization',
        security,
        response: { 200: z.array(alertEndpointPayload), ...errorResponses(401, 403) },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const { endpoints } = await clients.notification.listAlertEndpoints(
        { orgId: caller.org.id },
        callOptionsFor(request),
      );
      return endpoints.map((endpoint) => endpointToContract(endpoint, caller.role));
    },
  );

  app.post(
    '/api/org-alert-endpoints',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags,
        summary: 'Register an HTTPS destination for alerts',
        description:
          'Alerts are POSTed as JSON `{id, type, created_at, data}` signed per Standard Webhooks ' +
          '(`webhook-id`, `webhook-timestamp`, `webhook-signature`) with the secret returned here once.',
        security,
        body: z
          .object({
            url: z.string().min(1).max(2_048).describe('https:// only; no user name, password or fragment'),
            description: z.string().max(200).optional(),
          })
          .strict(),
        response: { 201: createdAlertEndpointPayload, ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const caller = requireCaller(request);
      const created = await clients.notification.createAlertEndpoint(
        {
          orgId: caller.org.id,
          url: request.body.url,
          description: request.body.description ?? '',
        },
        callOptionsFor(request),
      );
      return reply.code(201).send(
        Object.assign(endpointToContract(required(created.endpoint, 'alert endpoint'), caller.role), {
          secret: created.secret,
        }),
      );
    },
  );

  app.delete(
    '/api/org-alert-endpoints/:id',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags,
        summary: 'Remove an alert endpoint (its pending deliveries go with it)',
        security,
        params: z.object({ id: idParam }),
        response: { 204: z.null().describe('No content'), ...errorResponses(401, 403, 404) },
      },
    },
    async (request, reply) => {
      await clients.notification.deleteAlertEndpoint(
        { orgId: requireCaller(request).org.id, endpointId: request.params.id },
        callOptionsFor(request),
      );
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/org-alert-endpoints/:id/test',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags,
        summary: 'Send a test alert (`alert.test`) to the endpoint',
        description:
          'The message goes the way every alert goes (signature, retries); follow it in the deliveries. ' +
          'At most 3 test messages per endpoint a minute and 20 an hour (429 `RATE_LIMITED` beyond).',
        security,
        params: z.object({ id: idParam }),
        response: { 202: alertDeliveryPayload, ...errorResponses(401, 403, 404, 429) },
      },
    },
    async (request, reply) => {
      const { delivery } = await clients.notification.sendTestAlert(
        { orgId: requireCaller(request).org.id, endpointId: request.params.id },
        callOptionsFor(request),
      );
      return reply.code(202).send(deliveryToContract(required(delivery, 'delivery')));
    },
  );

  app.post(
    '/api/org-alert-endpoints/:id/enable',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags,
        summary: 'Switch a disabled endpoint back on',
        description: 'New alerts go to it again; messages given up while it was off stay failed.',
        security,
        params: z.object({ id: idParam }),
        response: { 200: alertEndpointPayload, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const { endpoint } = await clients.notification.enableAlertEndpoint(
        { orgId: caller.org.id, endpointId: request.params.id },
        callOptionsFor(request),
      );
      return endpointToContract(required(endpoint, 'alert endpoint'), caller.role);
    },
  );

  app.post(
    '/api/org-alert-endpoints/:id/rotate-secret',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags,
        summary: 'Replace the signing secret',
        description:
          'Returns the new secret once. For 24 hours messages carry a signature with the previous secret too ' +
          '(`webhook-signature` holds both), so receivers can switch without losing a message.',
        security,
        params: z.object({ id: idParam }),
        response: {
          200: createdAlertEndpointPayload
            .extend({ previous_secret_expires_at: z.string() })
            .meta({ id: 'RotatedAlertEndpoint' }),
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => {
      const caller = requireCaller(request);
      const rotated = await clients.notification.rotateAlertSecret(
        { orgId: caller.org.id, endpointId: request.params.id },
        callOptionsFor(request),
      );
      return Object.assign(endpointToContract(required(rotated.endpoint, 'alert endpoint'), caller.role), {
        secret: rotated.secret,
        previous_secret_expires_at: required(rotated.previousSecretExpiresAt, 'expiry').toISOString(),
      });
    },
  );

  app.get(
    '/api/org-alert-endpoints/:id/deliveries',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags,
        summary: "The endpoint's recent deliveries, newest first, with their last attempt",
        security,
        params: z.object({ id: idParam }),
        querystring: z.object({ limit: z.coerce.number().int().min(1).max(200).optional() }).strict(),
        response: { 200: z.array(alertDeliveryPayload), ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const { deliveries } = await clients.notification.listAlertDeliveries(
        {
          orgId: requireCaller(request).org.id,
          endpointId: request.params.id,
          limit: request.query.limit ?? 0,
        },
        callOptionsFor(request),
      );
      return deliveries.map(deliveryToContract);
    },
  );
};
