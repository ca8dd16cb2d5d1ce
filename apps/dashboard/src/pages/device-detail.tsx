import { useState } from 'react';
import { useMutation, useQuery } from '@tanstack/react-query';
import { Link, useLocation, useNavigate, useParams, useSearchParams } from 'react-router';
import { allowReEnrollment, getDevice } from '../api/devices';
import { keys } from '../api/queries';
import type { Device } from '../api/types';
import { useApi } from '../auth/auth-context';
import { useCan } from '../auth/session-context';
import { AnalyticsPanel, isWindow } from '../components/analytics-panel';
import { DeviceActions } from '../components/device-actions';
import { Page } from '../components/page';
import { Loading, ProblemMessage, StatusMessage } from '../components/status';
import { RelativeTime, Time } from '../components/time';

/** /devices/:id: one device's details and its own analytics (the API's device_id scope). */
export function DeviceDetailPage() {
  const { id = '' } = useParams();
  const api = useApi();
  const location = useLocation();
  const fromList = (location.state as { device?: Device } | null)?.device;
  // Opened from the list, its row comes along as router state and shows at once; else GET /api/devices/:id.
  const device = useQuery({
    queryKey: [...keys.devices, 'one', id],
    queryFn: ({ signal }) => getDevice(api, id, signal),
    initialData: fromList?.id === id ? fromList : undefined,
    staleTime: fromList?.id === id ? 5_000 : 0,
  });
  const name = device.data?.name;

  return (
    <Page title={name ? `Device ${name}` : 'Device'} action="devices.read">
      <p>
        <Link to="/devices">Back to the device list</Link>
      </p>
      {device.error ? (
        <ProblemMessage error={device.error} onRetry={() => void device.refetch()} />
      ) : device.isPending ? (
        <Loading what="the device" />
      ) : !device.data ? (
        <div role="alert" className="message message-error">
          <p>
            <strong>Not found: </strong>no device of your organization has this address. It may have been
            deleted.
          </p>
        </div>
      ) : (
        <DeviceDetails device={device.data} />
      )}
    </Page>
  );
}

function DeviceDetails({ device }: { device: Device }) {
  const api = useApi();
  const can = useCan();
  const navigate = useNavigate();
  const [params, setParams] = useSearchParams();
  const [message, setMessage] = useState('');
  const [failure, setFailure] = useState<unknown>();
  const windowParam = params.get('window');
  const reEnroll = useMutation({ mutationFn: () => allowReEnrollment(api, device.id) });
  const update = (name: string, value: string): void => {
    const next = new URLSearchParams(params);
    next.set(name, value);
    setParams(next, { replace: true });
  };
  const metadata = Object.entries(device.metadata ?? {});

  return (
    <>
      <StatusMessage>{message}</StatusMessage>
      <ProblemMessage error={failure} />
      <section aria-labelledby="details-heading" className="card">
        <h2 id="details-heading">Details</h2>
        <dl className="details">
          <dt>Name</dt>
          <dd>{device.name}</dd>
          <dt>Status</dt>
          <dd>
            <span className={`tag tag-${device.status}`}>
              {device.status === 'active' ? 'Active' : 'Disabled'}
            </span>
          </dd>
          <dt>Last seen</dt>
          <dd>
            <RelativeTime value={device.last_seen_at} />
          </dd>
          <dt>Enrolled</dt>
          <dd>
            <Time value={device.enrolled_at} />
          </dd>
          <dt>Machine id</dt>
          <dd className="mono wrap">{device.machine_id}</dd>
          <dt>Device id</dt>
          <dd className="mono wrap">{device.id}</dd>
        </dl>
        {metadata.length > 0 && (
          <>
            <h3>Reported by the agent</h3>
            <dl className="details">
              {metadata.map(([key, value]) => (
                <div key={key}>
                  <dt>{key}</dt>
                  <dd className="wrap">{typeof value === 'string' ? value : JSON.stringify(value)}</dd>
                </div>
              ))}
            </dl>
          </>
        )}
        <DeviceActions
          device={device}
          onDone={(text) => {
            setFailure(undefined);
            setMessage(text);
          }}
          onError={(error) => {
            setMessage('');
            setFailure(error);
          }}
          onDeleted={() => void navigate('/devices', { replace: true })}
        />
        {can('devices.allowReEnrollment') && (
          <div className="subsection">
            <h3>Reinstall without the device token</h3>
            <p>
              When this device was reinstalled and lost its credential, allow it to enroll again (once, within
              one hour) with a new code: it keeps its history.
            </p>
            <button
              type="button"
              className="button-secondary"
              onClick={() => reEnroll.mutate()}
              disabled={reEnroll.isPending}
            >
              Allow re-enrollment
            </button>
            <ProblemMessage error={reEnroll.error} />
            {reEnroll.data && (
              <StatusMessage>
                Re-enrollment allowed until <Time value={reEnroll.data.allowed_until} />.
              </StatusMessage>
            )}
          </div>
        )}
      </section>
      {device.status === 'disabled' && (
        <p className="message message-info">
          This device is disabled: its telemetry is refused and it is left out of the organization&apos;s
          figures.
        </p>
      )}
      <AnalyticsPanel
        window={isWindow(windowParam) ? windowParam : '24h'}
        deviceId={device.id}
        onWindowChange={(next) => update('window', next)}
      />
    </>
  );
}
