import { useMutation } from '@tanstack/react-query';
import { useSearchParams } from 'react-router';
import { acceptInvite } from '../api/members';
import { useAuth } from '../auth/auth-context';
import { usePageTitle } from '../components/page';
import { ProblemMessage, StatusMessage } from '../components/status';
import { roleLabel } from '../lib/permissions';

/**
 * /invites/accept?token=…: the invitation e-mail's link. Accepting needs no sign-in (the token is the
 * credential); the invitee joins the organization at their next sign-in with the invited e-mail.
 */
export function AcceptInvitePage() {
  usePageTitle('Accept invitation');
  const [params] = useSearchParams();
  const token = params.get('token') ?? '';
  const { api, signIn } = useAuth();
  const accept = useMutation({ mutationFn: () => acceptInvite(api, token) });
  const accepted = accept.data;

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
      ) : (
        <>
          <p>
            You have been invited to join an organization on Security Telemetry, the service that protects its
            devices against harmful web addresses. Accepting makes you a member of the organization that
            invited you, with the role it chose; you then sign in with the e-mail address the invitation was
            sent to.
          </p>
          <p>Each invitation can be accepted once, before it expires.</p>
          <ProblemMessage prefix="The invitation could not be accepted" error={accept.error} />
          <button type="button" onClick={() => accept.mutate()} disabled={accept.isPending}>
            {accept.isPending ? 'Accepting…' : 'Accept invitation'}
          </button>
        </>
      )}
    </main>
  );
}
