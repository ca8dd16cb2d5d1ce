import { useLayoutEffect, useMemo, useState } from 'react';
import { useMutation, useQuery } from '@tanstack/react-query';
import { useLocation, useNavigate } from 'react-router';
import { acceptInvite, previewInvite } from '../api/members';
import { keys } from '../api/queries';
import { useAuth } from '../auth/auth-context';
import { usePageTitle } from '../components/page';
import { Loading, ProblemMessage, StatusMessage } from '../components/status';
import { Time } from '../components/time';
import { inviteTokenIn } from '../lib/invite-token';
import { roleLabel } from '../lib/permissions';

/**
 * /invites/accept#token=…: the invitation e-mail's link (`?token=…` in links sent before). It first shows
 * who invites, as what, and until when (POST /api/invites/preview, which changes nothing), so that nobody
 * accepts blind. Accepting needs no sign-in (the token is the credential); the invitee joins the
 * organization at their next sign-in with the invited e-mail.
 */
export function AcceptInvitePage() {
  usePageTitle('Accept invitation');
  const token = useInviteToken();
  const { api, signIn } = useAuth();
  const preview = useQuery({
    queryKey: [...keys.invitePreview, token],
    queryFn: ({ signal }) => previewInvite(api, token, signal),
    enabled: token !== '',
    staleTime: Infinity,
  });
  const accept = useMutation({ mutationFn: () => acceptInvite(api, token) });
  const accepted = accept.data;
  const invited = preview.data;

  return (
    <main id="main" className="standalone">
      <h1>Accept invitation</h1>
      {!token ? (
        <div role="alert" className="message message-error">
          <p>
            <strong>Error: </strong>This address has no invitation token. Open the link of your invitation
            e-mail again, or ask the administrator who invited you for a new invitation.
          </p>
        </div>
      ) : accepted ? (
        <>
          <StatusMessage>
            <p>
              Invitation accepted: you are joining <strong>{accepted.org.name}</strong> as{' '}
              {roleLabel(accepted.role)}.
            </p>
          </StatusMessage>
          <p>
            Sign in with <strong>{accepted.email}</strong> to open the organization&apos;s dashboard.
          </p>
          <button type="button" onClick={() => signIn('/', accepted.email)}>
            Sign in
          </button>
        </>
      ) : preview.error ? (
        <ProblemMessage
          prefix="This invitation cannot be opened"
          error={preview.error}
          onRetry={() => void preview.refetch()}
        />
      ) : !invited ? (
        <Loading what="the invitation" />
      ) : (
        <>
          <p>
            <strong>{invited.org.name}</strong> invites <strong>{invited.email}</strong> to join it as{' '}
            {roleLabel(invited.role)} on Security Telemetry, the service that protects its devices against
            harmful web addresses.
          </p>
          <p>
            Accepting makes you a member of {invited.org.name}; you then sign in with {invited.email}. The
            invitation can be accepted once, until <Time value={invited.expires_at} />.
          </p>
          <ProblemMessage prefix="The invitation could not be accepted" error={accept.error} />
          <button type="button" onClick={() => accept.mutate()} disabled={accept.isPending}>
            {accept.isPending ? 'Accepting…' : 'Accept invitation'}
          </button>
        </>
      )}
    </main>
  );
}

/**
 * The token of the page's address, which leaves the address at once: before the page is painted, the
 * address without it replaces the one with it (history.replaceState, through the router so that it knows
 * the address too), so it stays in no history entry, and a sign-in started from here does not carry it.
 * The page keeps it in memory.
 */
function useInviteToken(): string {
  const location = useLocation();
  const navigate = useNavigate();
  const carried = useMemo(() => inviteTokenIn(location), [location]);
  const [kept, setKept] = useState('');
  useLayoutEffect(() => {
    if (!carried) return;
    setKept(carried.token);
    void navigate(carried.rest, { replace: true });
  }, [carried, navigate]);
  return carried ? carried.token : kept;
}
