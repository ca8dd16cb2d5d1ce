/**
 * Device tokens (DESIGN.md section 3, "Device credential"): minted by the enrollment service as
 * `generateSecret(DEVICE_TOKEN_PREFIX)` (`@sts/crypto/secrets`: 32 random bytes in base64url), presented by
 * agents in X-Device-Token. The shape lives here so that the gateway can refuse a value that cannot be a
 * token without asking the enrollment service.
 */
export const DEVICE_TOKEN_PREFIX = 'sts_dt';

const DEVICE_TOKEN_SHAPE = new RegExp(`^${DEVICE_TOKEN_PREFIX}_[A-Za-z0-9_-]{43}$`);

/** Whether a presented value can be a device token at all (saves a lookup for garbage). */
export function looksLikeDeviceToken(value: string): boolean {
  return DEVICE_TOKEN_SHAPE.test(value);
}
