import type { ApiFetch } from './api-fetch';
import { nextCursor } from './link-header';
import type { Notification, Page } from './types';

export interface NotificationPage extends Page<Notification> {
  /** From the X-Unread-Count header: unread notifications of the whole feed. */
  readonly unreadCount: number;
}

export const FEED_PAGE_SIZE = 50;

export async function listNotifications(
  api: ApiFetch,
  cursor?: string,
  signal?: AbortSignal,
): Promise<NotificationPage> {
  const response = await api<Notification[]>('/api/notifications', {
    query: { limit: FEED_PAGE_SIZE, cursor },
    signal,
  });
  const header = response.headers.get('x-unread-count');
  const unread = header === null ? Number.NaN : Number(header);
  return {
    items: response.data,
    nextCursor: nextCursor(response.headers.get('link')),
    unreadCount: Number.isFinite(unread) ? unread : response.data.filter((item) => !item.read).length,
  };
}

export async function markNotificationRead(api: ApiFetch, id: string): Promise<Notification> {
  return (await api<Notification>(`/api/notifications/${encodeURIComponent(id)}/read`, { method: 'POST' }))
    .data;
}

export async function markAllNotificationsRead(api: ApiFetch): Promise<number> {
  return (await api<{ marked: number }>('/api/notifications/read-all', { method: 'POST' })).data.marked;
}
