import type { ApiFetch } from './api-fetch';
import { ApiError } from './problem';
import type { EnrollmentCode, EnrollmentKey } from './types';

/** The current key, or null when the organization has none (404). */
export async function getEnrollmentKey(api: ApiFetch, signal?: AbortSignal): Promise<EnrollmentKey | null> {
  try {
    return (await api<EnrollmentKey>('/api/enrollment-key', { signal })).data;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

/** Creates the key, or rotates it (the previous one stops working at once). */
export async function rotateEnrollmentKey(api: ApiFetch): Promise<EnrollmentKey> {
  return (await api<EnrollmentKey>('/api/enrollment-key', { method: 'POST' })).data;
}

export async function revokeEnrollmentKey(api: ApiFetch): Promise<void> {
  await api('/api/enrollment-key', { method: 'DELETE' });
}

export async function createEnrollmentCodes(api: ApiFetch, count: number): Promise<EnrollmentCode[]> {
  return (
    await api<{ codes: EnrollmentCode[] }>('/api/enrollment-codes', { method: 'POST', body: { count } })
  ).data.codes;
}

export async function emailEnrollmentCode(
  api: ApiFetch,
  email: string,
): Promise<{ email: string; expires_at: string }> {
  return (
    await api<{ email: string; expires_at: string }>('/api/enrollment-codes/email', {
      method: 'POST',
      body: { email },
    })
  ).data;
}
