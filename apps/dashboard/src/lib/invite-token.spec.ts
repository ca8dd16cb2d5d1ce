import { inviteTokenIn, type PageAddress } from './invite-token';

const TOKEN = 'sts_inv_abc-DEF_123';
const page = (search: string, hash: string): PageAddress => ({ pathname: '/invites/accept', search, hash });

describe('inviteTokenIn', () => {
  it('reads the token from the fragment, and leaves an address without it', () => {
    expect(inviteTokenIn(page('', `#token=${TOKEN}`))).toEqual({ token: TOKEN, rest: page('', '') });
  });

  it('still reads links sent before, with the token in the query, and leaves them without it too', () => {
    expect(inviteTokenIn(page(`?token=${TOKEN}`, ''))).toEqual({ token: TOKEN, rest: page('', '') });
  });

  it('prefers the fragment, and takes the token out of both', () => {
    expect(inviteTokenIn(page('?token=old', `#token=${TOKEN}`))).toEqual({
      token: TOKEN,
      rest: page('', ''),
    });
  });

  it('keeps every other parameter, and what holds no token as it was', () => {
    expect(inviteTokenIn(page('?utm_source=mail&token=old', `#token=${TOKEN}&x=1`))).toEqual({
      token: TOKEN,
      rest: page('?utm_source=mail', '#x=1'),
    });
    expect(inviteTokenIn(page(`?token=${TOKEN}`, '#top'))).toEqual({ token: TOKEN, rest: page('', '#top') });
  });

  it('decodes what the e-mail encoded', () => {
    expect(inviteTokenIn(page('', '#token=a%20b%2Bc'))?.token).toBe('a b+c');
  });

  it('finds a named but empty token, so that it leaves the address too', () => {
    expect(inviteTokenIn(page('', '#token='))).toEqual({ token: '', rest: page('', '') });
  });

  it('answers undefined for an address without a token', () => {
    expect(inviteTokenIn(page('', ''))).toBeUndefined();
    expect(inviteTokenIn(page('?x=1', '#top'))).toBeUndefined();
  });
});
