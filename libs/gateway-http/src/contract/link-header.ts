import type { FastifyReply, FastifyRequest } from 'fastify';

/** Sets `Link: <...?cursor=...>; rel="next"` when a list has another page (RFC 8288). */
export function setNextLink(
  request: FastifyRequest,
  reply: FastifyReply,
  nextCursor: string,
  limit?: number,
): void {
  if (!nextCursor) return;
  const url = new URL(request.url, 'http://placeholder');
  url.searchParams.set('cursor', nextCursor);
  if (limit) url.searchParams.set('limit', String(limit));
  reply.header('link', `<${url.pathname}${url.search}>; rel="next"`);
}
