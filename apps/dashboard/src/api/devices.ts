import type { ApiFetch } from './api-fetch';
import { nextCursor } from './link-header';
import { ApiError } from './problem';
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
 * One device of the organization; null when it has none with this id (404). Null, not undefined: a query
 * may not resolve to undefined (TanStack Query fails it with "data is undefined").
 */
export async function getDevice(api: ApiFetch, id: string, signal?: AbortSignal): Promise<Device | null> {
  try {
    return (await api<Device>(`/api/devices/${encodeURIComponent(id)}`, { signal })).data;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
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
