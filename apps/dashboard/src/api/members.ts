import type { ApiFetch } from './api-fetch';
import { nextCursor } from './link-header';
import type { AcceptedInvite, Invite, InvitePreview, InviteStatus, Member, Page, Role } from './types';

export async function listMembers(
  api: ApiFetch,
  cursor?: string,
  signal?: AbortSignal,
): Promise<Page<Member>> {
  const response = await api<Member[]>('/api/members', { query: { limit: 200, cursor }, signal });
  return { items: response.data, nextCursor: nextCursor(response.headers.get('link')) };
}

export async function updateMember(
  api: ApiFetch,
  id: string,
  change: { role?: Role; dashboard_access?: boolean },
): Promise<Member> {
  return (await api<Member>(`/api/members/${encodeURIComponent(id)}`, { method: 'PATCH', body: change }))
    .data;
}

export async function removeMember(api: ApiFetch, id: string): Promise<void> {
  await api(`/api/members/${encodeURIComponent(id)}`, { method: 'DELETE' });
}

/** Pending invites, or accepted ones whose invitee has not joined yet. */
export async function listInvites(
  api: ApiFetch,
  status: InviteStatus,
  cursor?: string,
  signal?: AbortSignal,
): Promise<Page<Invite>> {
  const response = await api<Invite[]>('/api/invites', { query: { status, limit: 200, cursor }, signal });
  return { items: response.data, nextCursor: nextCursor(response.headers.get('link')) };
}

export async function createInvite(api: ApiFetch, invite: { email: string; role: Role }): Promise<Invite> {
  return (await api<Invite>('/api/invites', { method: 'POST', body: invite })).data;
}

export async function revokeInvite(api: ApiFetch, id: string): Promise<void> {
  await api(`/api/invites/${encodeURIComponent(id)}`, { method: 'DELETE' });
}

/** Who invites the token's holder, as what, until when; changes nothing. No authentication. */
export async function previewInvite(
  api: ApiFetch,
  token: string,
  signal?: AbortSignal,
): Promise<InvitePreview> {
  return (
    await api<InvitePreview>('/api/invites/preview', {
      method: 'POST',
      body: { token },
      anonymous: true,
      signal,
    })
  ).data;
}

/** No authentication: the token of the invitation e-mail is the credential. */
export async function acceptInvite(api: ApiFetch, token: string): Promise<AcceptedInvite> {
  return (
    await api<AcceptedInvite>('/api/invites/accept', { method: 'POST', body: { token }, anonymous: true })
  ).data;
}
