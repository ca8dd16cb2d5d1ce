import { useState } from 'react';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router';
import { listDevices } from '../api/devices';
import { keys } from '../api/queries';
import type { DeviceStatus } from '../api/types';
import { useApi } from '../auth/auth-context';
import { DeviceActions } from '../components/device-actions';
import { Page } from '../components/page';
import { Empty, Loading, ProblemMessage, StatusMessage } from '../components/status';
import { RelativeTime, Time } from '../components/time';

const PAGE_SIZE = 25;

function isStatus(value: string | null): value is DeviceStatus {
  return value === 'active' || value === 'disabled';
}

/** /devices: the organization's devices, a page at a time (the API's cursor in its Link header). */
export function DevicesPage() {
  return (
    <Page title="Devices" action="devices.read">
      <DeviceList />
    </Page>
  );
}

function DeviceList() {
  const api = useApi();
  const [params, setParams] = useSearchParams();
  const q = params.get('q') ?? '';
  const statusParam = params.get('status');
  const status = isStatus(statusParam) ? statusParam : undefined;
  // Cursors of the pages before the current one, and the current one ('' = first page).
  const [cursors, setCursors] = useState<string[]>(['']);
  const [search, setSearch] = useState(q);
  const [message, setMessage] = useState('');
  const [failure, setFailure] = useState<unknown>();
  const cursor = cursors[cursors.length - 1] || undefined;

  const devices = useQuery({
    queryKey: [...keys.devices, 'list', q, status ?? '', cursor ?? ''],
    queryFn: ({ signal }) =>
      listDevices(api, { q: q || undefined, status, cursor, limit: PAGE_SIZE }, signal),
    placeholderData: keepPreviousData,
  });

  const filter = (name: 'q' | 'status', value: string): void => {
    const next = new URLSearchParams(params);
    if (value) next.set(name, value);
    else next.delete(name);
    setParams(next, { replace: true });
    setCursors(['']);
  };

  return (
    <>
      <form
        className="toolbar"
        role="search"
        aria-label="Devices"
        onSubmit={(event) => {
          event.preventDefault();
          filter('q', search.trim());
        }}
      >
        <div className="field">
          <label htmlFor="device-search">Search by name</label>
          <input
            id="device-search"
            type="search"
            value={search}
            maxLength={255}
            onChange={(event) => setSearch(event.target.value)}
          />
        </div>
        <button type="submit">Search</button>
        <div className="field">
          <label htmlFor="device-status">Status</label>
          <select
            id="device-status"
            value={status ?? ''}
            onChange={(event) => filter('status', event.target.value)}
          >
            <option value="">All</option>
            <option value="active">Active</option>
            <option value="disabled">Disabled</option>
          </select>
        </div>
      </form>
      <StatusMessage>{message}</StatusMessage>
      <ProblemMessage error={failure} />
      {devices.error ? (
        <ProblemMessage error={devices.error} onRetry={() => void devices.refetch()} />
      ) : !devices.data ? (
        <Loading what="devices" />
      ) : devices.data.items.length === 0 ? (
        <Empty>
          {q || status
            ? 'No device matches this search.'
            : 'No device is enrolled yet. Enroll one from the Enrollment page.'}
        </Empty>
      ) : (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <caption className="visually-hidden">Devices{q ? ` matching “${q}”` : ''}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Last seen</th>
                <th scope="col">Enrolled</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {devices.data.items.map((device) => (
                <tr key={device.id}>
                  <th scope="row">
                    <Link to={`/devices/${encodeURIComponent(device.id)}`} state={{ device }}>
                      {device.name}
                    </Link>
                  </th>
                  <td>
                    <span className={`tag tag-${device.status}`}>
                      {device.status === 'active' ? 'Active' : 'Disabled'}
                    </span>
                  </td>
                  <td>
                    <RelativeTime value={device.last_seen_at} />
                  </td>
                  <td>
                    <Time value={device.enrolled_at} />
                  </td>
                  <td>
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
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <nav className="pager" aria-label="Device pages">
        <button
          type="button"
          className="button-secondary"
          disabled={cursors.length <= 1}
          onClick={() => setCursors((list) => list.slice(0, -1))}
        >
          Previous page
        </button>
        <span>Page {cursors.length}</span>
        <button
          type="button"
          className="button-secondary"
          disabled={!devices.data?.nextCursor || devices.isPlaceholderData}
          onClick={() => {
            const next = devices.data?.nextCursor;
            if (next) setCursors((list) => [...list, next]);
          }}
        >
          Next page
        </button>
      </nav>
    </>
  );
}
