import { createHash } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { AppError, isAppError } from '@sts/errors/app-error';
import { looksLikeDeviceToken } from '@sts/vocabulary/device-token';
import type { Logger } from '@sts/logger/create-logger';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { subscribeToEvents } from '../caching/event-subscriptions';
import { GroupedCache } from '../caching/grouped-cache';
import type { UpstreamClients } from '../upstream-clients';
import type { CallOptions } from '@sts/grpc/service-types';

export interface AuthenticatedDevice {
  deviceId: string;
  orgId: string;
}

interface CachedDevice extends AuthenticatedDevice {
  disabled: boolean;
}

const deviceGroup = (deviceId: string) => `device:${deviceId}`;

/** How long a token the enrollment service vouched for counts as one this gateway knows. */
const KNOWN_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * Who a device token belongs to, without a database round trip per telemetry batch: answers of the
 * enrollment service are kept for the TTL, keyed by the token's SHA-256 (the token itself is not
 * kept), and device events (disabled, enabled, deleted, enrolled again) evict them at once.
 * A value that is not shaped like a device token is refused here, without a call. Unknown tokens are
 * not remembered: each costs a call, which the caller's limits bound (failures per client address).
 * Tokens the service vouched for within a day are known (`recognises`), so that those limits need not
 * hold up devices that share an address with whoever keeps failing.
 */
export class DeviceCredentials {
  private readonly cache: GroupedCache<CachedDevice>;
  /** SHA-256 of tokens the enrollment service vouched for lately (a value of its own, not a credential). */
  private readonly known: GroupedCache<true>;

  constructor(
    private readonly clients: Pick<UpstreamClients, 'enrollment'>,
    ttlMs: number,
  ) {
    this.cache = new GroupedCache(ttlMs, {
      maxEntries: 100_000,
      groupsOf: (_key, device) => [deviceGroup(device.deviceId)],
    });
    this.known = new GroupedCache(KNOWN_TOKEN_TTL_MS, { maxEntries: 100_000 });
  }

  /**
   * Whether the enrollment service vouched for this token lately (it may have been revoked since:
   * `authenticate` still decides). Never calls anything.
   */
  recognises(token: string | undefined): boolean {
    return token !== undefined && looksLikeDeviceToken(token) && this.known.get(keyOf(token)) === true;
  }

  /** The device of the token; DEVICE_TOKEN_INVALID (401) or DEVICE_DISABLED (403) otherwise. */
  async authenticate(token: string | undefined, call: CallOptions): Promise<AuthenticatedDevice> {
    if (!token) throw new AppError('DEVICE_TOKEN_INVALID', 'X-Device-Token header is missing');
    if (!looksLikeDeviceToken(token)) {
      throw new AppError('DEVICE_TOKEN_INVALID', 'X-Device-Token is not a device token');
    }
    const key = keyOf(token);
    let device: CachedDevice;
    try {
      device = await this.cache.getOrLoad(key, async () => {
        const found = await this.clients.enrollment.authenticateDevice({ deviceToken: token }, call);
        return {
          deviceId: found.deviceId,
          orgId: found.orgId,
          disabled: found.status === DeviceStatus.DEVICE_STATUS_DISABLED,
        };
      });
    } catch (error) {
      if (isAppError(error) && error.code === 'DEVICE_TOKEN_INVALID') this.known.delete(key);
      throw error;
    }
    this.known.set(key, true);
    if (device.disabled)
      throw new AppError('DEVICE_DISABLED', 'This device is disabled; its telemetry is refused');
    return { deviceId: device.deviceId, orgId: device.orgId };
  }

  deviceChanged(deviceId: string): void {
    this.cache.deleteGroup(deviceGroup(deviceId));
  }
}

function keyOf(token: string): string {
  return createHash('sha256').update(token).digest('base64');
}

/**
 * Device events (disabled, enabled, deleted, enrolled again) evict the device's cached credential at once.
 * (Cached analytics answers are evicted when analytics has applied the change: `subscribeToCacheEvictions`.)
 */
export function subscribeToDeviceChanges(
  nc: NatsConnection,
  namespace: string,
  credentials: DeviceCredentials,
  logger: Logger,
): Subscription[] {
  return subscribeToEvents(
    nc,
    namespace,
    ['device.enrolled', 'device.disabled', 'device.enabled', 'device.deleted'] as const,
    (_type, data) => credentials.deviceChanged(data.device_id),
    logger,
  );
}
