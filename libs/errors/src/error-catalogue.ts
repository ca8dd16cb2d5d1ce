import type { ErrorCode } from './error-code';
import { GrpcStatus } from './grpc-status';

export interface ErrorDefinition {
  readonly httpStatus: number;
  readonly grpcStatus: GrpcStatus;
  /** Short, human-readable summary; the same for every occurrence (RFC 9457 `title`). */
  readonly title: string;
}

/** The one mapping of every error code to its gRPC and HTTP status. `Record` makes it exhaustive. */
export const ERROR_CATALOGUE: Record<ErrorCode, ErrorDefinition> = {
  VALIDATION_FAILED: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.INVALID_ARGUMENT,
    title: 'Request validation failed',
  },
  MALFORMED_REQUEST: { httpStatus: 400, grpcStatus: GrpcStatus.INVALID_ARGUMENT, title: 'Malformed request' },
  UNSUPPORTED_MEDIA_TYPE: {
    httpStatus: 415,
    grpcStatus: GrpcStatus.INVALID_ARGUMENT,
    title: 'Unsupported media type',
  },
  PAYLOAD_TOO_LARGE: { httpStatus: 413, grpcStatus: GrpcStatus.OUT_OF_RANGE, title: 'Payload too large' },
  ROUTE_NOT_FOUND: { httpStatus: 404, grpcStatus: GrpcStatus.UNIMPLEMENTED, title: 'Route not found' },
  RATE_LIMITED: { httpStatus: 429, grpcStatus: GrpcStatus.RESOURCE_EXHAUSTED, title: 'Too many requests' },
  UNAUTHENTICATED: {
    httpStatus: 401,
    grpcStatus: GrpcStatus.UNAUTHENTICATED,
    title: 'Authentication required',
  },
  FORBIDDEN: {
    httpStatus: 403,
    grpcStatus: GrpcStatus.PERMISSION_DENIED,
    title: 'Not allowed for this role',
  },
  DASHBOARD_ACCESS_DENIED: {
    httpStatus: 403,
    grpcStatus: GrpcStatus.PERMISSION_DENIED,
    title: 'Dashboard access is disabled for this member',
  },
  ORGANIZATION_NOT_FOUND: {
    httpStatus: 404,
    grpcStatus: GrpcStatus.NOT_FOUND,
    title: 'Organization not found',
  },
  MEMBER_NOT_FOUND: { httpStatus: 404, grpcStatus: GrpcStatus.NOT_FOUND, title: 'Member not found' },
  LAST_ADMIN: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'The organization must keep at least one ORG_ADMIN',
  },
  ALREADY_MEMBER: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.ALREADY_EXISTS,
    title: 'Already a member of this organization',
  },
  INVITE_NOT_FOUND: { httpStatus: 404, grpcStatus: GrpcStatus.NOT_FOUND, title: 'Invite not found' },
  INVITE_ALREADY_PENDING: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.ALREADY_EXISTS,
    title: 'An invite for this e-mail is already pending',
  },
  INVITE_TOKEN_INVALID: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.INVALID_ARGUMENT,
    title: 'Invite token is invalid, expired or already used',
  },
  NOTIFICATION_NOT_FOUND: {
    httpStatus: 404,
    grpcStatus: GrpcStatus.NOT_FOUND,
    title: 'Notification not found',
  },
  ALERT_ENDPOINT_NOT_FOUND: {
    httpStatus: 404,
    grpcStatus: GrpcStatus.NOT_FOUND,
    title: 'Alert endpoint not found',
  },
  ALERT_ENDPOINT_DUPLICATE: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'The organization already has an alert endpoint with this URL',
  },
  ALERT_ENDPOINT_LIMIT: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'The organization has as many alert endpoints as it may have',
  },
  ENROLLMENT_CODE_LIMIT: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'The organization has as many unused enrollment codes as it may have',
  },
  ENROLLMENT_KEY_NOT_FOUND: {
    httpStatus: 404,
    grpcStatus: GrpcStatus.NOT_FOUND,
    title: 'The organization has no enrollment key',
  },
  ENROLLMENT_KEY_REQUIRED: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'Create an enrollment key first',
  },
  ENROLLMENT_KEY_INVALID: {
    httpStatus: 401,
    grpcStatus: GrpcStatus.UNAUTHENTICATED,
    title: 'Enrollment key missing or invalid',
  },
  ENROLLMENT_CODE_INVALID: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.INVALID_ARGUMENT,
    title: 'Enrollment code is invalid',
  },
  ENROLLMENT_CODE_EXPIRED: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.INVALID_ARGUMENT,
    title: 'Enrollment code has expired',
  },
  ENROLLMENT_CODE_USED: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.INVALID_ARGUMENT,
    title: 'Enrollment code has already been used',
  },
  MACHINE_ENROLLED_ELSEWHERE: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.ALREADY_EXISTS,
    title: 'This machine is enrolled in another organization',
  },
  /**
   * Re-enrolling a machine of the organization without proof that the caller is that device (its current
   * device token) and without an administrator's approval: nothing changed, the code stays usable.
   */
  MACHINE_ALREADY_ENROLLED: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title:
      'This machine is already enrolled in this organization: present its device token, or have an administrator allow its re-enrollment',
  },
  DEVICE_NOT_FOUND: { httpStatus: 404, grpcStatus: GrpcStatus.NOT_FOUND, title: 'Device not found' },
  DEVICE_TOKEN_INVALID: {
    httpStatus: 401,
    grpcStatus: GrpcStatus.UNAUTHENTICATED,
    title: 'Device token missing or invalid',
  },
  DEVICE_DISABLED: {
    httpStatus: 403,
    grpcStatus: GrpcStatus.PERMISSION_DENIED,
    title: 'The device is disabled',
  },
  BILLING_NOT_CONFIGURED: {
    // Not UNAVAILABLE: that status would invite retries of a call that cannot succeed until configured.
    httpStatus: 503,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'Billing is not configured on this deployment (STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET)',
  },
  BILLING_ACCOUNT_NOT_FOUND: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'The organization has no billing account yet: start a checkout first',
  },
  SUBSCRIPTION_ALREADY_ACTIVE: {
    httpStatus: 409,
    grpcStatus: GrpcStatus.FAILED_PRECONDITION,
    title: 'The organization already has an active subscription: change it in the billing portal',
  },
  PAYMENT_PROVIDER_UNAVAILABLE: {
    httpStatus: 503,
    grpcStatus: GrpcStatus.UNAVAILABLE,
    title: 'The payment provider could not be reached; try again',
  },
  WEBHOOK_SIGNATURE_INVALID: {
    httpStatus: 400,
    grpcStatus: GrpcStatus.INVALID_ARGUMENT,
    title: 'The payment event signature is missing, invalid or too old',
  },
  DEADLINE_EXCEEDED: {
    httpStatus: 504,
    grpcStatus: GrpcStatus.DEADLINE_EXCEEDED,
    title: 'Upstream timed out',
  },
  SERVICE_UNAVAILABLE: {
    httpStatus: 503,
    grpcStatus: GrpcStatus.UNAVAILABLE,
    title: 'Service temporarily unavailable',
  },
  /**
   * A service refused a call from another service (no, bad or misdirected service token). For the
   * public caller this is our misconfiguration, not theirs: 500, never 401 (which would send them to log in again).
   */
  SERVICE_CALLER_REFUSED: {
    httpStatus: 500,
    grpcStatus: GrpcStatus.UNAUTHENTICATED,
    title: 'An internal service refused the call',
  },
  INTERNAL: { httpStatus: 500, grpcStatus: GrpcStatus.INTERNAL, title: 'Internal error' },
};

/**
 * For gRPC failures that carry no application code (a peer that is down, a deadline that passed,
 * a bug in a handler), the code that best describes them to an HTTP client.
 */
export function errorCodeForGrpcStatus(status: number): ErrorCode {
  switch (status) {
    case GrpcStatus.DEADLINE_EXCEEDED:
      return 'DEADLINE_EXCEEDED';
    case GrpcStatus.UNAVAILABLE:
    case GrpcStatus.CANCELLED:
      return 'SERVICE_UNAVAILABLE';
    case GrpcStatus.UNAUTHENTICATED:
      return 'UNAUTHENTICATED';
    case GrpcStatus.PERMISSION_DENIED:
      return 'FORBIDDEN';
    case GrpcStatus.INVALID_ARGUMENT:
      return 'VALIDATION_FAILED';
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return 'RATE_LIMITED';
    default:
      return 'INTERNAL';
  }
}
