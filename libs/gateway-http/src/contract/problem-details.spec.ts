import type { FastifyError } from 'fastify';
import { AppError } from '@sts/errors/app-error';
import { ERROR_CODES } from '@sts/errors/error-code';
import { problemTypeUri, toAppError, toProblem } from './problem-details';

const fastifyError = (code: string, statusCode: number, message = 'fastify says no'): FastifyError =>
  Object.assign(new Error(message), { code, statusCode, name: 'FastifyError' });

describe('problem details', () => {
  it('gives every error code a distinct urn type', () => {
    const types = ERROR_CODES.map(problemTypeUri);
    expect(new Set(types).size).toBe(ERROR_CODES.length);
    expect(problemTypeUri('LAST_ADMIN')).toBe('urn:sts:problem:last-admin');
    for (const type of types) expect(type).toMatch(/^urn:sts:problem:[a-z-]+$/);
  });

  it('builds an RFC 9457 body with code, request id and field errors only when there are some', () => {
    expect(toProblem(new AppError('LAST_ADMIN'), 'req-1')).toEqual({
      type: 'urn:sts:problem:last-admin',
      title: 'The organization must keep at least one ORG_ADMIN',
      status: 409,
      detail: 'The organization must keep at least one ORG_ADMIN',
      code: 'LAST_ADMIN',
      request_id: 'req-1',
    });
    const invalid = new AppError('VALIDATION_FAILED', 'bad', {
      fields: [{ path: 'body.email', message: 'invalid' }],
    });
    expect(toProblem(invalid, 'req-2')).toMatchObject({
      status: 400,
      errors: [{ path: 'body.email', message: 'invalid' }],
    });
  });

  it.each([
    ['FST_ERR_CTP_BODY_TOO_LARGE', 413, 'PAYLOAD_TOO_LARGE'],
    ['FST_ERR_CTP_INVALID_MEDIA_TYPE', 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['FST_ERR_CTP_EMPTY_JSON_BODY', 400, 'MALFORMED_REQUEST'],
    ['FST_ERR_CTP_INVALID_JSON_BODY', 400, 'MALFORMED_REQUEST'],
    ['FST_ERR_CTP_INVALID_CONTENT_LENGTH', 400, 'MALFORMED_REQUEST'],
    ['SOMETHING_ELSE', 413, 'PAYLOAD_TOO_LARGE'],
    ['SOMETHING_ELSE', 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['SOMETHING_ELSE', 429, 'RATE_LIMITED'],
    ['SOMETHING_ELSE', 400, 'MALFORMED_REQUEST'],
  ])('maps Fastify error %s (%i) to %s', (code, status, expected) => {
    expect(toAppError(fastifyError(code, status)).code).toBe(expected);
  });

  it('keeps AppErrors as they are', () => {
    const error = new AppError('DEADLINE_EXCEEDED', 'identity took too long');
    expect(toAppError(error)).toBe(error);
  });

  it('turns anything else into INTERNAL with the catalogue title, keeping the cause for the log', () => {
    const cause = new Error('connection string postgres://user:secret@db');
    const mapped = toAppError(cause);
    expect(mapped.code).toBe('INTERNAL');
    expect(mapped.detail).toBe('Internal error');
    expect(mapped.cause).toBe(cause);
    expect(toAppError(fastifyError('FST_ERR_SOMETHING', 500)).code).toBe('INTERNAL');
    expect(toAppError(new TypeError('x is undefined')).code).toBe('INTERNAL');
  });
});
