import { InMemoryWebStorage, User } from 'oidc-client-ts';
import { DEVELOPMENT_SETTINGS } from './settings';
import { createUserManager } from './user-manager';

/** The page a sign-in starts from, as far as oidc-client-ts looks at it: web storage and a redirect. */
function browserPage() {
  let redirected: (url: string) => void = () => undefined;
  const redirect = new Promise<string>((resolve) => (redirected = resolve));
  const page = {
    localStorage: new InMemoryWebStorage(),
    sessionStorage: new InMemoryWebStorage(),
    location: { assign: (url: string) => redirected(url) },
    addEventListener: () => undefined,
    get self() {
      return page;
    },
  };
  return { page, redirect };
}

describe('createUserManager', () => {
  const globals = globalThis as { window?: unknown };
  let fetchMock: jest.SpyInstance;

  beforeEach(() => {
    fetchMock = jest.spyOn(globalThis, 'fetch').mockImplementation(async () =>
      Response.json({
        issuer: DEVELOPMENT_SETTINGS.issuer,
        authorization_endpoint: `${DEVELOPMENT_SETTINGS.issuer}/authorize`,
      }),
    );
  });

  afterEach(() => {
    fetchMock.mockRestore();
    delete globals.window;
  });

  it("keeps the sign-in request's state in the tab's sessionStorage, never in localStorage", async () => {
    const { page, redirect } = browserPage();
    globals.window = page;
    const manager = createUserManager(DEVELOPMENT_SETTINGS, 'https://app.example', page.sessionStorage);

    // The redirect never comes back here (the page is left); what matters is what it left behind.
    void manager.signinRedirect({ state: { returnTo: '/devices' } });
    const url = new URL(await redirect);

    expect(url.origin + url.pathname).toBe(`${DEVELOPMENT_SETTINGS.issuer}/authorize`);
    const state = url.searchParams.get('state');
    const stored = page.sessionStorage.getItem(`oidc.${state}`);
    expect(JSON.parse(stored ?? '{}')).toEqual(
      expect.objectContaining({ code_verifier: expect.any(String), data: { returnTo: '/devices' } }),
    );
    expect(page.localStorage.length).toBe(0);
  });

  it('keeps the signed-in user in memory only', async () => {
    const { page } = browserPage();
    globals.window = page;
    const manager = createUserManager(DEVELOPMENT_SETTINGS, 'https://app.example', page.sessionStorage);

    await manager.storeUser(
      new User({
        access_token: 'at',
        token_type: 'Bearer',
        profile: { sub: 'u1', iss: DEVELOPMENT_SETTINGS.issuer, aud: 'x', exp: 0, iat: 0 },
      }),
    );

    expect((await manager.getUser())?.access_token).toBe('at');
    expect([page.localStorage.length, page.sessionStorage.length]).toEqual([0, 0]);
  });
});
