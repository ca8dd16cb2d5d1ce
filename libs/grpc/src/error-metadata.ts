import { Metadata, type ServiceError, status as grpcStatus } from '@grpc/grpc-js';
import { AppError, type FieldViolation } from '@sts/errors/app-error';
import { errorCodeForGrpcStatus } from '@sts/errors/error-catalogue';
import { isErrorCode } from '@sts/errors/error-code';

/** Metadata keys that carry an AppError across gRPC, so the gateway can answer with the same code. */
const CODE_KEY = 'sts-error-code';
const FIELDS_KEY = 'sts-error-fields';

export function appErrorToGrpc(error: AppError): Partial<ServiceError> {
  const metadata = new Metadata();
  metadata.set(CODE_KEY, error.code);
  if (error.fields.length > 0) metadata.set(FIELDS_KEY, JSON.stringify(error.fields));
  return { code: error.grpcStatus, details: error.detail, metadata };
}

export function internalErrorToGrpc(): Partial<ServiceError> {
  const metadata = new Metadata();
  metadata.set(CODE_KEY, 'INTERNAL');
  return { code: grpcStatus.INTERNAL, details: 'Internal error', metadata };
}

export function grpcErrorToAppError(error: ServiceError): AppError {
  const code = error.metadata?.get(CODE_KEY)[0];
  if (isErrorCode(code)) {
    return new AppError(code, error.details, {
      fields: parseFields(error.metadata.get(FIELDS_KEY)[0]),
      cause: error,
    });
  }
  // No application code: transport failure (peer down, deadline) or a peer that is not ours.
  return new AppError(errorCodeForGrpcStatus(error.code), undefined, { cause: error });
}

function parseFields(raw: unknown): FieldViolation[] {
  if (typeof raw !== 'string') return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? (parsed as FieldViolation[]) : [];
  } catch {
    return [];
  }
}
