import { nextCursor, nextLink } from './link-header';

describe('nextLink', () => {
  it('finds the next page of a Link header', () => {
    const header = '</api/devices?limit=25&cursor=abc%3D%3D>; rel="next"';
    expect(nextLink(header)).toBe('/api/devices?limit=25&cursor=abc%3D%3D');
    expect(nextCursor(header)).toBe('abc==');
  });

  it('picks rel=next among several links', () => {
    const header = '</api/x?cursor=p>; rel="prev", </api/x?cursor=n>; rel=next';
    expect(nextCursor(header)).toBe('n');
  });

  it('is undefined on the last page', () => {
    expect(nextLink(null)).toBeUndefined();
    expect(nextLink('')).toBeUndefined();
    expect(nextCursor('</api/x?cursor=p>; rel="prev"')).toBeUndefined();
  });
});
