import { AppError } from '@sts/errors/app-error';
import { nameFromProto, type ProtoEnumTable } from '@sts/grpc/proto-enums';

/**
 * A field another service must have sent (protobuf makes every message field optional). Missing, it
 * is our bug, not the client's: INTERNAL (500), logged with what was missing.
 */
export function required<Value>(value: Value | undefined | null, what: string): Value {
  if (value === undefined || value === null)
    throw new AppError('INTERNAL', `upstream answer without ${what}`);
  return value;
}

/**
 * An enum value another service sent, in the contract's words (through the enum's one table). An
 * unspecified or unknown value is our bug, not the client's: INTERNAL (500), logged with the value.
 */
export function fromUpstreamEnum<Proto extends string, Name extends string>(
  table: ProtoEnumTable<Proto, Name>,
  value: Proto,
  what: string,
): Name {
  const name = nameFromProto(table, value);
  if (name === null) throw new AppError('INTERNAL', `upstream returned ${what} ${value}`);
  return name;
}
