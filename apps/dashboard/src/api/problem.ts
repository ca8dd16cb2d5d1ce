/** A refusal or failure of the API, from its application/problem+json body (RFC 9457). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly title: string,
    readonly fieldErrors: readonly { path: string; message: string }[] = [],
    readonly requestId?: string,
  ) {
    super(detail || title || `HTTP ${status}`);
    this.name = 'ApiError';
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'The request was not valid.',
  401: 'Your sign-in has expired.',
  403: 'You are not allowed to do this.',
  404: 'Not found.',
  409: 'This conflicts with the current state.',
  413: 'The request is too large.',
  429: 'Too many requests: wait a moment and try again.',
  500: 'The service failed. Try again later.',
  502: 'The service is unreachable. Try again later.',
  503: 'The service is unavailable. Try again later.',
  504: 'The service took too long to answer. Try again.',
};

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** Builds the ApiError of a failed response from its status, content type and body text. */
export function parseProblem(status: number, contentType: string | null, body: string): ApiError {
  let parsed: unknown;
  if (body && /json/i.test(contentType ?? '')) {
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
  }
  const problem = (parsed && typeof parsed === 'object' ? parsed : {}) as Record<string, unknown>;
  const errors = Array.isArray(problem['errors'])
    ? (problem['errors'] as unknown[]).flatMap((item) => {
        const entry = (item && typeof item === 'object' ? item : {}) as Record<string, unknown>;
        const message = text(entry['message']);
        return message ? [{ path: text(entry['path']), message }] : [];
      })
    : [];
  const title = text(problem['title']) || STATUS_TEXT[status] || `The request failed (HTTP ${status}).`;
  return new ApiError(
    status,
    text(problem['code']),
    text(problem['detail']),
    title,
    errors,
    text(problem['request_id']) || undefined,
  );
}

/** A sentence for people: the problem's detail (or title), with the invalid fields when listed. */
export function problemMessage(error: unknown): string {
  if (error instanceof ApiError) {
    const main = error.detail || error.title;
    const fields = error.fieldErrors
      .map((field) => (field.path ? `${field.path}: ${field.message}` : field.message))
      .filter((line) => !main.includes(line));
    return fields.length ? `${main} (${fields.join('; ')})` : main;
  }
  if (error instanceof TypeError) return 'The service could not be reached. Check your connection.';
  if (error instanceof Error && error.message) return error.message;
  return 'Something went wrong.';
}
