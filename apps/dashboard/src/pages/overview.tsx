import { useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router';
import { listDevices } from '../api/devices';
import { keys, useNotificationFeed } from '../api/queries';
import { useApi } from '../auth/auth-context';
import { useCan, useSession } from '../auth/session-context';
import { AnalyticsPanel, isWindow } from '../components/analytics-panel';
import { Page } from '../components/page';
import { Empty, Loading, ProblemMessage } from '../components/status';
import { RelativeTime } from '../components/time';

/**
 * Overview: three requests draw it: GET /api/session and GET /api/notifications (both shared with the
 * header) and GET /api/analytics/overview (the figures and a chart per metric). The device list loads
 * only when the device selector is opened.
 */
export function OverviewPage() {
  const session = useSession();
  const can = useCan();
  const [params, setParams] = useSearchParams();
  const windowParam = params.get('window');
  const window = isWindow(windowParam) ? windowParam : '24h';
  const deviceId = params.get('device') ?? undefined;
  const update = (name: string, value: string | undefined): void => {
    const next = new URLSearchParams(params);
    if (value) next.set(name, value);
    else next.delete(name);
    setParams(next, { replace: true });
  };

  return (
    <Page
      title="Overview"
      intro={`${session.org.name}: protection of your devices against harmful web addresses.`}
    >
      {can('analytics.read') ? (
        <>
          <DeviceScope deviceId={deviceId} onChange={(id) => update('device', id)} />
          <AnalyticsPanel
            window={window}
            deviceId={deviceId}
            onWindowChange={(next) => update('window', next === '24h' ? undefined : next)}
          />
        </>
      ) : (
        <p className="message message-info">
          Analytics are for administrators and analysts. Your notifications are below and on the Notifications
          page.
        </p>
      )}
      <ThreatAlerts />
    </Page>
  );
}

/** Scopes the analytics to one device (the API's device_id); the device list loads on demand. */
function DeviceScope({
  deviceId,
  onChange,
}: {
  deviceId?: string;
  onChange: (id: string | undefined) => void;
}) {
  const api = useApi();
  const [open, setOpen] = useState(false);
  const devices = useQuery({
    queryKey: [...keys.devices, 'selector'],
    queryFn: ({ signal }) => listDevices(api, { limit: 200 }, signal),
    enabled: open,
  });
  const scopedName = devices.data?.items.find((device) => device.id === deviceId)?.name;

  if (!open) {
    return (
      <div className="scope">
        <p>
          {deviceId ? (
            <>
              Showing one device{scopedName ? `: ${scopedName}` : ''}.{' '}
              <button type="button" className="button-link" onClick={() => onChange(undefined)}>
                Show all devices
              </button>
            </>
          ) : (
            'Showing all active devices of the organization.'
          )}
        </p>
        <button type="button" className="button-secondary" onClick={() => setOpen(true)}>
          Choose a device
        </button>
      </div>
    );
  }
  return (
    <div className="scope">
      <label htmlFor="device-scope">Device</label>
      {devices.error ? (
        <ProblemMessage error={devices.error} onRetry={() => void devices.refetch()} />
      ) : !devices.data ? (
        <Loading what="devices" />
      ) : (
        <select
          id="device-scope"
          value={deviceId ?? ''}
          onChange={(event) => onChange(event.target.value || undefined)}
        >
          <option value="">All devices</option>
          {devices.data.items.map((device) => (
            <option key={device.id} value={device.id}>
              {device.name} ({device.status})
            </option>
          ))}
        </select>
      )}
      {devices.data?.nextCursor && (
        <p className="hint">The first 200 devices are listed; find others on the Devices page.</p>
      )}
    </div>
  );
}

/** The latest threat alerts, from the notification feed the header loads anyway (no extra request). */
function ThreatAlerts() {
  const feed = useNotificationFeed();
  const threats = feed.data?.items.filter((item) => item.type === 'threat.alert').slice(0, 5) ?? [];
  return (
    <section aria-labelledby="threats-heading" className="card">
      <h2 id="threats-heading">Recent threat alerts</h2>
      {feed.error ? (
        <ProblemMessage error={feed.error} onRetry={() => void feed.refetch()} />
      ) : !feed.data ? (
        <Loading what="threat alerts" />
      ) : threats.length === 0 ? (
        <Empty>No threat alerts among the latest notifications.</Empty>
      ) : (
        <ul className="feed">
          {threats.map((item) => (
            <li key={item.id} className={item.read ? 'feed-item' : 'feed-item feed-unread'}>
              <span className="feed-message">
                {!item.read && <span className="tag tag-unread">Unread</span>} {item.message}
              </span>
              <span className="muted">
                <RelativeTime value={item.created_at} />
              </span>
            </li>
          ))}
        </ul>
      )}
      <p>
        <Link to="/notifications">Open the notification feed</Link>
      </p>
    </section>
  );
}
