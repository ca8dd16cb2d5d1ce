import { DEVELOPMENT_SETTINGS, parseSettings, readSettings, safeReturnTo } from './settings';

describe('parseSettings', () => {
  it('reads the gateway meta tag', () => {
    const content = '{"issuer":"https://id.example","clientId":"dash","audience":"https://api"}';
    expect(parseSettings(content)).toEqual({
      issuer: 'https://id.example',
      clientId: 'dash',
      audience: 'https://api',
    });
    expect(readSettings({ querySelector: () => ({ content }) as never })).toEqual(parseSettings(content));
  });

  it('falls back to the development provider without a tag', () => {
    expect(parseSettings(undefined)).toBe(DEVELOPMENT_SETTINGS);
    expect(readSettings({ querySelector: () => null })).toBe(DEVELOPMENT_SETTINGS);
  });

  it('refuses a broken tag', () => {
    expect(() => parseSettings('{')).toThrow(/not JSON/);
    expect(() => parseSettings('{"issuer":"x","clientId":"y"}')).toThrow(/lack audience/);
  });
});

describe('safeReturnTo', () => {
  it.each([
    ['/devices?status=active', '/devices?status=active'],
    ['//evil.example/x', '/'],
    ['https://evil.example', '/'],
    ['/auth/callback?code=1', '/'],
    [undefined, '/'],
  ])('%p -> %p', (value, expected) => {
    expect(safeReturnTo(value)).toBe(expected);
  });
});
