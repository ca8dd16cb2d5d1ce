import { createHash } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { AppError } from '@sts/errors/app-error';
import type { GatewayCaches } from './gateway-caches';
import type { Logger } from '@sts/logger/create-logger';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { subscribeToEvents } from './event-subscriptions';
import { TtlCache } from './ttl-cache';
import type { UpstreamClients } from './upstream-clients';
import type { CallOptions } from '@sts/grpc/service-types';

export interface AuthenticatedDevice {
  deviceId: string;
  orgId: string;
}

interface CachedDevice extends AuthenticatedDevice {
  disabled: boolean;
}

const deviceGroup = (deviceId: string) => `device:${deviceId}`;

/**
 * Who a device token belongs to, without a database round trip per telemetry batch: answers of the
 * enrollment service are kept for the TTL, keyed by the token's SHA-256 (the token itself is not
 * kept), and device events (disabled, enabled, deleted, enrolled again) evict them at once.
 * Unknown tokens are not remembered: each costs a call, which the caller's limits bound.
 */
export class DeviceCredentials {
  private readonly cache: TtlCache<CachedDevice>;

  constructor(
    private readonly clients: Pick<UpstreamClients, 'enrollment'>,
    ttlMs: number,
  ) {
    this.cache = new TtlCache(ttlMs, {
      maxEntries: 100_000,
      groupsOf: (_key, device) => [deviceGroup(device.deviceId)],
    });
  }

  /** The device of the token; DEVICE_TOKEN_INVALID (401) or DEVICE_DISABLED (403) otherwise. */
  async authenticate(token: string | undefined, call: CallOptions): Promise<AuthenticatedDevice> {
    if (!token) throw new AppError('DEVICE_TOKEN_INVALID', 'X-Device-Token header is missing');
    const key = createHash('sha256').update(token).digest('base64');
    const device = await this.cache.getOrLoad(key, async () => {
      const found = await this.clients.enrollment.authenticateDevice({ deviceToken: token }, call);
      return {
        deviceId: found.deviceId,
        orgId: found.orgId,
        disabled: found.status === DeviceStatus.DEVICE_STATUS_DISABLED,
      };
    });
    if (device.disabled)
      throw new AppError('DEVICE_DISABLED', 'This device is disabled; its telemetry is refused');
    return { deviceId: device.deviceId, orgId: device.orgId };
  }

  deviceChanged(deviceId: string): void {
    this.cache.deleteGroup(deviceGroup(deviceId));
  }
}

/**
 * Device events (disabled, enabled, deleted, enrolled again) evict the device's cached credential and
 * its organization's cached analytics at once. The analytics answers are evicted a second time a moment
 * later: the analytics service applies the same event to ClickHouse shortly after this gateway hears
 * it, and a request in between would otherwise cache the state before the change for a whole TTL.
 */
export function subscribeToDeviceChanges(
  nc: NatsConnection,
  namespace: string,
  credentials: DeviceCredentials,
  caches: Pick<GatewayCaches, 'devicesChanged'>,
  logger: Logger,
  settleMs = 1_000,
): Subscription[] {
  return subscribeToEvents(
    nc,
    namespace,
    ['device.enrolled', 'device.disabled', 'device.enabled', 'device.deleted'] as const,
    (_type, data) => {
      credentials.deviceChanged(data.device_id);
      caches.devicesChanged(data.org_id);
      setTimeout(() => caches.devicesChanged(data.org_id), settleMs).unref();
    },
    logger,
  );
}
