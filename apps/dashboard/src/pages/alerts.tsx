import { useEffect, useRef, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import {
  createAlertEndpoint,
  deleteAlertEndpoint,
  enableAlertEndpoint,
  listAlertDeliveries,
  listAlertEndpoints,
  rotateAlertSecret,
  sendTestAlert,
} from '../api/alerts';
import { keys } from '../api/queries';
import type { AlertEndpoint } from '../api/types';
import { useApi } from '../auth/auth-context';
import { useCan } from '../auth/session-context';
import { ConfirmDialog } from '../components/confirm-dialog';
import { CopyButton } from '../components/copy-button';
import { Page } from '../components/page';
import { Empty, Loading, ProblemMessage, StatusMessage } from '../components/status';
import { RelativeTime, Time } from '../components/time';

interface ShownSecret {
  readonly url: string;
  readonly secret: string;
  readonly previousExpiresAt?: string;
}

/** /alerts: HTTPS endpoints that receive signed alerts (Standard Webhooks), their deliveries and secrets. */
export function AlertsPage() {
  return (
    <Page
      title="Alerts"
      action="alerts.read"
      intro="Alert endpoints receive a signed HTTPS POST for every threat alert of the organization."
    >
      <AlertSections />
    </Page>
  );
}

function AlertSections() {
  const can = useCan();
  const [secret, setSecret] = useState<ShownSecret | undefined>();
  return (
    <>
      {secret && <SecretOnce secret={secret} onDone={() => setSecret(undefined)} />}
      <EndpointList onSecret={setSecret} />
      {can('alerts.manage') && <CreateEndpoint onSecret={setSecret} />}
    </>
  );
}

/** A signing secret, shown once (create or rotate), with a copy button and a warning. */
function SecretOnce({ secret, onDone }: { secret: ShownSecret; onDone: () => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [secret]);
  return (
    <section aria-labelledby="secret-heading" className="card card-warning">
      <h2 id="secret-heading" tabIndex={-1} ref={heading}>
        Signing secret for {secret.url}
      </h2>
      <p>
        <strong>Warning: this secret is shown only once.</strong> Copy it now into the receiver&apos;s
        configuration: it verifies the <code>webhook-signature</code> header of every alert.
      </p>
      <p className="secret-line">
        <code className="secret wrap">{secret.secret}</code>
      </p>
      {secret.previousExpiresAt && (
        <p>
          Messages also carry a signature with the previous secret until{' '}
          <Time value={secret.previousExpiresAt} />, so the receiver can switch without losing one.
        </p>
      )}
      <div className="actions">
        <CopyButton value={secret.secret} label="Copy secret" />
        <button type="button" onClick={onDone}>
          I have saved the secret
        </button>
      </div>
    </section>
  );
}

function CreateEndpoint({ onSecret }: { onSecret: (secret: ShownSecret) => void }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const create = useMutation({
    mutationFn: () =>
      createAlertEndpoint(api, { url: url.trim(), description: description.trim() || undefined }),
    onSuccess: async (created) => {
      setUrl('');
      setDescription('');
      onSecret({ url: created.url, secret: created.secret });
      await queryClient.invalidateQueries({ queryKey: keys.alertEndpoints });
    },
  });
  return (
    <section aria-labelledby="create-heading" className="card">
      <h2 id="create-heading">Add an endpoint</h2>
      <form
        className="form"
        onSubmit={(event) => {
          event.preventDefault();
          create.mutate();
        }}
      >
        <div className="field">
          <label htmlFor="endpoint-url">URL (https://)</label>
          <input
            id="endpoint-url"
            type="url"
            required
            maxLength={2048}
            pattern="https://.*"
            placeholder="https://alerts.example.com/hook"
            value={url}
            onChange={(event) => setUrl(event.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="endpoint-description">Description (optional)</label>
          <input
            id="endpoint-description"
            type="text"
            maxLength={200}
            value={description}
            onChange={(event) => setDescription(event.target.value)}
          />
        </div>
        <button type="submit" disabled={create.isPending}>
          Add endpoint
        </button>
      </form>
      <ProblemMessage error={create.error} />
    </section>
  );
}

function EndpointList({ onSecret }: { onSecret: (secret: ShownSecret) => void }) {
  const api = useApi();
  const can = useCan();
  const endpoints = useQuery({
    queryKey: keys.alertEndpoints,
    queryFn: ({ signal }) => listAlertEndpoints(api, signal),
  });
  return (
    <section aria-labelledby="endpoints-heading">
      <h2 id="endpoints-heading">Endpoints</h2>
      {endpoints.error ? (
        <ProblemMessage error={endpoints.error} onRetry={() => void endpoints.refetch()} />
      ) : !endpoints.data ? (
        <Loading what="alert endpoints" />
      ) : endpoints.data.length === 0 ? (
        <Empty>No alert endpoint yet: alerts reach the notification feed only.</Empty>
      ) : (
        <>
          {!can('alerts.manage') && (
            // The API masks them for every role but ORG_ADMIN.
            <p className="hint">
              Only admins see an endpoint’s whole address: its path and query (shown as …) often hold the
              receiver’s secret.
            </p>
          )}
          <ul className="endpoints">
            {endpoints.data.map((endpoint) => (
              <EndpointItem key={endpoint.id} endpoint={endpoint} onSecret={onSecret} />
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function EndpointItem({
  endpoint,
  onSecret,
}: {
  endpoint: AlertEndpoint;
  onSecret: (secret: ShownSecret) => void;
}) {
  const api = useApi();
  const can = useCan();
  const queryClient = useQueryClient();
  const [showLog, setShowLog] = useState(false);
  const [confirm, setConfirm] = useState<'rotate' | 'delete' | undefined>();
  const [message, setMessage] = useState('');
  const refreshList = () => queryClient.invalidateQueries({ queryKey: keys.alertEndpoints });
  const deliveriesKey = [...keys.alertEndpoints, endpoint.id, 'deliveries'];

  const test = useMutation({
    mutationFn: () => sendTestAlert(api, endpoint.id),
    onSuccess: async () => {
      setMessage('Test message queued: follow it in the delivery log.');
      setShowLog(true);
      await queryClient.invalidateQueries({ queryKey: deliveriesKey });
    },
  });
  const enable = useMutation({
    mutationFn: () => enableAlertEndpoint(api, endpoint.id),
    onSuccess: async () => {
      setMessage('Endpoint enabled again: new alerts go to it.');
      await refreshList();
    },
  });
  const rotate = useMutation({
    mutationFn: () => rotateAlertSecret(api, endpoint.id),
    onSuccess: (rotated) => {
      setConfirm(undefined);
      onSecret({
        url: rotated.url,
        secret: rotated.secret,
        previousExpiresAt: rotated.previous_secret_expires_at,
      });
    },
  });
  const remove = useMutation({
    mutationFn: () => deleteAlertEndpoint(api, endpoint.id),
    onSuccess: async () => {
      setConfirm(undefined);
      await refreshList();
    },
  });
  const manage = can('alerts.manage');
  const headingId = `endpoint-${endpoint.id}`;

  return (
    <li className="card endpoint" aria-labelledby={headingId}>
      <h3 id={headingId} className="wrap">
        {endpoint.url}
      </h3>
      <p>
        {endpoint.description && <>{endpoint.description}. </>}
        Added <Time value={endpoint.created_at} />.{' '}
        {endpoint.disabled_at ? (
          <span className="tag tag-disabled">
            Disabled since <Time value={endpoint.disabled_at} /> (deliveries kept failing)
          </span>
        ) : (
          <span className="tag tag-active">Active</span>
        )}
      </p>
      <StatusMessage>{message}</StatusMessage>
      <ProblemMessage error={test.error ?? enable.error} />
      <div className="actions">
        {manage && (
          <button
            aria-describedby={headingId}
            type="button"
            className="button-secondary"
            onClick={() => test.mutate()}
            disabled={test.isPending}
          >
            Send test
          </button>
        )}
        <button
          aria-describedby={headingId}
          type="button"
          className="button-secondary"
          aria-expanded={showLog}
          aria-controls={`${headingId}-log`}
          onClick={() => setShowLog((open) => !open)}
        >
          {showLog ? 'Hide deliveries' : 'Show deliveries'}
        </button>
        {manage && endpoint.disabled_at && (
          <button
            aria-describedby={headingId}
            type="button"
            onClick={() => enable.mutate()}
            disabled={enable.isPending}
          >
            Re-enable
          </button>
        )}
        {manage && (
          <button
            aria-describedby={headingId}
            type="button"
            className="button-secondary"
            onClick={() => {
              rotate.reset();
              setConfirm('rotate');
            }}
          >
            Rotate secret
          </button>
        )}
        {manage && (
          <button
            aria-describedby={headingId}
            type="button"
            className="button-danger"
            onClick={() => {
              remove.reset();
              setConfirm('delete');
            }}
          >
            Delete endpoint
          </button>
        )}
      </div>
      <div id={`${headingId}-log`}>
        {showLog && <DeliveryLog endpoint={endpoint} queryKey={deliveriesKey} />}
      </div>
      <ConfirmDialog
        open={confirm === 'rotate'}
        title={`Rotate the secret of ${endpoint.url}?`}
        danger={false}
        busy={rotate.isPending}
        error={rotate.error}
        onCancel={() => setConfirm(undefined)}
        onConfirm={() => rotate.mutate()}
      >
        <p>A new secret is shown once. For 24 hours alerts are signed with both secrets.</p>
      </ConfirmDialog>
      <ConfirmDialog
        open={confirm === 'delete'}
        title={`Delete ${endpoint.url}?`}
        busy={remove.isPending}
        error={remove.error}
        onCancel={() => setConfirm(undefined)}
        onConfirm={() => remove.mutate()}
      >
        <p>Alerts stop going to this address, and its pending deliveries are dropped.</p>
      </ConfirmDialog>
    </li>
  );
}

function DeliveryLog({ endpoint, queryKey }: { endpoint: AlertEndpoint; queryKey: readonly unknown[] }) {
  const api = useApi();
  const deliveries = useQuery({
    queryKey,
    queryFn: ({ signal }) => listAlertDeliveries(api, endpoint.id, signal),
    // Pending deliveries move on their own: look again while the log is open.
    refetchInterval: 10_000,
  });
  if (deliveries.error)
    return <ProblemMessage error={deliveries.error} onRetry={() => void deliveries.refetch()} />;
  if (!deliveries.data) return <Loading what="deliveries" />;
  if (deliveries.data.length === 0) return <Empty>No delivery yet. Send a test to try the endpoint.</Empty>;
  return (
    <div className="table-wrap" tabIndex={0}>
      <table>
        <caption>Recent deliveries to {endpoint.url}, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Created</th>
            <th scope="col">Type</th>
            <th scope="col">Status</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last answer</th>
            <th scope="col">Next attempt</th>
          </tr>
        </thead>
        <tbody>
          {deliveries.data.map((delivery) => (
            <tr key={delivery.id}>
              <th scope="row">
                <RelativeTime value={delivery.created_at} />
              </th>
              <td>{delivery.event_type === 'alert.test' ? 'Test' : 'Threat alert'}</td>
              <td>
                <span className={`tag tag-${delivery.status}`}>{delivery.status}</span>
              </td>
              <td>{delivery.attempts}</td>
              <td className="wrap">
                {delivery.last_response_code !== null ? `HTTP ${delivery.last_response_code}` : ''}
                {delivery.last_error ? ` ${delivery.last_error}` : ''}
                {delivery.last_duration_ms !== null ? ` (${Math.round(delivery.last_duration_ms)} ms)` : ''}
                {delivery.last_attempt_at === null && 'Not attempted yet'}
              </td>
              <td>{delivery.next_attempt_at ? <Time value={delivery.next_attempt_at} /> : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
