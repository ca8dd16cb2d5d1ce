import type { ApiFetch } from './api-fetch';
import type { AlertDelivery, AlertEndpoint, CreatedAlertEndpoint, RotatedAlertEndpoint } from './types';

const base = '/api/org-alert-endpoints';
const one = (id: string): string => `${base}/${encodeURIComponent(id)}`;

export async function listAlertEndpoints(api: ApiFetch, signal?: AbortSignal): Promise<AlertEndpoint[]> {
  return (await api<AlertEndpoint[]>(base, { signal })).data;
}

export async function createAlertEndpoint(
  api: ApiFetch,
  endpoint: { url: string; description?: string },
): Promise<CreatedAlertEndpoint> {
  return (await api<CreatedAlertEndpoint>(base, { method: 'POST', body: endpoint })).data;
}

export async function deleteAlertEndpoint(api: ApiFetch, id: string): Promise<void> {
  await api(one(id), { method: 'DELETE' });
}

export async function sendTestAlert(api: ApiFetch, id: string): Promise<AlertDelivery> {
  return (await api<AlertDelivery>(`${one(id)}/test`, { method: 'POST' })).data;
}

export async function enableAlertEndpoint(api: ApiFetch, id: string): Promise<AlertEndpoint> {
  return (await api<AlertEndpoint>(`${one(id)}/enable`, { method: 'POST' })).data;
}

export async function rotateAlertSecret(api: ApiFetch, id: string): Promise<RotatedAlertEndpoint> {
  return (await api<RotatedAlertEndpoint>(`${one(id)}/rotate-secret`, { method: 'POST' })).data;
}

export async function listAlertDeliveries(
  api: ApiFetch,
  id: string,
  signal?: AbortSignal,
): Promise<AlertDelivery[]> {
  return (await api<AlertDelivery[]>(`${one(id)}/deliveries`, { query: { limit: 50 }, signal })).data;
}
