import type { ErrorCode } from './error-code';
import { ERROR_CATALOGUE } from './error-catalogue';

/** One invalid input field, as reported to clients. `path` is dotted (`members.0.email`). */
export interface FieldViolation {
  readonly path: string;
  readonly message: string;
}

/**
 * The one error type that crosses layers. Domain code throws it with a stable code; the gRPC layer
 * carries the code in metadata; the gateway turns it into application/problem+json.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly detail: string;
  readonly fields: readonly FieldViolation[];

  constructor(
    code: ErrorCode,
    detail?: string,
    options: { fields?: FieldViolation[]; cause?: unknown } = {},
  ) {
    const message = detail ?? ERROR_CATALOGUE[code].title;
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.detail = message;
    this.fields = options.fields ?? [];
  }

  get httpStatus(): number {
    return ERROR_CATALOGUE[this.code].httpStatus;
  }

  get grpcStatus(): number {
    return ERROR_CATALOGUE[this.code].grpcStatus;
  }
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}

/** VALIDATION_FAILED for one bad field: `invalidField('window', 'must be 24h or 30d')`. */
export function invalidField(path: string, message: string): AppError {
  return new AppError('VALIDATION_FAILED', `${path} ${message}`, { fields: [{ path, message }] });
}
