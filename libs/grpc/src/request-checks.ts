import { AppError, invalidField } from '@sts/errors/app-error';
import type { ErrorCode } from '@sts/errors/error-code';
import { isUuid } from '@sts/vocabulary/identifiers';
import { z } from 'zod';
import { nameFromProto, namesOf, type ProtoEnumTable } from './proto-enums';

/**
 * The checks every gRPC handler makes of its request before it calls the domain, each failing with an
 * `AppError` of libs/errors. The handlers own the request's shape (present, a UUID, an e-mail address,
 * a known enum value) and the domain owns the business rules (existence, state, limits, credentials),
 * so no field is checked in both layers.
 *
 * `field` is the proto field's name as clients see it in `fields[].path` (`org_id`, `client.role`).
 */

/** The codes of a resource that does not exist (not ROUTE_NOT_FOUND, which is about paths). */
export type NotFoundCode = Exclude<Extract<ErrorCode, `${string}_NOT_FOUND`>, 'ROUTE_NOT_FOUND'>;

/**
 * An id the client names (`member_id` from a path): anything but a UUID cannot name one of ours, so it
 * is `notFound` at once and never reaches SQL as a uuid.
 */
export function requireUuid(value: string, notFound: NotFoundCode): string {
  if (!isUuid(value)) throw new AppError(notFound);
  return value;
}

/**
 * An id field that must be present and a UUID (`org_id` from the caller's verified context): missing
 * or malformed, the request is malformed (VALIDATION_FAILED), not a lookup that found nothing.
 */
export function requireUuidField(value: string, field: string): string {
  return uuidField(requireText(value, field), field);
}

/** Like `requireUuidField`, but empty (proto3's unset string) means absent: null. */
export function optionalUuidField(value: string, field: string): string | null {
  return value === '' ? null : uuidField(value, field);
}

function uuidField(value: string, field: string): string {
  if (!isUuid(value)) throw invalidField(field, 'must be a UUID');
  return value;
}

/** Text that must not be empty or blank; returned as sent. */
export function requireText(value: string, field: string): string {
  if (value.trim() === '') throw invalidField(field, 'is required');
  return value;
}

/** A message or oneof field that must be set. */
export function requirePresent<Value>(value: Value | undefined, field: string): Value {
  if (value === undefined) throw invalidField(field, 'is required');
  return value;
}

const emailSchema = z.email().max(254);

/** An e-mail address, trimmed. */
export function requireEmail(value: string, field: string): string {
  const email = emailSchema.safeParse(value.trim());
  if (!email.success) throw invalidField(field, 'must be an e-mail address');
  return email.data;
}

/**
 * A proto enum value in our words, through the enum's one table (libs/grpc/src/proto-enums.ts).
 * UNSPECIFIED, UNRECOGNIZED and words outside `allowed` (default: every word of the table) are
 * VALIDATION_FAILED naming the accepted words. Callers for whom UNSPECIFIED means "any" test for it first.
 */
export function enumFrom<Proto extends string, Name extends string, const Allowed extends Name = Name>(
  table: ProtoEnumTable<Proto, Name>,
  value: Proto,
  field: string,
  allowed?: readonly Allowed[],
): Allowed {
  const accepted: readonly string[] = allowed ?? namesOf(table);
  const name = nameFromProto(table, value);
  if (name === null || !accepted.includes(name)) throw invalidField(field, `must be ${oneOf(accepted)}`);
  return name as Allowed;
}

/** `a, b or c` */
function oneOf(words: readonly string[]): string {
  return words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} or ${words.at(-1)}`;
}
