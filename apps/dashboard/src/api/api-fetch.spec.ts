import { createApiFetch, withQuery } from './api-fetch';
import { ApiError } from './problem';

function stubFetch(status: number, body: string, headers: Record<string, string> = {}) {
  const calls: { url: string; init: RequestInit }[] = [];
  const fetch = (async (url: string, init: RequestInit) => {
    calls.push({ url, init });
    return new Response(status === 204 ? null : body, { status, headers });
  }) as unknown as typeof globalThis.fetch;
  return { fetch, calls };
}

describe('createApiFetch', () => {
  it('sends the bearer token and JSON, and exposes the headers', async () => {
    const { fetch, calls } = stubFetch(200, '[{"id":"1"}]', { link: '</api/x?cursor=c>; rel="next"' });
    const api = createApiFetch({ getAccessToken: async () => 'tok', onUnauthorized: jest.fn(), fetch });
    const response = await api<{ id: string }[]>('/api/x', {
      method: 'POST',
      body: { a: 1 },
      query: { limit: 5, q: '', status: undefined },
    });
    expect(response.data).toEqual([{ id: '1' }]);
    expect(response.headers.get('link')).toContain('cursor=c');
    expect(calls[0]?.url).toBe('/api/x?limit=5');
    const headers = calls[0]?.init.headers as Headers;
    expect(headers.get('authorization')).toBe('Bearer tok');
    expect(headers.get('content-type')).toBe('application/json');
    expect(calls[0]?.init.body).toBe('{"a":1}');
  });

  it('sends no token on anonymous calls and reads empty answers', async () => {
    const { fetch, calls } = stubFetch(204, '');
    const getAccessToken = jest.fn(async () => 'tok');
    const api = createApiFetch({ getAccessToken, onUnauthorized: jest.fn(), fetch });
    expect((await api('/api/invites/accept', { method: 'POST', anonymous: true })).data).toBeUndefined();
    expect((calls[0]?.init.headers as Headers).get('authorization')).toBeNull();
    expect(getAccessToken).not.toHaveBeenCalled();
  });

  it('throws an ApiError from problem+json and signs in again on 401', async () => {
    const onUnauthorized = jest.fn();
    const { fetch } = stubFetch(
      401,
      JSON.stringify({ title: 'Unauthorized', detail: 'The token expired', code: 'UNAUTHENTICATED' }),
      { 'content-type': 'application/problem+json' },
    );
    const api = createApiFetch({ getAccessToken: async () => 'tok', onUnauthorized, fetch });
    const failure = api('/api/session');
    await expect(failure).rejects.toBeInstanceOf(ApiError);
    await expect(failure).rejects.toMatchObject({
      status: 401,
      code: 'UNAUTHENTICATED',
      detail: 'The token expired',
    });
    expect(onUnauthorized).toHaveBeenCalledTimes(1);
  });
});

it('reports an unreadable success answer as an ApiError', async () => {
  const { fetch } = stubFetch(200, '<html>proxy page</html>');
  const api = createApiFetch({ getAccessToken: async () => 'tok', onUnauthorized: jest.fn(), fetch });
  await expect(api('/api/session')).rejects.toMatchObject({ code: 'UNREADABLE_RESPONSE', status: 200 });
});

describe('withQuery', () => {
  it('appends set parameters only', () => {
    expect(withQuery('/api/a', { x: 'a b', y: undefined, z: '' })).toBe('/api/a?x=a+b');
    expect(withQuery('/api/a?k=1', { x: 2 })).toBe('/api/a?k=1&x=2');
    expect(withQuery('/api/a', undefined)).toBe('/api/a');
  });
});
