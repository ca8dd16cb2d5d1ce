/** The parts of a page address the invitation page reads: a router location, or `window.location`. */
export interface PageAddress {
  readonly pathname: string;
  readonly search: string;
  readonly hash: string;
}

export interface InviteTokenInAddress {
  /** The token as the address names it (empty when it names an empty one). */
  readonly token: string;
  /** The same address without the token, in the fragment or the query: what replaces it in history. */
  readonly rest: PageAddress;
}

/**
 * The invitation token an address carries: in the fragment (`#token=…`, the links sent now: a browser never
 * sends a fragment, so it reaches no server's or proxy's log), or in the query (`?token=…`, links sent
 * before); the fragment's wins. `rest` has it in neither, and keeps the rest of both as they were.
 * Undefined when the address carries no token.
 */
export function inviteTokenIn(address: PageAddress): InviteTokenInAddress | undefined {
  const fragment = withoutToken(address.hash, '#');
  const query = withoutToken(address.search, '?');
  const token = fragment.token ?? query.token;
  if (token === undefined) return undefined;
  return { token, rest: { pathname: address.pathname, search: query.rest, hash: fragment.rest } };
}

/** A `?…` or `#…` part read as `name=value&…`: its token, and the part without it ('' when nothing is left). */
function withoutToken(part: string, prefix: '?' | '#'): { token: string | undefined; rest: string } {
  const parameters = new URLSearchParams(part.startsWith(prefix) ? part.slice(1) : part);
  const token = parameters.get('token');
  // A part without a token stays as it was (a fragment such as `#top` is no parameter list).
  if (token === null) return { token: undefined, rest: part };
  parameters.delete('token');
  const rest = parameters.toString();
  return { token, rest: rest ? `${prefix}${rest}` : '' };
}
