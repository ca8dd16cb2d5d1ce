import type { ApiFetch } from './api-fetch';
import { nextCursor } from './link-header';
import type { Device, DeviceStatus, Page } from './types';

export interface DeviceQuery {
  readonly q?: string;
  readonly status?: DeviceStatus;
  readonly cursor?: string;
  readonly limit?: number;
}

export async function listDevices(
  api: ApiFetch,
  query: DeviceQuery,
  signal?: AbortSignal,
): Promise<Page<Device>> {
  const response = await api<Device[]>('/api/devices', {
    query: { q: query.q, status: query.status, cursor: query.cursor, limit: query.limit },
    signal,
  });
  return { items: response.data, nextCursor: nextCursor(response.headers.get('link')) };
}

/**
 * One device. The API has no GET /api/devices/:id, so this pages through the list (200 a page) until
 * it meets the id; undefined when it is not the organization's.
 */
export async function findDevice(
  api: ApiFetch,
  id: string,
  signal?: AbortSignal,
): Promise<Device | undefined> {
  let cursor: string | undefined;
  for (let pages = 0; pages < 50; pages += 1) {
    const page = await listDevices(api, { limit: 200, cursor }, signal);
    const found = page.items.find((device) => device.id === id);
    if (found) return found;
    if (!page.nextCursor) return undefined;
    cursor = page.nextCursor;
  }
  return undefined;
}

export async function setDeviceStatus(
  api: ApiFetch,
  id: string,
  action: 'disable' | 'enable',
): Promise<void> {
  await api(`/api/devices/${encodeURIComponent(id)}/${action}`, { method: 'POST' });
}

export async function deleteDevice(api: ApiFetch, id: string): Promise<void> {
  await api(`/api/devices/${encodeURIComponent(id)}`, { method: 'DELETE' });
}

export async function allowReEnrollment(
  api: ApiFetch,
  id: string,
): Promise<{ device_id: string; allowed_until: string }> {
  return (
    await api<{ device_id: string; allowed_until: string }>(
      `/api/devices/${encodeURIComponent(id)}/re-enrollment`,
      { method: 'POST' },
    )
  ).data;
}
