import { z } from 'zod';
import { ROLES } from '@sts/vocabulary/roles';
import type { EventEnvelope } from './event-envelope';

/**
 * The catalogue of domain events: one entry per type, with the zod schema of its `data`. Producers
 * validate before writing to their outbox; consumers validate before handling. Adding a field is
 * compatible; renaming or removing one needs a new event type.
 */
const role = z.enum(ROLES);

export const EVENT_CATALOGUE = {
  'org.created': z.object({
    org_id: z.string(),
    name: z.string(),
    domain: z.string().nullable(),
    created_at: z.iso.datetime(),
  }),
  'member.joined': z.object({
    org_id: z.string(),
    member_id: z.string(),
    user_id: z.string(),
    email: z.string(),
    name: z.string(),
    role,
    joined_at: z.iso.datetime(),
  }),
  /** A member's role or dashboard access changed. */
  'member.updated': z.object({
    org_id: z.string(),
    member_id: z.string(),
    user_id: z.string(),
    role,
    dashboard_access: z.boolean(),
    at: z.iso.datetime(),
  }),
  'member.removed': z.object({
    org_id: z.string(),
    member_id: z.string(),
    user_id: z.string(),
    at: z.iso.datetime(),
  }),
  'invite.created': z.object({
    org_id: z.string(),
    org_name: z.string(),
    invite_id: z.string(),
    email: z.string(),
    role,
    invited_by_name: z.string(),
    expires_at: z.iso.datetime(),
    /** The invite token sealed with SECRET_SEALING_KEY (context `SEALING_CONTEXTS.inviteToken`); never plain text. */
    token_sealed: z.string(),
  }),
  'device.enrolled': z.object({
    org_id: z.string(),
    device_id: z.string(),
    machine_id: z.string(),
    hostname: z.string(),
    enrolled_at: z.iso.datetime(),
    /** True when a machine already enrolled in the organization enrolled again (same device id, new token). */
    re_enrolled: z.boolean(),
  }),
  'device.disabled': z.object({
    org_id: z.string(),
    device_id: z.string(),
    hostname: z.string(),
    at: z.iso.datetime(),
  }),
  'device.enabled': z.object({
    org_id: z.string(),
    device_id: z.string(),
    hostname: z.string(),
    at: z.iso.datetime(),
  }),
  /** The device and all its telemetry must be removed everywhere. */
  'device.deleted': z.object({
    org_id: z.string(),
    device_id: z.string(),
    machine_id: z.string(),
    hostname: z.string(),
    at: z.iso.datetime(),
  }),
  /** The organization's license changed (or a payment failed: the license as it stands, and why it is told). */
  'billing.updated': z.object({
    org_id: z.string(),
    plan: z.enum(['none', 'basic', 'pro', 'enterprise']),
    status: z.enum(['pending', 'onboarding', 'active', 'canceled']),
    billing_cycle: z.enum(['monthly', 'annual']),
    expires_at: z.iso.datetime(),
    /** One line for people, e.g. "Subscription active: Pro, billed yearly". */
    summary: z.string().max(300),
  }),
  /**
   * Stripe could not collect a payment of the organization's subscription (the license is unchanged;
   * Stripe retries by its own schedule). The notifier e-mails the organization's admins.
   */
  'billing.payment_failed': z.object({
    org_id: z.string(),
    /** In the currency's smallest unit, as Stripe gives it. */
    amount_due: z.number().int().nonnegative(),
    currency: z.string().min(3).max(3),
    /** Stripe's page where the invoice can be paid; null when Stripe gave none. */
    invoice_url: z.url().nullable(),
    /** When Stripe tries again; null when it will not. */
    next_attempt_at: z.iso.datetime().nullable(),
    failed_at: z.iso.datetime(),
  }),
  /** A device passed the threat threshold: `dangerous_blocks` blocks within `window_minutes` up to `detected_at`. */
  'threat.detected': z.object({
    org_id: z.string(),
    device_id: z.string(),
    /** The device's hostname as analytics last heard it ('' when it never did). */
    hostname: z.string(),
    dangerous_blocks: z.number().int().positive(),
    window_minutes: z.number().int().positive(),
    detected_at: z.iso.datetime(),
  }),
  'enrollment_code.email_requested': z.object({
    org_id: z.string(),
    org_name: z.string(),
    email: z.string(),
    requested_by_name: z.string(),
    expires_at: z.iso.datetime(),
    /** Names this request; the sealed values below open only with it (and with this organization and e-mail). */
    request_id: z.string(),
    /** The one-time code sealed with SECRET_SEALING_KEY (context `SEALING_CONTEXTS.enrollmentCode`). */
    code_sealed: z.string(),
    /** The enrollment key sealed likewise (context `SEALING_CONTEXTS.enrollmentKey`). */
    enrollment_key_sealed: z.string(),
  }),
} as const;

export type EventType = keyof typeof EVENT_CATALOGUE;

/**
 * Sealing contexts: a secret in an event is sealed with SECRET_SEALING_KEY bound to its event type
 * and field, its organization, its recipient and the request that made it. A sealed value copied into
 * another event (a replayed message with another `email`, another organization, another field) does
 * not open, so the notifier cannot be made to e-mail it elsewhere. Producers seal with these,
 * consumers open with them.
 */
export const SEALING_CONTEXTS = {
  inviteToken: (data: { org_id: string; email: string; invite_id: string }) =>
    boundContext('invite.created:token', data.org_id, data.email, data.invite_id),
  enrollmentCode: (data: { org_id: string; email: string; request_id: string }) =>
    boundContext('enrollment_code.email_requested:code', data.org_id, data.email, data.request_id),
  enrollmentKey: (data: { org_id: string; email: string; request_id: string }) =>
    boundContext('enrollment_code.email_requested:key', data.org_id, data.email, data.request_id),
} as const;

function boundContext(purpose: string, orgId: string, recipient: string, requestId: string): string {
  // JSON keeps the parts apart whatever characters they hold.
  return JSON.stringify([purpose, orgId, recipient.trim().toLowerCase(), requestId]);
}
export type EventData<Type extends EventType> = z.infer<(typeof EVENT_CATALOGUE)[Type]>;
export type DomainEvent<Type extends EventType = EventType> = EventEnvelope<Type, EventData<Type>>;

export function isEventType(value: string): value is EventType {
  return Object.prototype.hasOwnProperty.call(EVENT_CATALOGUE, value);
}

/** Validates the data of an event of a known type; throws a ZodError on mismatch. */
export function parseEventData<Type extends EventType>(type: Type, data: unknown): EventData<Type> {
  return EVENT_CATALOGUE[type].parse(data) as EventData<Type>;
}
