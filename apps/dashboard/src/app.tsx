import { useEffect, type ReactNode } from 'react';
import { Route, Routes } from 'react-router';
import { ApiError } from './api/problem';
import { useSessionQuery } from './api/queries';
import { useAuth } from './auth/auth-context';
import { SessionProvider } from './auth/session-context';
import { Layout } from './components/layout';
import { Loading, ProblemMessage } from './components/status';
import { AcceptInvitePage } from './pages/accept-invite';
import { AccessDeniedPage } from './pages/access-denied';
import { AlertsPage } from './pages/alerts';
import { AuthCallbackPage } from './pages/auth-callback';
import { BillingPage } from './pages/billing';
import { DeviceDetailPage } from './pages/device-detail';
import { DevicesPage } from './pages/devices';
import { EnrollmentPage } from './pages/enrollment';
import { MembersPage } from './pages/members';
import { NotFoundPage } from './pages/not-found';
import { NotificationsPage } from './pages/notifications';
import { OverviewPage } from './pages/overview';

/** Every page address of DESIGN.md 4a. The invitation and the sign-in callback need no session. */
export function App() {
  return (
    <Routes>
      <Route path="/auth/callback" element={<AuthCallbackPage />} />
      <Route path="/invites/accept" element={<AcceptInvitePage />} />
      <Route
        element={
          <RequireSignIn>
            <RequireSession />
          </RequireSignIn>
        }
      >
        <Route index element={<OverviewPage />} />
        <Route path="devices" element={<DevicesPage />} />
        <Route path="devices/:id" element={<DeviceDetailPage />} />
        <Route path="enrollment" element={<EnrollmentPage />} />
        <Route path="members" element={<MembersPage />} />
        <Route path="alerts" element={<AlertsPage />} />
        <Route path="billing" element={<BillingPage />} />
        <Route path="notifications" element={<NotificationsPage />} />
        <Route path="*" element={<NotFoundPage />} />
      </Route>
    </Routes>
  );
}

/** Signs in through the identity provider (a redirect) when no user is signed in. */
function RequireSignIn({ children }: { children: ReactNode }) {
  const { user, signIn, signInError } = useAuth();
  useEffect(() => {
    if (user === null && !signInError) signIn();
  }, [user, signIn, signInError]);
  if (user) return children;
  return (
    <main id="main" className="standalone">
      <h1>Security Telemetry</h1>
      {signInError ? (
        <ProblemMessage prefix="Sign-in failed" error={signInError} onRetry={() => signIn()} />
      ) : (
        <Loading what="your sign-in" />
      )}
    </main>
  );
}

/** Loads GET /api/session; 403 means the member's dashboard access is turned off. */
function RequireSession() {
  const session = useSessionQuery();
  if (session.error instanceof ApiError && session.error.status === 403) return <AccessDeniedPage />;
  if (session.data) {
    return (
      <SessionProvider session={session.data}>
        <Layout />
      </SessionProvider>
    );
  }
  return (
    <main id="main" className="standalone">
      <h1>Security Telemetry</h1>
      {session.error ? (
        <ProblemMessage error={session.error} onRetry={() => void session.refetch()} />
      ) : (
        <Loading what="your session" />
      )}
    </main>
  );
}
