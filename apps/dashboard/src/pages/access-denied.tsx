import { useAuth } from '../auth/auth-context';
import { usePageTitle } from '../components/page';

/** GET /api/session answered 403: the member's dashboard access is turned off. */
export function AccessDeniedPage() {
  usePageTitle('Dashboard access turned off');
  const { signOut, user } = useAuth();
  const email = typeof user?.profile.email === 'string' ? user.profile.email : undefined;
  return (
    <main id="main" className="standalone">
      <h1>Your dashboard access is turned off</h1>
      <p>
        {email ? <>You are signed in as {email}. </> : null}
        Your dashboard access is turned off; ask an administrator of your organization to turn it on again.
        Devices and alerts of your organization keep working meanwhile.
      </p>
      <button type="button" onClick={signOut}>
        Sign out
      </button>
    </main>
  );
}
