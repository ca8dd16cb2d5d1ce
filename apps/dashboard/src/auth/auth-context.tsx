import {
  createContext,
  useCallback,
  useContext,
  useEffect,
  useMemo,
  useRef,
  useState,
  type ReactNode,
} from 'react';
import type { User, UserManager } from 'oidc-client-ts';
import { createApiFetch, type ApiFetch } from '../api/api-fetch';
import type { SignInState } from './user-manager';

interface AuthValue {
  readonly userManager: UserManager;
  /** Undefined while the stored user is being read; null when signed out. */
  readonly user: User | null | undefined;
  /** Redirects to the identity provider; `loginHint` proposes an e-mail address there. */
  readonly signIn: (returnTo?: string, loginHint?: string) => void;
  readonly signOut: () => void;
  /** Why the last redirect to the identity provider failed (unreachable provider, bad settings). */
  readonly signInError: unknown;
  readonly api: ApiFetch;
}

const AuthContext = createContext<AuthValue | undefined>(undefined);

function currentAddress(): string {
  return window.location.pathname + window.location.search;
}

/** Holds the signed-in user (in memory) and the API client that sends its access token. */
export function AuthProvider({ userManager, children }: { userManager: UserManager; children: ReactNode }) {
  const [user, setUser] = useState<User | null | undefined>(undefined);
  const [signInError, setSignInError] = useState<unknown>(undefined);
  // A ref, not state: React's development double effects must not start two redirects.
  const redirecting = useRef(false);
  // Signing out forgets the user first: that must not start a sign-in before the provider's logout page.
  const signingOut = useRef(false);

  useEffect(() => {
    let live = true;
    userManager.getUser().then(
      // A user loaded meanwhile (the callback page) wins over this first read.
      (stored) =>
        live && setUser((now) => (now === undefined ? (stored && !stored.expired ? stored : null) : now)),
      () => live && setUser((now) => (now === undefined ? null : now)),
    );
    const loaded = (next: User): void => setUser(next);
    const unloaded = (): void => setUser(null);
    userManager.events.addUserLoaded(loaded);
    userManager.events.addUserUnloaded(unloaded);
    return () => {
      live = false;
      userManager.events.removeUserLoaded(loaded);
      userManager.events.removeUserUnloaded(unloaded);
    };
  }, [userManager]);

  const signIn = useCallback(
    (returnTo: string = currentAddress(), loginHint?: string) => {
      if (redirecting.current || signingOut.current) return;
      redirecting.current = true;
      setSignInError(undefined);
      const state: SignInState = { returnTo };
      userManager.signinRedirect({ state, login_hint: loginHint }).catch((error: unknown) => {
        redirecting.current = false;
        setSignInError(error);
      });
    },
    [userManager],
  );

  const signOut = useCallback(() => {
    signingOut.current = true;
    userManager.signoutRedirect().catch(async () => {
      // A provider without RP-initiated logout: forget the tokens here, then sign in again from the start.
      signingOut.current = false;
      await userManager.removeUser();
    });
  }, [userManager]);

  const api = useMemo(
    () =>
      createApiFetch({
        getAccessToken: async () => (await userManager.getUser())?.access_token,
        onUnauthorized: () => {
          // The API no longer accepts the token: sign in again, then come back here.
          void userManager.removeUser().then(() => signIn(currentAddress()));
        },
      }),
    [userManager, signIn],
  );

  const value = useMemo(
    () => ({ userManager, user, signIn, signOut, signInError, api }),
    [userManager, user, signIn, signOut, signInError, api],
  );
  return <AuthContext.Provider value={value}>{children}</AuthContext.Provider>;
}

export function useAuth(): AuthValue {
  const value = useContext(AuthContext);
  if (!value) throw new Error('useAuth outside AuthProvider');
  return value;
}

/** The API client of the signed-in user. */
export function useApi(): ApiFetch {
  return useAuth().api;
}
