import { InMemoryWebStorage, UserManager, WebStorageStateStore } from 'oidc-client-ts';
import type { SignInSettings } from './settings';

/** What the app keeps in the sign-in request's state, to come back to the page it started from. */
export interface SignInState {
  readonly returnTo: string;
}

/**
 * Authorization code with PKCE. Tokens live in memory only (never in web storage). The sign-in request's
 * state (PKCE verifier, nonce, returnTo) lives in `stateStorage` from the redirect to /auth/callback: the
 * tab's sessionStorage, never localStorage (the library's default), which every tab of the origin reads
 * and which outlives the browser session.
 * The development provider issues refresh tokens (offline_access), so tokens renew silently.
 */
export function createUserManager(
  settings: SignInSettings,
  origin: string,
  stateStorage: Storage,
): UserManager {
  return new UserManager({
    authority: settings.issuer,
    client_id: settings.clientId,
    redirect_uri: `${origin}/auth/callback`,
    post_logout_redirect_uri: `${origin}/`,
    response_type: 'code',
    scope: 'openid profile email offline_access',
    extraQueryParams: { audience: settings.audience },
    userStore: new WebStorageStateStore({ store: new InMemoryWebStorage() }),
    stateStore: new WebStorageStateStore({ store: stateStorage }),
    automaticSilentRenew: true,
    // Refresh tokens renew; no hidden iframe (the provider's frame-ancestors policy forbids it anyway).
    monitorSession: false,
    loadUserInfo: false,
  });
}
