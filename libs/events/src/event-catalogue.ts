import { z } from 'zod';
import type { EventEnvelope } from './event-envelope';

/**
 * The catalogue of domain events: one entry per type, with the zod schema of its `data`. Producers
 * validate before writing to their outbox; consumers validate before handling. Adding a field is
 * compatible; renaming or removing one needs a new event type.
 */
const role = z.enum(['ORG_ADMIN', 'ANALYST', 'APP_USER']);

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
  'member.removed': z.object({ org_id: z.string(), member_id: z.string(), user_id: z.string(), at: z.iso.datetime() }),
  'invite.created': z.object({
    org_id: z.string(),
    org_name: z.string(),
    invite_id: z.string(),
    email: z.string(),
    role,
    invited_by_name: z.string(),
    expires_at: z.iso.datetime(),
    /** The invite token sealed with SECRET_SEALING_KEY (context `invite.created`); never plain text. */
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
  'device.disabled': z.object({ org_id: z.string(), device_id: z.string(), hostname: z.string(), at: z.iso.datetime() }),
  'device.enabled': z.object({ org_id: z.string(), device_id: z.string(), hostname: z.string(), at: z.iso.datetime() }),
  /** The device and all its telemetry must be removed everywhere. */
  'device.deleted': z.object({
    org_id: z.string(),
    device_id: z.string(),
    machine_id: z.string(),
    hostname: z.string(),
    at: z.iso.datetime(),
  }),
  'enrollment_code.email_requested': z.object({
    org_id: z.string(),
    org_name: z.string(),
    email: z.string(),
    requested_by_name: z.string(),
    expires_at: z.iso.datetime(),
    /** The one-time code sealed with SECRET_SEALING_KEY (context `enrollment_code.email_requested:code`). */
    code_sealed: z.string(),
    /** The enrollment key sealed likewise (context `enrollment_code.email_requested:key`). */
    enrollment_key_sealed: z.string(),
  }),
} as const;

export type EventType = keyof typeof EVENT_CATALOGUE;

/**
 * Sealing contexts: a secret in an event is sealed with SECRET_SEALING_KEY bound to its event type
 * and field, so a sealed value cannot be replayed in another field or event. Producers seal with
 * these, consumers open with them.
 */
export const SEALING_CONTEXTS = {
  inviteToken: 'invite.created',
  enrollmentCode: 'enrollment_code.email_requested:code',
  enrollmentKey: 'enrollment_code.email_requested:key',
} as const;
export type EventData<Type extends EventType> = z.infer<(typeof EVENT_CATALOGUE)[Type]>;
export type DomainEvent<Type extends EventType = EventType> = EventEnvelope<Type, EventData<Type>>;

export const EVENT_TYPES = Object.keys(EVENT_CATALOGUE) as EventType[];

export function isEventType(value: string): value is EventType {
  return Object.prototype.hasOwnProperty.call(EVENT_CATALOGUE, value);
}

/** Validates the data of an event of a known type; throws a ZodError on mismatch. */
export function parseEventData<Type extends EventType>(type: Type, data: unknown): EventData<Type> {
  return EVENT_CATALOGUE[type].parse(data) as EventData<Type>;
}
