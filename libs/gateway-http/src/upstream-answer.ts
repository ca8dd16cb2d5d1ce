import { AppError } from '@sts/errors/app-error';

/**
 * A field another service must have sent (protobuf makes every message field optional). Missing, it
 * is our bug, not the client's: INTERNAL (500), logged with what was missing.
 */
export function required<Value>(value: Value | undefined | null, what: string): Value {
  if (value === undefined || value === null)
    throw new AppError('INTERNAL', `upstream answer without ${what}`);
  return value;
}
