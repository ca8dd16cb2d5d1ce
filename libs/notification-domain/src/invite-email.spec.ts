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
  it('names the organization in the subject and carries the link and the token', () => {
    const email = renderInviteEmail(input);

    expect(email.to).toBe('grace@example.com');
    expect(email.subject).toBe("You're invited to join Acme on Security Telemetry");
    const link = 'https://app.example.com/invites/accept?token=sts_inv_abc-DEF_123';
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
    expect(email.text).toContain('token=tok%22%3E%3Cscript%3E');
  });

  it('keeps the subject on one line', () => {
    const email = renderInviteEmail({ ...input, orgName: 'Acme\r\nBcc: victim@example.com' });
    expect(email.subject).not.toMatch(/[\r\n]/);
    expect(email.subject).toBe("You're invited to join Acme Bcc: victim@example.com on Security Telemetry");
  });

  it('builds the accept link under the app base address', () => {
    expect(inviteAcceptUrl('http://localhost:8080', 'a b+c')).toBe(
      'http://localhost:8080/invites/accept?token=a%20b%2Bc',
    );
    expect(inviteAcceptUrl('https://example.com/app//', 't')).toBe(
      'https://example.com/app/invites/accept?token=t',
    );
  });

  it('escapes HTML special characters', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(headerSafe(' a\tb\nc ')).toBe('a b c');
  });
});
