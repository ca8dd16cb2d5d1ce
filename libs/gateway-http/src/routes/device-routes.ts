import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isAppError } from '@sts/errors/app-error';
import { requireCaller, requireRoles } from '../auth/caller-context';
import { DEVICE_STATUS_TO_PROTO } from '@sts/grpc/proto-enums';
import { deviceToContract } from '../contract/contract-mapping';
import { devicePayload, errorResponses, idParam, pageQuery } from '../contract/contract-schemas';
import type { DeviceCredentials } from '../auth/device-credentials';
import { setNextLink } from '../contract/link-header';
import { required } from '../contract/upstream-answer';
import type { UpstreamClients } from '../upstream-clients';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { callOptionsFor } from '../observability/http-observability';

const deviceParams = z.object({ device_id: idParam });

/**
 * Whether a failed change may have been made all the same: a deadline, an unavailable or failing
 * service may have committed it; a refusal (an AppError with a 4xx status, such as a device of another
 * organization) changed nothing.
 */
function mayHaveChanged(error: unknown): boolean {
  return !(isAppError(error) && error.httpStatus >= 400 && error.httpStatus < 500);
}

/**
 * Devices of the caller's organization. A disable, enable or delete evicts the device's cached
 * credential on this gateway before it answers (the others evict on the device event), so the device's
 * very next batch through it meets the new state; a refused call evicts nothing, so that a caller cannot
 * make another organization's device credentials be looked up again.
 */
export const deviceRoutes: FastifyPluginAsyncZod<{
  clients: UpstreamClients;
  credentials: Pick<DeviceCredentials, 'deviceChanged'>;
}> = async (app, { clients, credentials }) => {
  const security = [{ bearerAuth: [] }];
  /** Runs a change of the device, then evicts its credential when the change may have been made. */
  const changeDevice = async (deviceId: string, change: () => Promise<unknown>): Promise<void> => {
    try {
      await change();
    } catch (error) {
      if (mayHaveChanged(error)) credentials.deviceChanged(deviceId);
      throw error;
    }
    credentials.deviceChanged(deviceId);
  };
  const statusChanges = [
    { action: 'disable', method: 'disableDevice', summary: 'Disable a device (its telemetry is refused)' },
    { action: 'enable', method: 'enableDevice', summary: 'Enable a disabled device' },
  ] as const;

  app.get(
    '/api/devices',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags: ['Devices'],
        summary: "Devices of the caller's organization",
        security,
        querystring: pageQuery
          .extend({
            status: devicePayload.shape.status.optional(),
            q: z
              .string()
              .min(1)
              .max(255)
              .optional()
              .describe('Case-insensitive part of the hostname or machine id'),
          })
          .strict(),
        response: { 200: z.array(devicePayload), ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const { devices, nextCursor } = await clients.enrollment.listDevices(
        {
          orgId: requireCaller(request).org.id,
          limit: request.query.limit ?? 0,
          cursor: request.query.cursor ?? '',
          status: request.query.status
            ? DEVICE_STATUS_TO_PROTO[request.query.status]
            : DeviceStatus.DEVICE_STATUS_UNSPECIFIED,
          query: request.query.q ?? '',
        },
        callOptionsFor(request),
      );
      setNextLink(request, reply, nextCursor, request.query.limit);
      return devices.map(deviceToContract);
    },
  );

  app.get(
    '/api/devices/:device_id',
    {
      onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
      schema: {
        tags: ['Devices'],
        summary: "One device of the caller's organization (our addition)",
        security,
        params: deviceParams,
        response: { 200: devicePayload, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { device } = await clients.enrollment.getDevice(
        { orgId: requireCaller(request).org.id, deviceId: request.params.device_id },
        callOptionsFor(request),
      );
      return deviceToContract(required(device, 'device'));
    },
  );

  for (const { action, method, summary } of statusChanges) {
    app.post(
      `/api/devices/:device_id/${action}`,
      {
        onRequest: [requireRoles('ORG_ADMIN', 'ANALYST')],
        schema: {
          tags: ['Devices'],
          summary,
          security,
          params: deviceParams,
          response: { 204: z.null().describe('No content'), ...errorResponses(401, 403, 404) },
        },
      },
      async (request, reply) => {
        const orgId = requireCaller(request).org.id;
        await changeDevice(request.params.device_id, () =>
          clients.enrollment[method]({ orgId, deviceId: request.params.device_id }, callOptionsFor(request)),
        );
        return reply.code(204).send(null);
      },
    );
  }

  app.delete(
    '/api/devices/:device_id',
    {
      onRequest: [requireRoles('ORG_ADMIN')],
      schema: {
        tags: ['Devices'],
        summary: 'Delete a device and all its telemetry (irreversible)',
        security,
        params: deviceParams,
        response: { 204: z.null().describe('No content'), ...errorResponses(401, 403, 404) },
      },
    },
    async (request, reply) => {
      const orgId = requireCaller(request).org.id;
      await changeDevice(request.params.device_id, () =>
        clients.enrollment.deleteDevice(
          { orgId, deviceId: request.params.device_id },
          callOptionsFor(request),
        ),
      );
      return reply.code(204).send(null);
    },
  );
};
