import { ApiError, parseProblem } from './problem';

export interface ApiResponse<T> {
  readonly data: T;
  readonly status: number;
  readonly headers: Headers;
}

export interface ApiRequest {
  readonly method?: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Query parameters; undefined and empty values are left out. */
  readonly query?: Record<string, string | number | boolean | undefined>;
  /** Public endpoints (accept invite) go without a token. */
  readonly anonymous?: boolean;
  readonly signal?: AbortSignal;
}

/** Calls the public REST API on this origin; every resource module takes one. */
export type ApiFetch = <T>(path: string, request?: ApiRequest) => Promise<ApiResponse<T>>;

export interface ApiFetchOptions {
  /** The current access token, or undefined when signed out. */
  readonly getAccessToken: () => Promise<string | undefined>;
  /** Called on 401: the token is no longer accepted, so sign in again. */
  readonly onUnauthorized: () => void;
  readonly fetch?: typeof fetch;
}

/** Builds the query string of a request. */
export function withQuery(path: string, query: ApiRequest['query']): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== '') params.set(name, String(value));
  }
  const search = params.toString();
  return search ? `${path}${path.includes('?') ? '&' : '?'}${search}` : path;
}

/**
 * One fetch for the whole app: adds `Authorization: Bearer`, sends and reads JSON, turns any
 * non-2xx answer into an ApiError (problem+json: status, code, detail) and exposes the headers
 * (Link, X-Unread-Count).
 */
export function createApiFetch(options: ApiFetchOptions): ApiFetch {
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  return async <T>(path: string, request: ApiRequest = {}): Promise<ApiResponse<T>> => {
    const headers = new Headers({ accept: 'application/json, application/problem+json' });
    if (!request.anonymous) {
      const token = await options.getAccessToken();
      if (token) headers.set('authorization', `Bearer ${token}`);
    }
    let body: string | undefined;
    if (request.body !== undefined) {
      headers.set('content-type', 'application/json');
      body = JSON.stringify(request.body);
    }
    const response = await doFetch(withQuery(path, request.query), {
      method: request.method ?? 'GET',
      headers,
      body,
      signal: request.signal,
      credentials: 'omit',
    });
    const text = await response.text();
    if (!response.ok) {
      if (response.status === 401 && !request.anonymous) options.onUnauthorized();
      throw parseProblem(response.status, response.headers.get('content-type'), text);
    }
    let data: T;
    try {
      data = (text ? JSON.parse(text) : undefined) as T;
    } catch {
      throw new ApiError(
        response.status,
        'UNREADABLE_RESPONSE',
        '',
        'The service answered with something unreadable.',
      );
    }
    return { data, status: response.status, headers: response.headers };
  };
}
