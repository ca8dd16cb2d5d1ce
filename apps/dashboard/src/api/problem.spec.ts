import { ApiError, parseProblem, problemMessage } from './problem';

describe('parseProblem', () => {
  it('reads the status, code, detail and fields of a problem+json body', () => {
    const error = parseProblem(
      409,
      'application/problem+json; charset=utf-8',
      JSON.stringify({
        type: 'about:blank',
        title: 'Conflict',
        status: 409,
        detail: 'The last administrator cannot lose that role',
        code: 'LAST_ADMIN',
        request_id: 'r-1',
      }),
    );
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      status: 409,
      code: 'LAST_ADMIN',
      detail: 'The last administrator cannot lose that role',
      title: 'Conflict',
      requestId: 'r-1',
    });
    expect(problemMessage(error)).toBe('The last administrator cannot lose that role');
  });

  it('lists invalid fields that the detail does not already name', () => {
    const error = parseProblem(
      400,
      'application/problem+json',
      JSON.stringify({
        title: 'Bad Request',
        detail: 'The request is invalid',
        code: 'VALIDATION_FAILED',
        errors: [{ path: 'email', message: 'Invalid email address' }, { nope: 1 }],
      }),
    );
    expect(error.fieldErrors).toEqual([{ path: 'email', message: 'Invalid email address' }]);
    expect(problemMessage(error)).toBe('The request is invalid (email: Invalid email address)');
  });

  it('falls back to the title, then to a sentence for the status', () => {
    expect(problemMessage(parseProblem(403, 'application/problem+json', '{"title":"Forbidden"}'))).toBe(
      'Forbidden',
    );
    expect(problemMessage(parseProblem(502, 'text/html', '<html>bad gateway</html>'))).toBe(
      'The service is unreachable. Try again later.',
    );
    expect(problemMessage(parseProblem(418, 'application/json', '{broken'))).toBe(
      'The request failed (HTTP 418).',
    );
  });
});

describe('problemMessage', () => {
  it('explains network failures and other errors', () => {
    expect(problemMessage(new TypeError('Failed to fetch'))).toMatch(/could not be reached/);
    expect(problemMessage(new Error('boom'))).toBe('boom');
    expect(problemMessage('x')).toBe('Something went wrong.');
  });
});
