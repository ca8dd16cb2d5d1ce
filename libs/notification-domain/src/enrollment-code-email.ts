import { NAME_MAX_LENGTH, plainTextLine } from '@sts/vocabulary/plain-text';
import { formatUtc, headerSafe, PRODUCT_NAME, shellArg } from './email-format';
import { escapeHtml } from '@sts/vocabulary/html';
import { trimSlashes } from '@sts/vocabulary/urls';
import type { OutgoingEmail } from './notification-model';

export interface EnrollmentCodeEmailInput {
  to: string;
  orgName: string;
  requestedByName: string;
  /** The plain one-time code; it appears in the e-mail and nowhere else the notifier writes. */
  code: string;
  /** The plain enrollment key of the organization; likewise only in the e-mail. */
  enrollmentKey: string;
  expiresAt: Date;
  /** Base address the agent talks to (`PUBLIC_API_URL`, the gateway), with or without a trailing slash. */
  publicApiUrl: string;
}

export interface AgentCommands {
  /** `agent enroll --server … --key … --code …` */
  enroll: string;
  /** The same with the values in `STS_SERVER_URL`, `STS_ENROLLMENT_KEY`, `STS_ENROLLMENT_CODE` (POSIX shell). */
  enrollWithEnvironment: string[];
  status: string;
}

/**
 * The commands that enroll a device. Values are passed through `shellArg`, so ordinary keys, codes
 * and URLs appear as they are and anything a shell would interpret is single-quoted.
 */
export function agentCommands(publicApiUrl: string, enrollmentKey: string, code: string): AgentCommands {
  const server = shellArg(trimSlashes(publicApiUrl));
  const key = shellArg(enrollmentKey);
  const quotedCode = shellArg(code);
  return {
    enroll: `agent enroll --server ${server} --key ${key} --code ${quotedCode}`,
    enrollWithEnvironment: [
      `export STS_SERVER_URL=${server}`,
      `export STS_ENROLLMENT_KEY=${key}`,
      `export STS_ENROLLMENT_CODE=${quotedCode}`,
      'agent enroll',
    ],
    status: 'agent status',
  };
}

/**
 * The e-mail with an enrollment code and installation instructions for the agent: what the agent
 * is, the one-time code (when it expires, that it works once), the organization's enrollment key,
 * the enroll command in its flag and environment forms, and `agent status` to check.
 *
 * The organization and requester names come from elsewhere and are untrusted: they become one line
 * of plain text (no line breaks that could fake lines of instructions in the text part) and are
 * HTML-escaped in the HTML part, like every other interpolated value.
 */
export function renderEnrollmentCodeEmail(input: EnrollmentCodeEmailInput): OutgoingEmail {
  const orgName = plainTextLine(input.orgName, NAME_MAX_LENGTH) || 'your organization';
  const requester = plainTextLine(input.requestedByName, NAME_MAX_LENGTH) || 'An administrator';
  const expires = formatUtc(input.expiresAt);
  const commands = agentCommands(input.publicApiUrl, input.enrollmentKey, input.code);
  const subject = headerSafe(`Install the ${PRODUCT_NAME} agent for ${orgName}`);

  const text = [
    'Hello,',
    '',
    `${requester} asked us to send you what you need to enroll a device of ${orgName} in ${PRODUCT_NAME}.`,
    '',
    `The ${PRODUCT_NAME} agent is a small command-line program that runs on the device. It enrolls the`,
    `device with ${orgName} once, then reports the device's telemetry (which web addresses were allowed,`,
    'warned about or blocked) so that your organization sees it in its dashboard.',
    '',
    `Your one-time enrollment code: ${input.code}`,
    `It expires at ${expires} and works once: it enrolls one device and cannot be used again.`,
    '',
    `Your organization's enrollment key: ${input.enrollmentKey}`,
    'The key is the same for every device of the organization and stays valid until an administrator',
    'rotates or revokes it. Keep it secret: with it and a code, anyone can enroll a device.',
    '',
    'Install the agent program on the device, then run, as the user that will run the agent:',
    '',
    `  ${commands.enroll}`,
    '',
    'Or give the same values through environment variables (better on a shared machine: other users',
    'can see the arguments of a running command):',
    '',
    ...commands.enrollWithEnvironment.map((line) => `  ${line}`),
    '',
    'Then check what the device is enrolled as:',
    '',
    `  ${commands.status}`,
    '',
    'The agent keeps its credentials in a configuration file readable only by that user; `agent --help`',
    `lists every command. If the code has expired or was already used, ask ${requester} for a new one.`,
    '',
    'If you did not expect this e-mail, you can ignore it: nothing is enrolled until the command runs.',
    '',
  ].join('\n');

  const e = escapeHtml;
  const pre = 'style="background: #f6f8fa; padding: 12px; white-space: pre-wrap; word-break: break-all;"';
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>${e(subject)}</title></head>
<body style="font-family: sans-serif; line-height: 1.5; color: #1f2328;">
<p>Hello,</p>
<p><strong>${e(requester)}</strong> asked us to send you what you need to enroll a device of <strong>${e(orgName)}</strong> in ${e(PRODUCT_NAME)}.</p>
<p>The ${e(PRODUCT_NAME)} agent is a small command-line program that runs on the device. It enrolls the device with ${e(orgName)} once, then reports the device's telemetry (which web addresses were allowed, warned about or blocked) so that your organization sees it in its dashboard.</p>
<p>Your one-time enrollment code: <code>${e(input.code)}</code><br>
It expires at ${e(expires)} and works once: it enrolls one device and cannot be used again.</p>
<p>Your organization's enrollment key: <code style="word-break: break-all;">${e(input.enrollmentKey)}</code><br>
The key is the same for every device of the organization and stays valid until an administrator rotates or revokes it. Keep it secret: with it and a code, anyone can enroll a device.</p>
<p>Install the agent program on the device, then run, as the user that will run the agent:</p>
<pre ${pre}>${e(commands.enroll)}</pre>
<p>Or give the same values through environment variables (better on a shared machine: other users can see the arguments of a running command):</p>
<pre ${pre}>${commands.enrollWithEnvironment.map((line) => e(line)).join('\n')}</pre>
<p>Then check what the device is enrolled as:</p>
<pre ${pre}>${e(commands.status)}</pre>
<p>The agent keeps its credentials in a configuration file readable only by that user; <code>agent --help</code> lists every command. If the code has expired or was already used, ask ${e(requester)} for a new one.</p>
<p style="color: #57606a;">If you did not expect this e-mail, you can ignore it: nothing is enrolled until the command runs.</p>
</body>
</html>
`;

  return { to: input.to, subject, text, html };
}
