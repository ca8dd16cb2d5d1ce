import { useQuery, type UseQueryResult } from '@tanstack/react-query';
import { useApi } from '../auth/auth-context';
import { listNotifications, type NotificationPage } from './notifications';
import { getSession } from './session';
import type { Session } from './types';

/** Query keys shared by several pages, so that one request serves them all. */
export const keys = {
  session: ['session'] as const,
  notifications: ['notifications', 'first-page'] as const,
  devices: ['devices'] as const,
  members: ['members'] as const,
  invites: ['invites'] as const,
  invitePreview: ['invite-preview'] as const,
  enrollmentKey: ['enrollment-key'] as const,
  alertEndpoints: ['alert-endpoints'] as const,
  analytics: ['analytics'] as const,
};

/** The notification bell polls every 15 s. */
export const NOTIFICATION_POLL_MS = 15_000;

export function useSessionQuery(refetchInterval?: number | false): UseQueryResult<Session> {
  const api = useApi();
  return useQuery({
    queryKey: keys.session,
    queryFn: ({ signal }) => getSession(api, signal),
    staleTime: 60_000,
    refetchInterval,
  });
}

/** The newest page of the feed and the unread count: the header, overview and feed share it. */
export function useNotificationFeed(): UseQueryResult<NotificationPage> {
  const api = useApi();
  return useQuery({
    queryKey: keys.notifications,
    queryFn: ({ signal }) => listNotifications(api, undefined, signal),
    refetchInterval: NOTIFICATION_POLL_MS,
    staleTime: 5_000,
  });
}
