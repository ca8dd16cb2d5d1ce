import { headerSafe } from './email-format';
import { escapeHtml } from '@sts/vocabulary/html';
import { inviteAcceptUrl, renderInviteEmail, type InviteEmailInput } from './invite-email';

const input: InviteEmailInput = {
  to: 'grace@example.com',
  orgName: 'Acme',
  invitedByName: 'Ada Lovelace',
  role: 'ANALYST',
  token: 'sts_inv_abc-DEF_123',
  expiresAt: new Date('2026-03-08T12:34:56.000Z'),
  publicAppUrl: 'https://app.example.com/',
};

describe('invite e-mail', () => {
  it('sends the invitee the whole e-mail: subject, text part and HTML part', () => {
    const link = 'https://app.example.com/invites/accept#token=sts_inv_abc-DEF_123';

    expect(renderInviteEmail(input)).toEqual({
      to: 'grace@example.com',
      subject: "You're invited to join Acme on Security Telemetry",
      text: [
        'Hello,',
        '',
        'Ada Lovelace invited you to join Acme on Security Telemetry as ANALYST.',
        '',
        'Accept the invitation in the dashboard:',
        link,
        '',
        'Or accept it through the API:',
        '',
        '  POST https://app.example.com/api/invites/accept',
        '  Content-Type: application/json',
        '',
        '  {"token":"sts_inv_abc-DEF_123"}',
        '',
        'Your invitation token: sts_inv_abc-DEF_123',
        '',
        'The invitation expires at 2026-03-08 12:34 UTC. Sign in with grace@example.com after accepting to join the organization.',
        'If you did not expect this invitation, you can ignore this e-mail.',
        '',
      ].join('\n'),
      html: [
        '<!doctype html>',
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>You&#39;re invited to join Acme on Security Telemetry</title></head>',
        '<body style="font-family: sans-serif; line-height: 1.5; color: #1f2328;">',
        '<p>Hello,</p>',
        '<p><strong>Ada Lovelace</strong> invited you to join <strong>Acme</strong> on Security Telemetry as <strong>ANALYST</strong>.</p>',
        `<p><a href="${link}" style="display: inline-block; padding: 10px 16px; background: #0b5fff; color: #ffffff; text-decoration: none; border-radius: 4px;">Accept the invitation</a></p>`,
        `<p>If the button does not work, open this address:<br><a href="${link}">${link}</a></p>`,
        '<p>Or accept it through the API:</p>',
        '<pre style="background: #f6f8fa; padding: 12px;">POST https://app.example.com/api/invites/accept',
        'Content-Type: application/json',
        '',
        '{&quot;token&quot;:&quot;sts_inv_abc-DEF_123&quot;}</pre>',
        '<p>Your invitation token: <code>sts_inv_abc-DEF_123</code></p>',
        '<p>The invitation expires at 2026-03-08 12:34 UTC. Sign in with grace@example.com after accepting to join the organization.</p>',
        '<p style="color: #57606a;">If you did not expect this invitation, you can ignore this e-mail.</p>',
        '</body>',
        '</html>',
        '',
      ].join('\n'),
    });
  });

  it('says "an organization" and "An administrator" when nothing is left of the names', () => {
    const email = renderInviteEmail({ ...input, orgName: ' \r\n', invitedByName: '\u0000' });

    expect(email.subject).toBe("You're invited to join an organization on Security Telemetry");
    expect(email.text).toContain(
      'An administrator invited you to join an organization on Security Telemetry as ANALYST.',
    );
    expect(email.html).toContain(
      '<strong>An administrator</strong> invited you to join <strong>an organization</strong>',
    );
  });

  it('names the organization in the subject and carries the link and the token', () => {
    const email = renderInviteEmail(input);

    expect(email.to).toBe('grace@example.com');
    expect(email.subject).toBe("You're invited to join Acme on Security Telemetry");
    const link = 'https://app.example.com/invites/accept#token=sts_inv_abc-DEF_123';
    expect(email.text).toContain(link);
    expect(email.text).toContain('Your invitation token: sts_inv_abc-DEF_123');
    expect(email.text).toContain('POST https://app.example.com/api/invites/accept');
    expect(email.text).toContain('{"token":"sts_inv_abc-DEF_123"}');
    expect(email.text).toContain('Ada Lovelace invited you to join Acme on Security Telemetry as ANALYST.');
    expect(email.text).toContain('2026-03-08 12:34 UTC');
    expect(email.html).toContain(`href="${link}"`);
    expect(email.html).toContain('<code>sts_inv_abc-DEF_123</code>');
    expect(email.html).toContain('{&quot;token&quot;:&quot;sts_inv_abc-DEF_123&quot;}');
  });

  it('escapes every interpolated value in the HTML part', () => {
    const hostile = '<script>alert("x")</script> & \'Co\'';
    const email = renderInviteEmail({
      ...input,
      orgName: hostile,
      invitedByName: '<img src=x onerror=alert(1)>',
      to: '"><b>@example.com',
      token: 'tok"><script>',
      publicAppUrl: 'https://app.example.com/x"onmouseover="alert(1)',
    });

    expect(email.html).not.toContain('<script>');
    expect(email.html).not.toContain('<img');
    expect(email.html).not.toContain('<b>');
    expect(email.html).not.toContain('"onmouseover="');
    expect(email.html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;Co&#39;');
    expect(email.html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    // The plain-text part is not HTML: values appear as they are.
    expect(email.text).toContain(hostile);
    // The token is URL-encoded in the link.
    expect(email.text).toContain('#token=tok%22%3E%3Cscript%3E');
  });

  it('keeps the subject on one line', () => {
    const email = renderInviteEmail({ ...input, orgName: 'Acme\r\nBcc: victim@example.com' });
    expect(email.subject).not.toMatch(/[\r\n]/);
    expect(email.subject).toBe("You're invited to join Acme Bcc: victim@example.com on Security Telemetry");
  });

  it('puts the token in the fragment of the link, which no browser sends to a server', () => {
    const link = new URL(inviteAcceptUrl('https://app.example.com', 'sts_inv_abc-DEF_123'));

    expect(link.pathname).toBe('/invites/accept');
    expect(link.search).toBe('');
    expect(new URLSearchParams(link.hash.slice(1)).get('token')).toBe('sts_inv_abc-DEF_123');
    // The URL a browser requests (fragment dropped) carries no token.
    expect(`${link.origin}${link.pathname}${link.search}`).not.toContain('sts_inv_');
  });

  it('builds the accept link under the app base address', () => {
    expect(inviteAcceptUrl('http://localhost:8080', 'a b+c')).toBe(
      'http://localhost:8080/invites/accept#token=a%20b%2Bc',
    );
    expect(inviteAcceptUrl('https://example.com/app//', 't')).toBe(
      'https://example.com/app/invites/accept#token=t',
    );
  });

  it('escapes HTML special characters', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(headerSafe(' a\tb\nc ')).toBe('a b c');
  });
});
