import { useState } from 'react';
import {
  useInfiniteQuery,
  useMutation,
  useQuery,
  useQueryClient,
  type InfiniteData,
} from '@tanstack/react-query';
import {
  createInvite,
  listInvites,
  listMembers,
  removeMember,
  revokeInvite,
  updateMember,
} from '../api/members';
import { keys } from '../api/queries';
import type { Invite, InviteStatus, Member, Page as ListPage, Role } from '../api/types';
import { useApi } from '../auth/auth-context';
import { useCan, useSession } from '../auth/session-context';
import { ConfirmDialog } from '../components/confirm-dialog';
import { Page } from '../components/page';
import { Empty, Loading, ProblemMessage, StatusMessage } from '../components/status';
import { Time } from '../components/time';
import { ROLES, roleLabel } from '../lib/permissions';

/** /members: members (role, dashboard access, removal) and invitations. */
export function MembersPage() {
  const can = useCan();
  return (
    <Page title="Members" action="members.read">
      <MemberTable />
      {can('invites.manage') && (
        <>
          <InviteForm />
          <OpenInvites status="pending" />
          <OpenInvites status="accepted" />
        </>
      )}
    </Page>
  );
}

function MemberTable() {
  const api = useApi();
  const can = useCan();
  const session = useSession();
  const queryClient = useQueryClient();
  const [message, setMessage] = useState('');
  const [failure, setFailure] = useState<unknown>();
  const [removing, setRemoving] = useState<Member | undefined>();
  const members = useInfiniteQuery({
    queryKey: keys.members,
    queryFn: ({ pageParam, signal }) => listMembers(api, pageParam || undefined, signal),
    initialPageParam: '',
    getNextPageParam: (page) => page.nextCursor,
  });
  const update = useMutation({
    mutationFn: (change: { member: Member; role?: Role; dashboard_access?: boolean }) =>
      updateMember(api, change.member.id, { role: change.role, dashboard_access: change.dashboard_access }),
    onMutate: async (change) => {
      setFailure(undefined);
      setMessage('');
      // Show the change at once; the API's answer (or refusal) settles it.
      await queryClient.cancelQueries({ queryKey: keys.members });
      queryClient.setQueryData<InfiniteData<ListPage<Member>>>(keys.members, (data) =>
        data
          ? {
              ...data,
              pages: data.pages.map((page) => ({
                ...page,
                items: page.items.map((item) =>
                  item.id === change.member.id
                    ? {
                        ...item,
                        role: change.role ?? item.role,
                        dashboard_access: change.dashboard_access ?? item.dashboard_access,
                      }
                    : item,
                ),
              })),
            }
          : data,
      );
    },
    onSuccess: (member) => {
      setMessage(
        `${member.name || member.email} is now ${roleLabel(member.role)}, dashboard access ${member.dashboard_access ? 'on' : 'off'}.`,
      );
    },
    onError: setFailure,
    onSettled: () => queryClient.invalidateQueries({ queryKey: keys.members }),
  });
  const remove = useMutation({
    mutationFn: (member: Member) => removeMember(api, member.id),
    onSuccess: async (_nothing, member) => {
      setRemoving(undefined);
      setMessage(`${member.name || member.email} was removed from the organization.`);
      await queryClient.invalidateQueries({ queryKey: keys.members });
    },
  });
  const manage = can('members.manage');
  const list = members.data?.pages.flatMap((page) => page.items) ?? [];

  return (
    <section aria-labelledby="members-heading">
      <h2 id="members-heading">Members</h2>
      <StatusMessage>{message}</StatusMessage>
      <ProblemMessage error={failure} />
      {members.error ? (
        <ProblemMessage error={members.error} onRetry={() => void members.refetch()} />
      ) : !members.data ? (
        <Loading what="members" />
      ) : list.length === 0 ? (
        <Empty>No members.</Empty>
      ) : (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <caption className="visually-hidden">Members of {session.org.name}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">E-mail</th>
                <th scope="col">Role</th>
                <th scope="col">Dashboard access</th>
                <th scope="col">Joined</th>
                {manage && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {list.map((member) => {
                const who = member.name || member.email;
                const self = member.id === session.user.id || member.email === session.user.email;
                return (
                  <tr key={member.id}>
                    <th scope="row" id={`member-${member.id}`}>
                      {who}
                      {self && <span className="muted"> (you)</span>}
                    </th>
                    <td className="wrap">{member.email}</td>
                    <td>
                      {manage ? (
                        <>
                          <label htmlFor={`role-${member.id}`} className="visually-hidden">
                            Role of {who}
                          </label>
                          <select
                            id={`role-${member.id}`}
                            value={member.role}
                            disabled={update.isPending}
                            onChange={(event) => update.mutate({ member, role: event.target.value as Role })}
                          >
                            {ROLES.map((role) => (
                              <option key={role} value={role}>
                                {roleLabel(role)}
                              </option>
                            ))}
                          </select>
                        </>
                      ) : (
                        roleLabel(member.role)
                      )}
                    </td>
                    <td>
                      {manage ? (
                        <label className="checkbox">
                          <input
                            aria-label={`Dashboard access for ${who}`}
                            type="checkbox"
                            checked={member.dashboard_access}
                            disabled={update.isPending}
                            onChange={(event) =>
                              update.mutate({ member, dashboard_access: event.target.checked })
                            }
                          />
                          <span aria-hidden="true">{member.dashboard_access ? 'On' : 'Off'}</span>
                        </label>
                      ) : member.dashboard_access ? (
                        'On'
                      ) : (
                        'Off'
                      )}
                    </td>
                    <td>
                      <Time value={member.joined_at} />
                    </td>
                    {manage && (
                      <td>
                        <button
                          type="button"
                          className="button-danger"
                          aria-describedby={`member-${member.id}`}
                          onClick={() => {
                            remove.reset();
                            setRemoving(member);
                          }}
                        >
                          Remove
                        </button>
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {members.hasNextPage && (
        <button
          type="button"
          className="button-secondary"
          onClick={() => void members.fetchNextPage()}
          disabled={members.isFetchingNextPage}
        >
          Load more members
        </button>
      )}
      <ConfirmDialog
        open={removing !== undefined}
        title={`Remove ${removing ? removing.name || removing.email : ''}?`}
        busy={remove.isPending}
        error={remove.error}
        onCancel={() => setRemoving(undefined)}
        onConfirm={() => removing && remove.mutate(removing)}
      >
        <p>They lose access to the organization at once. You can invite them again later.</p>
      </ConfirmDialog>
    </section>
  );
}

function InviteForm() {
  const api = useApi();
  const queryClient = useQueryClient();
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('ANALYST');
  const invite = useMutation({
    mutationFn: () => createInvite(api, { email: email.trim(), role }),
    onSuccess: async () => {
      setEmail('');
      await queryClient.invalidateQueries({ queryKey: keys.invites });
    },
  });
  return (
    <section aria-labelledby="invite-heading" className="card">
      <h2 id="invite-heading">Invite a member</h2>
      <form
        className="toolbar"
        onSubmit={(event) => {
          event.preventDefault();
          invite.mutate();
        }}
      >
        <div className="field">
          <label htmlFor="invite-email">E-mail address</label>
          <input
            id="invite-email"
            type="email"
            required
            maxLength={254}
            value={email}
            onChange={(event) => setEmail(event.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="invite-role">Role</label>
          <select id="invite-role" value={role} onChange={(event) => setRole(event.target.value as Role)}>
            {ROLES.map((item) => (
              <option key={item} value={item}>
                {roleLabel(item)}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" disabled={invite.isPending}>
          Send invite
        </button>
      </form>
      <ProblemMessage error={invite.error} />
      {invite.data && (
        <StatusMessage>
          Invitation sent to {invite.data.email} as {roleLabel(invite.data.role)}; it expires{' '}
          <Time value={invite.data.expires_at} />.
        </StatusMessage>
      )}
    </section>
  );
}

/** What each list of open invites is called and says; both can be revoked until the invitee joins. */
const OPEN_INVITES: Record<
  InviteStatus,
  { heading: string; empty: string; when: string; revokeEffect: string }
> = {
  pending: {
    heading: 'Pending invites',
    empty: 'No pending invites.',
    when: 'Sent',
    revokeEffect: 'The invitation link stops working.',
  },
  accepted: {
    heading: 'Accepted, not joined yet',
    empty: 'No accepted invites waiting for a sign-in.',
    when: 'Accepted',
    revokeEffect: 'Whoever signs in with this address does not join the organization.',
  },
};

function OpenInvites({ status }: { status: InviteStatus }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [revoking, setRevoking] = useState<Invite | undefined>();
  const text = OPEN_INVITES[status];
  const invites = useQuery({
    queryKey: [...keys.invites, status],
    queryFn: ({ signal }) => listInvites(api, status, undefined, signal),
  });
  const revoke = useMutation({
    mutationFn: (invite: Invite) => revokeInvite(api, invite.id),
    onSuccess: async () => {
      setRevoking(undefined);
      await queryClient.invalidateQueries({ queryKey: keys.invites });
    },
  });
  const headingId = `${status}-invites-heading`;
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>{text.heading}</h2>
      {invites.error ? (
        <ProblemMessage error={invites.error} onRetry={() => void invites.refetch()} />
      ) : !invites.data ? (
        <Loading what="invites" />
      ) : invites.data.items.length === 0 ? (
        <Empty>{text.empty}</Empty>
      ) : (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <caption className="visually-hidden">{text.heading}</caption>
            <thead>
              <tr>
                <th scope="col">E-mail</th>
                <th scope="col">Role</th>
                <th scope="col">{text.when}</th>
                <th scope="col">{status === 'accepted' ? 'Join by' : 'Expires'}</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {invites.data.items.map((invite) => (
                <tr key={invite.id}>
                  <th scope="row" className="wrap" id={`invite-${invite.id}`}>
                    {invite.email}
                  </th>
                  <td>{roleLabel(invite.role)}</td>
                  <td>
                    <Time value={invite.accepted_at ?? invite.created_at} />
                  </td>
                  <td>
                    <Time value={invite.expires_at} />
                  </td>
                  <td>
                    <button
                      type="button"
                      className="button-secondary"
                      aria-describedby={`invite-${invite.id}`}
                      onClick={() => {
                        revoke.reset();
                        setRevoking(invite);
                      }}
                    >
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {invites.data?.nextCursor && <p className="hint">Showing the first 200.</p>}
      <ConfirmDialog
        open={revoking !== undefined}
        title={`Revoke the invite for ${revoking?.email ?? ''}?`}
        busy={revoke.isPending}
        error={revoke.error}
        onCancel={() => setRevoking(undefined)}
        onConfirm={() => revoking && revoke.mutate(revoking)}
      >
        <p>{text.revokeEffect}</p>
      </ConfirmDialog>
    </section>
  );
}
