import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { AppError, isAppError, type FieldViolation } from '@sts/errors/app-error';
import { ERROR_CATALOGUE } from '@sts/errors/error-catalogue';
import type { ErrorCode } from '@sts/errors/error-code';
import { RateLimitExceeded } from '../limits/rate-limiter';

/** RFC 9457 problem details, plus our stable `code`, the `request_id` and bad fields. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  request_id: string;
  errors?: FieldViolation[];
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export function problemTypeUri(code: ErrorCode): string {
  return `urn:sts:problem:${code.toLowerCase().replace(/_/g, '-')}`;
}

export function toProblem(error: AppError, requestId: string): ProblemDetails {
  const definition = ERROR_CATALOGUE[error.code];
  return {
    type: problemTypeUri(error.code),
    title: definition.title,
    status: definition.httpStatus,
    // Internal errors are logged with their details; clients learn only that something broke.
    detail: error.code === 'INTERNAL' ? definition.title : error.detail,
    code: error.code,
    request_id: requestId,
    ...(error.fields.length > 0 ? { errors: [...error.fields] } : {}),
  };
}

/** Fastify's own errors (parsing, limits, validation) in terms of our error codes. */
export function toAppError(error: FastifyError | Error): AppError {
  if (isAppError(error)) return error;
  if (hasZodFastifySchemaValidationErrors(error)) {
    const where = error.validationContext ?? 'request';
    const fields = error.validation.flatMap((violation) => {
      const path = [where, ...violation.instancePath.split('/').filter(Boolean)].join('.');
      // Name each unknown field, so a typo is easy to spot.
      const unknownKeys =
        violation.keyword === 'unrecognized_keys' ? (violation.params as { keys?: unknown }).keys : undefined;
      if (Array.isArray(unknownKeys))
        return unknownKeys.map((key) => ({
          path: `${path}.${String(key)}`,
          message: 'is not a known field',
        }));
      return [{ path, message: violation.message ?? 'is invalid' }];
    });
    return new AppError(
      'VALIDATION_FAILED',
      `Invalid ${where}: ${fields.map((f) => `${f.path} ${f.message}`).join('; ')}`,
      { fields },
    );
  }
  const code = (error as FastifyError).code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE', 'Request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('UNSUPPORTED_MEDIA_TYPE', 'Send request bodies as application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('MALFORMED_REQUEST', 'Request body is empty but Content-Type is application/json');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('MALFORMED_REQUEST', 'Request body is not valid JSON');
    default:
      break;
  }
  const status = (error as FastifyError).statusCode;
  if (error instanceof SyntaxError && status === 400)
    return new AppError('MALFORMED_REQUEST', 'Request body is not valid JSON');
  if (status === 413) return new AppError('PAYLOAD_TOO_LARGE');
  if (status === 415) return new AppError('UNSUPPORTED_MEDIA_TYPE');
  if (status === 429) return new AppError('RATE_LIMITED');
  if (status !== undefined && status >= 400 && status < 500)
    return new AppError('MALFORMED_REQUEST', error.message);
  return new AppError('INTERNAL', undefined, { cause: error });
}

export function sendProblem(reply: FastifyReply, request: FastifyRequest, error: AppError): FastifyReply {
  const problem = toProblem(error, request.id);
  if (problem.status === 401) reply.header('www-authenticate', 'Bearer');
  if (error instanceof RateLimitExceeded) reply.header('retry-after', String(error.retryAfterSeconds));
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem);
}

export function problemErrorHandler(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const appError = toAppError(error);
  if (appError.code === 'INTERNAL' || isResponseSerializationError(error)) {
    request.log.error({ err: error }, 'request failed');
  } else if (appError.httpStatus >= 500) {
    request.log.warn({ err: error, code: appError.code }, 'upstream failure');
  }
  return sendProblem(reply, request, appError);
}
