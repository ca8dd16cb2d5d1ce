import { AppError } from './app-error';
import { ERROR_CATALOGUE, errorCodeForGrpcStatus } from './error-catalogue';
import { ERROR_CODES, isErrorCode } from './error-code';
import { GrpcStatus } from './grpc-status';

describe('error catalogue', () => {
  it('maps every code to a 4xx/5xx HTTP status and a non-OK gRPC status', () => {
    for (const code of ERROR_CODES) {
      const definition = ERROR_CATALOGUE[code];
      expect(definition.httpStatus).toBeGreaterThanOrEqual(400);
      expect(definition.httpStatus).toBeLessThan(600);
      expect(definition.grpcStatus).not.toBe(GrpcStatus.OK);
      expect(definition.title.length).toBeGreaterThan(0);
    }
    expect(Object.keys(ERROR_CATALOGUE).sort()).toEqual([...ERROR_CODES].sort());
  });

  it('keeps the statuses the public contract names', () => {
    expect(ERROR_CATALOGUE.UNAUTHENTICATED.httpStatus).toBe(401);
    expect(ERROR_CATALOGUE.DASHBOARD_ACCESS_DENIED.httpStatus).toBe(403);
    expect(ERROR_CATALOGUE.FORBIDDEN.httpStatus).toBe(403);
    expect(ERROR_CATALOGUE.MEMBER_NOT_FOUND.httpStatus).toBe(404);
  });

  it('gives gRPC failures without an application code a sensible code', () => {
    expect(errorCodeForGrpcStatus(GrpcStatus.UNAVAILABLE)).toBe('SERVICE_UNAVAILABLE');
    expect(errorCodeForGrpcStatus(GrpcStatus.DEADLINE_EXCEEDED)).toBe('DEADLINE_EXCEEDED');
    expect(errorCodeForGrpcStatus(GrpcStatus.DATA_LOSS)).toBe('INTERNAL');
  });

  it('builds AppError with the catalogue title as default detail', () => {
    const error = new AppError('LAST_ADMIN');
    expect(error.detail).toBe(ERROR_CATALOGUE.LAST_ADMIN.title);
    expect(error.httpStatus).toBe(409);
    expect(isErrorCode('LAST_ADMIN')).toBe(true);
    expect(isErrorCode('NOPE')).toBe(false);
  });
});
