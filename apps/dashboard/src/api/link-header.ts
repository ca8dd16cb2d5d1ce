/** The target of `rel="next"` in a Link header (RFC 8288), or undefined on the last page. */
export function nextLink(header: string | null): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(/,(?=\s*<)/)) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part);
    if (!match) continue;
    const rel = /;\s*rel\s*=\s*"?([^";]+)"?/i.exec(match[2] ?? '');
    if (rel?.[1]?.split(/\s+/).includes('next')) return match[1];
  }
  return undefined;
}

/** The `cursor` query parameter of a next link, the way the list endpoints page. */
export function nextCursor(header: string | null): string | undefined {
  const link = nextLink(header);
  if (!link) return undefined;
  return new URL(link, 'http://link.invalid').searchParams.get('cursor') ?? undefined;
}
