import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import {
  createEnrollmentCodes,
  emailEnrollmentCode,
  getEnrollmentKey,
  revokeEnrollmentKey,
  rotateEnrollmentKey,
} from '../api/enrollment';
import { keys } from '../api/queries';
import type { EnrollmentCode, EnrollmentKey } from '../api/types';
import { useApi } from '../auth/auth-context';
import { ConfirmDialog } from '../components/confirm-dialog';
import { CopyButton } from '../components/copy-button';
import { Page } from '../components/page';
import { Empty, Loading, ProblemMessage, StatusMessage } from '../components/status';
import { Time } from '../components/time';
import { maskSecret } from '../lib/format';

/** /enrollment: the enrollment key, one-time codes, and how to install the agent (ORG_ADMIN). */
export function EnrollmentPage() {
  return (
    <Page
      title="Enrollment"
      action="enrollment.manage"
      intro="A device enrolls with the organization's enrollment key and a one-time code (valid 24 hours)."
    >
      <EnrollmentSections />
    </Page>
  );
}

function EnrollmentSections() {
  const api = useApi();
  const key = useQuery({
    queryKey: keys.enrollmentKey,
    queryFn: ({ signal }) => getEnrollmentKey(api, signal),
  });
  const [codes, setCodes] = useState<EnrollmentCode[]>([]);
  return (
    <>
      <KeySection query={key} />
      <CodesSection codes={codes} onCodes={setCodes} />
      <EmailSection />
      <InstallSection enrollmentKey={key.data ?? null} code={codes[0]?.code} />
    </>
  );
}

function KeySection({
  query,
}: {
  query: { data?: EnrollmentKey | null; error: unknown; refetch: () => unknown };
}) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [shown, setShown] = useState(false);
  const [confirm, setConfirm] = useState<'rotate' | 'revoke' | undefined>();
  const [message, setMessage] = useState('');
  const done = async (text: string): Promise<void> => {
    setConfirm(undefined);
    setMessage(text);
    await queryClient.invalidateQueries({ queryKey: keys.enrollmentKey });
  };
  const rotate = useMutation({
    mutationFn: () => rotateEnrollmentKey(api),
    onSuccess: (created) => {
      queryClient.setQueryData(keys.enrollmentKey, created);
      setShown(true);
      return done('A new enrollment key is ready; the previous key no longer enrolls devices.');
    },
  });
  const create = useMutation({
    mutationFn: () => rotateEnrollmentKey(api),
    onSuccess: (created) => {
      queryClient.setQueryData(keys.enrollmentKey, created);
      setShown(true);
      setMessage('Enrollment key created.');
    },
  });
  const revoke = useMutation({
    mutationFn: () => revokeEnrollmentKey(api),
    onSuccess: () => {
      queryClient.setQueryData(keys.enrollmentKey, null);
      return done('Enrollment key revoked: new enrollments are blocked until you create a key.');
    },
  });
  const current = query.data;

  return (
    <section aria-labelledby="key-heading" className="card">
      <h2 id="key-heading">Enrollment key</h2>
      <StatusMessage>{message}</StatusMessage>
      {query.error ? (
        <ProblemMessage error={query.error} onRetry={() => void query.refetch()} />
      ) : current === undefined ? (
        <Loading what="the enrollment key" />
      ) : current === null ? (
        <>
          <Empty>The organization has no enrollment key: devices cannot enroll.</Empty>
          <ProblemMessage error={create.error} />
          <button type="button" onClick={() => create.mutate()} disabled={create.isPending}>
            Create enrollment key
          </button>
        </>
      ) : (
        <>
          <p className="secret-line">
            <span className="visually-hidden">Enrollment key: </span>
            <code className="secret" aria-label={shown ? 'Enrollment key' : 'Enrollment key, hidden'}>
              {shown ? current.key : maskSecret(current.key)}
            </code>
          </p>
          <p className="muted">
            Created <Time value={current.created_at} />. Devices already enrolled keep working when the key is
            rotated or revoked.
          </p>
          <div className="actions">
            <button
              type="button"
              className="button-secondary"
              aria-pressed={shown}
              onClick={() => setShown((s) => !s)}
            >
              {shown ? 'Hide key' : 'Show key'}
            </button>
            <CopyButton value={current.key} label="Copy key" />
            <button type="button" className="button-secondary" onClick={() => setConfirm('rotate')}>
              Rotate key
            </button>
            <button type="button" className="button-danger" onClick={() => setConfirm('revoke')}>
              Revoke key
            </button>
          </div>
        </>
      )}
      <ConfirmDialog
        open={confirm === 'rotate'}
        title="Rotate the enrollment key?"
        busy={rotate.isPending}
        error={rotate.error}
        onCancel={() => setConfirm(undefined)}
        onConfirm={() => rotate.mutate()}
      >
        <p>The current key stops working at once: installers that use it must get the new key.</p>
      </ConfirmDialog>
      <ConfirmDialog
        open={confirm === 'revoke'}
        title="Revoke the enrollment key?"
        busy={revoke.isPending}
        error={revoke.error}
        onCancel={() => setConfirm(undefined)}
        onConfirm={() => revoke.mutate()}
      >
        <p>No device can enroll until you create a new key. Enrolled devices keep working.</p>
      </ConfirmDialog>
    </section>
  );
}

function CodesSection({
  codes,
  onCodes,
}: {
  codes: EnrollmentCode[];
  onCodes: (codes: EnrollmentCode[]) => void;
}) {
  const api = useApi();
  const [count, setCount] = useState('1');
  const generate = useMutation({
    mutationFn: (n: number) => createEnrollmentCodes(api, n),
    onSuccess: onCodes,
  });
  return (
    <section aria-labelledby="codes-heading" className="card">
      <h2 id="codes-heading">One-time codes</h2>
      <form
        className="toolbar"
        onSubmit={(event) => {
          event.preventDefault();
          generate.mutate(Number(count));
        }}
      >
        <div className="field">
          <label htmlFor="code-count">Number of codes</label>
          <input
            id="code-count"
            type="number"
            min={1}
            max={100}
            required
            value={count}
            onChange={(event) => setCount(event.target.value)}
          />
        </div>
        <button type="submit" disabled={generate.isPending}>
          Generate codes
        </button>
      </form>
      <ProblemMessage error={generate.error} />
      {codes.length > 0 && (
        <>
          <div className="table-wrap" tabIndex={0}>
            <table>
              <caption>Codes generated just now (each enrolls one device)</caption>
              <thead>
                <tr>
                  <th scope="col">Code</th>
                  <th scope="col">Expires</th>
                  <th scope="col">Copy</th>
                </tr>
              </thead>
              <tbody>
                {codes.map((code) => (
                  <tr key={code.code}>
                    <th scope="row" className="mono">
                      {code.code}
                    </th>
                    <td>
                      <Time value={code.expires_at} />
                    </td>
                    <td>
                      <CopyButton value={code.code} label={`Copy code ${code.code}`} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {codes.length > 1 && (
            <CopyButton value={codes.map((c) => c.code).join('\n')} label="Copy all codes" />
          )}
        </>
      )}
    </section>
  );
}

function EmailSection() {
  const api = useApi();
  const [email, setEmail] = useState('');
  const send = useMutation({
    mutationFn: (to: string) => emailEnrollmentCode(api, to),
    onSuccess: () => setEmail(''),
  });
  return (
    <section aria-labelledby="email-heading" className="card">
      <h2 id="email-heading">E-mail a code</h2>
      <p>Sends one code, the enrollment key and the install command to the person installing the agent.</p>
      <form
        className="toolbar"
        onSubmit={(event) => {
          event.preventDefault();
          send.mutate(email.trim());
        }}
      >
        <div className="field">
          <label htmlFor="code-email">E-mail address</label>
          <input
            id="code-email"
            type="email"
            required
            maxLength={254}
            autoComplete="email"
            value={email}
            onChange={(event) => setEmail(event.target.value)}
          />
        </div>
        <button type="submit" disabled={send.isPending}>
          E-mail a code
        </button>
      </form>
      <ProblemMessage error={send.error} />
      {send.data && (
        <StatusMessage>
          A code was sent to {send.data.email}; it expires <Time value={send.data.expires_at} />.
        </StatusMessage>
      )}
    </section>
  );
}

/** Whether the agent needs --allow-insecure-http to reach this origin (plain http to another machine). */
function needsInsecureFlag(origin: string): boolean {
  const url = new URL(origin);
  return url.protocol === 'http:' && !['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
}

function InstallSection({ enrollmentKey, code }: { enrollmentKey: EnrollmentKey | null; code?: string }) {
  const origin = window.location.origin;
  const key = enrollmentKey?.key ?? '<ENROLLMENT_KEY>';
  const insecure = needsInsecureFlag(origin) ? ' --allow-insecure-http' : '';
  const enroll = `STS_ENROLLMENT_KEY='${key}' npm run agent -- enroll --server ${origin} --code ${code ?? '<CODE>'}${insecure}`;
  const enrollWithFlag = `npm run agent -- enroll --server ${origin} --key ${key} --code ${code ?? '<CODE>'}${insecure}`;
  const commands = [
    {
      label: 'Enroll this device (the key in a variable, as the agent recommends)',
      command: enroll,
      copy: 'Copy enroll command',
    },
    {
      label: 'Or with the key as a flag (visible to other users of the machine)',
      command: enrollWithFlag,
      copy: 'Copy enroll command with --key',
    },
    { label: 'Check the enrollment', command: 'npm run agent -- status', copy: 'Copy status command' },
    {
      label: 'Send analyzed addresses (JSON lines)',
      command: 'npm run agent -- report --input events.jsonl',
      copy: 'Copy report command',
    },
    {
      label: 'Or generate realistic test traffic',
      command: 'npm run agent -- simulate --events 500',
      copy: 'Copy simulate command',
    },
  ];
  return (
    <section aria-labelledby="install-heading" className="card">
      <h2 id="install-heading">Install the agent</h2>
      <p>
        From a checkout of the agent (Node.js 24), run these commands on the device. Each code enrolls one
        device and expires after 24 hours{code ? '' : '; generate a code above to fill it in'}. Run{' '}
        <code>npm run agent -- enroll --help</code> for every option.
      </p>
      <ol className="commands">
        {commands.map((item) => (
          <li key={item.copy}>
            <p>{item.label}</p>
            <pre className="command">
              <code>{item.command.replace(enrollmentKey?.key ?? '\u0000', maskSecret(key))}</code>
            </pre>
            <CopyButton value={item.command} label={item.copy} />
          </li>
        ))}
      </ol>
    </section>
  );
}
