import type { ApiFetch } from './api-fetch';
import type { AnalyticsOverview, AnalyticsWindow } from './types';

/** The summary and every metric's series of a window in one request (GET /api/analytics/overview). */
export async function getOverview(
  api: ApiFetch,
  window: AnalyticsWindow,
  deviceId?: string,
  signal?: AbortSignal,
): Promise<AnalyticsOverview> {
  return (
    await api<AnalyticsOverview>('/api/analytics/overview', {
      query: { window, device_id: deviceId },
      signal,
    })
  ).data;
}
