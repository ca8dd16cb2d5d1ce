import type { EventData } from '@sts/events/event-catalogue';
import { NAME_MAX_LENGTH, plainTextLine } from '@sts/vocabulary/plain-text';
import { formatUtc, headerSafe, PRODUCT_NAME } from './email-format';
import { escapeHtml } from '@sts/vocabulary/html';
import { trimSlashes } from '@sts/vocabulary/urls';
import type { OutgoingEmail } from './notification-model';

export interface InviteEmailInput {
  to: string;
  orgName: string;
  invitedByName: string;
  role: EventData<'invite.created'>['role'];
  /** The plain invite token; it appears in the e-mail and nowhere else the notifier writes. */
  token: string;
  expiresAt: Date;
  /** Base address of the dashboard (`PUBLIC_APP_URL`), with or without a trailing slash. */
  publicAppUrl: string;
}

/**
 * The dashboard's invitation page, the token in the fragment (`#token=`): browsers never send a fragment,
 * so it stays out of the gateway's and proxies' access logs and out of any Referer; the page drops it from
 * the address (and so from history) as soon as it has read it. The page still reads `?token=` of older links.
 */
export function inviteAcceptUrl(publicAppUrl: string, token: string): string {
  return `${trimSlashes(publicAppUrl)}/invites/accept#token=${encodeURIComponent(token)}`;
}

/**
 * The invitation e-mail: a link to accept it in the dashboard, and the token with how to accept it
 * through the API (`POST /api/invites/accept`), for invitees who integrate without the dashboard.
 * The organization and inviter names are untrusted (an identity provider's display name, a name the
 * inviter chose): they become one line of plain text, so they cannot fake lines in the text part, and
 * every interpolated value is escaped in the HTML part.
 */
export function renderInviteEmail(untrusted: InviteEmailInput): OutgoingEmail {
  const input = {
    ...untrusted,
    orgName: plainTextLine(untrusted.orgName, NAME_MAX_LENGTH) || 'an organization',
    invitedByName: plainTextLine(untrusted.invitedByName, NAME_MAX_LENGTH) || 'An administrator',
  };
  const acceptUrl = inviteAcceptUrl(input.publicAppUrl, input.token);
  const apiUrl = `${trimSlashes(input.publicAppUrl)}/api/invites/accept`;
  const requestBody = JSON.stringify({ token: input.token });
  const expires = formatUtc(input.expiresAt);
  const subject = headerSafe(`You're invited to join ${input.orgName} on ${PRODUCT_NAME}`);

  const text = [
    'Hello,',
    '',
    `${input.invitedByName} invited you to join ${input.orgName} on ${PRODUCT_NAME} as ${input.role}.`,
    '',
    'Accept the invitation in the dashboard:',
    acceptUrl,
    '',
    'Or accept it through the API:',
    '',
    `  POST ${apiUrl}`,
    '  Content-Type: application/json',
    '',
    `  ${requestBody}`,
    '',
    `Your invitation token: ${input.token}`,
    '',
    `The invitation expires at ${expires}. Sign in with ${input.to} after accepting to join the organization.`,
    'If you did not expect this invitation, you can ignore this e-mail.',
    '',
  ].join('\n');

  const e = escapeHtml;
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>${e(subject)}</title></head>
<body style="font-family: sans-serif; line-height: 1.5; color: #1f2328;">
<p>Hello,</p>
<p><strong>${e(input.invitedByName)}</strong> invited you to join <strong>${e(input.orgName)}</strong> on ${e(PRODUCT_NAME)} as <strong>${e(input.role)}</strong>.</p>
<p><a href="${e(acceptUrl)}" style="display: inline-block; padding: 10px 16px; background: #0b5fff; color: #ffffff; text-decoration: none; border-radius: 4px;">Accept the invitation</a></p>
<p>If the button does not work, open this address:<br><a href="${e(acceptUrl)}">${e(acceptUrl)}</a></p>
<p>Or accept it through the API:</p>
<pre style="background: #f6f8fa; padding: 12px;">POST ${e(apiUrl)}
Content-Type: application/json

${e(requestBody)}</pre>
<p>Your invitation token: <code>${e(input.token)}</code></p>
<p>The invitation expires at ${e(expires)}. Sign in with ${e(input.to)} after accepting to join the organization.</p>
<p style="color: #57606a;">If you did not expect this invitation, you can ignore this e-mail.</p>
</body>
</html>
`;

  return { to: input.to, subject, text, html };
}
