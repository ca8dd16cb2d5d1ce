import { useEffect, useState } from 'react';
import { useNavigate } from 'react-router';
import type { User, UserManager } from 'oidc-client-ts';
import { useAuth } from '../auth/auth-context';
import { safeReturnTo } from '../auth/settings';
import type { SignInState } from '../auth/user-manager';
import { usePageTitle } from '../components/page';
import { Loading, ProblemMessage } from '../components/status';

// The code can be exchanged once: React's development double effects must not run it twice.
let pending: { manager: UserManager; result: Promise<User> } | undefined;
function completeSignIn(manager: UserManager): Promise<User> {
  if (pending?.manager !== manager) pending = { manager, result: manager.signinRedirectCallback() };
  return pending.result;
}

/** /auth/callback: finishes the authorization code flow, then goes back where the sign-in started. */
export function AuthCallbackPage() {
  usePageTitle('Signing in');
  const { userManager, signIn } = useAuth();
  const navigate = useNavigate();
  const [error, setError] = useState<unknown>();

  useEffect(() => {
    let live = true;
    completeSignIn(userManager).then(
      (user) => {
        if (!live) return;
        const state = user.state as Partial<SignInState> | undefined;
        void navigate(safeReturnTo(state?.returnTo), { replace: true });
      },
      (failure: unknown) => live && setError(failure),
    );
    return () => {
      live = false;
    };
  }, [userManager, navigate]);

  return (
    <main id="main" className="standalone">
      <h1>Signing in</h1>
      {error ? (
        <>
          <ProblemMessage prefix="Sign-in failed" error={error} />
          <button type="button" onClick={() => signIn('/')}>
            Sign in again
          </button>
        </>
      ) : (
        <Loading what="your account" />
      )}
    </main>
  );
}
