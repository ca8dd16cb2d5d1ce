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
  // Platform
  'DEADLINE_EXCEEDED',
  'SERVICE_UNAVAILABLE',
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}
