/**
 * Stable, public error codes. Clients may branch on them, so a code is never renamed or reused;
 * add new ones instead. Every code has exactly one entry in ERROR_CATALOGUE (checked by the compiler).
 */
export const ERROR_CODES = [
  // Generic request problems
  'VALIDATION_FAILED',
  'MALFORMED_REQUEST',
  'UNSUPPORTED_MEDIA_TYPE',
  'PAYLOAD_TOO_LARGE',
  'ROUTE_NOT_FOUND',
  'RATE_LIMITED',
  // Authentication and authorization
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'DASHBOARD_ACCESS_DENIED',
  // Identity
  'ORGANIZATION_NOT_FOUND',
  'MEMBER_NOT_FOUND',
  'LAST_ADMIN',
  'ALREADY_MEMBER',
  'INVITE_NOT_FOUND',
  'INVITE_ALREADY_PENDING',
  'INVITE_TOKEN_INVALID',
  // Notifications
  'NOTIFICATION_NOT_FOUND',
  // Alert endpoints
  'ALERT_ENDPOINT_NOT_FOUND',
  'ALERT_ENDPOINT_DUPLICATE',
  'ALERT_ENDPOINT_LIMIT',
  // Enrollment and devices
  'ENROLLMENT_KEY_NOT_FOUND',
  'ENROLLMENT_KEY_REQUIRED',
  'ENROLLMENT_KEY_INVALID',
  'ENROLLMENT_CODE_INVALID',
  'ENROLLMENT_CODE_EXPIRED',
  'ENROLLMENT_CODE_USED',
  'ENROLLMENT_CODE_LIMIT',
  'MACHINE_ENROLLED_ELSEWHERE',
  'MACHINE_ALREADY_ENROLLED',
  'DEVICE_NOT_FOUND',
  'DEVICE_TOKEN_INVALID',
  'DEVICE_DISABLED',
  // Billing
  'BILLING_NOT_CONFIGURED',
  'BILLING_ACCOUNT_NOT_FOUND',
  'SUBSCRIPTION_ALREADY_ACTIVE',
  'PAYMENT_PROVIDER_UNAVAILABLE',
  'WEBHOOK_SIGNATURE_INVALID',
  // Platform
  'DEADLINE_EXCEEDED',
  'SERVICE_UNAVAILABLE',
  'SERVICE_CALLER_REFUSED',
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}
