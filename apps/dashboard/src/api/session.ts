import type { ApiFetch } from './api-fetch';
import type { Session } from './types';

export async function getSession(api: ApiFetch, signal?: AbortSignal): Promise<Session> {
  return (await api<Session>('/api/session', { signal })).data;
}
