import { z } from 'zod';
import { ROLES } from '@sts/vocabulary/roles';

/**
 * The public contract's shapes (contract.md section 2) as zod schemas. They validate requests,
 * serialize responses (unknown fields never leak) and generate the OpenAPI document.
 */

export const roleSchema = z.enum(ROLES);
export type Role = z.infer<typeof roleSchema>;

const timestamp = z.iso.datetime().describe('ISO 8601 timestamp in UTC');
/** Ids are opaque to clients; ours are UUIDs, and anything else cannot name one of our resources. */
export const idParam = z.string().min(1);

export const memberPayload = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string(),
    role: roleSchema,
    dashboard_access: z.boolean(),
    joined_at: timestamp,
  })
  .meta({ id: 'Member' });

export const invitePayload = z
  .object({
    id: z.string(),
    email: z.string(),
    role: roleSchema,
    created_at: timestamp,
    expires_at: timestamp.describe(
      'After this the token can no longer be accepted, and an accepted invite can no longer be joined (our addition)',
    ),
    status: z
      .enum(['pending', 'accepted'])
      .describe(
        'pending: waiting to be accepted; accepted: the invitee joins at their next sign-in before expires_at (our addition)',
      ),
    accepted_at: timestamp.nullable().describe('When it was accepted (our addition)'),
  })
  .meta({ id: 'Invite' });

export const notificationPayload = z
  .object({
    id: z.string(),
    type: z
      .string()
      .describe('member.joined, device.enrolled, device.disabled, billing.updated or threat.alert'),
    message: z.string(),
    read: z.boolean(),
    created_at: timestamp,
  })
  .meta({ id: 'Notification' });

export const licensePayload = z
  .object({
    plan: z.enum(['none', 'basic', 'pro', 'enterprise']),
    status: z.enum(['pending', 'onboarding', 'active', 'canceled']),
    billing_cycle: z.enum(['monthly', 'annual']),
    expires_at: timestamp,
  })
  .meta({ id: 'License' });

export const sessionPayload = z
  .object({
    user: z.object({
      id: z.string(),
      email: z.string(),
      name: z.string(),
      role: roleSchema,
      dashboard_access: z.boolean(),
    }),
    org: z.object({ id: z.string(), name: z.string(), domain: z.string().nullable() }),
    license: licensePayload,
  })
  .meta({ id: 'Session' });

export const enrollmentKeyPayload = z
  .object({
    key: z.string().describe('Long-lived key sent by agents in the X-Enrollment-Key header'),
    created_at: timestamp,
  })
  .meta({ id: 'EnrollmentKey' });

export const enrollmentCodePayload = z
  .object({
    code: z.string().describe('One-time code, two groups of four characters joined by a hyphen'),
    expires_at: timestamp,
  })
  .meta({ id: 'EnrollmentCode' });

export const devicePayload = z
  .object({
    id: z.string(),
    name: z.string().describe('Hostname reported at enrollment'),
    machine_id: z.string(),
    status: z.enum(['active', 'disabled']),
    enrolled_at: timestamp,
    last_seen_at: timestamp.describe('Last telemetry; the enrollment time until the first telemetry arrives'),
    metadata: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'Device' });

export const problemPayload = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().describe('Stable error code, e.g. LAST_ADMIN'),
    request_id: z.string(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .meta({ id: 'Problem', description: 'RFC 9457 problem details (application/problem+json)' });

export const pageQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(200).optional().describe('Page size, 1 to 200 (default 50)'),
    cursor: z.string().max(500).optional().describe("Opaque cursor from the previous page's Link header"),
  })
  .strict();

/** Common error responses, documented on every route. */
export function errorResponses(...statuses: number[]): Record<number, typeof problemPayload> {
  return Object.fromEntries(statuses.map((status) => [status, problemPayload]));
}
