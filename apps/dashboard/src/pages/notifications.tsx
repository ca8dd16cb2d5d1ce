import { useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { listNotifications, markAllNotificationsRead, markNotificationRead } from '../api/notifications';
import { keys, useNotificationFeed } from '../api/queries';
import type { Notification } from '../api/types';
import { useApi } from '../auth/auth-context';
import { Page } from '../components/page';
import { Empty, Loading, ProblemMessage, StatusMessage } from '../components/status';
import { RelativeTime } from '../components/time';

const TYPE_LABEL: Record<string, string> = {
  'member.joined': 'Member joined',
  'device.enrolled': 'Device enrolled',
  'device.disabled': 'Device disabled',
  'billing.updated': 'Billing',
  'threat.alert': 'Threat alert',
};

/**
 * /notifications: the organization's feed, newest first, with this user's read state. The newest page
 * is the header's query (polled every 15 s), so new items appear without a reload; older pages load on
 * demand through the Link header's cursor.
 */
export function NotificationsPage() {
  return (
    <Page title="Notifications">
      <Feed />
    </Page>
  );
}

function Feed() {
  const api = useApi();
  const queryClient = useQueryClient();
  const feed = useNotificationFeed();
  const [older, setOlder] = useState<{ items: Notification[]; nextCursor?: string } | undefined>();
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [olderError, setOlderError] = useState<unknown>();
  const [message, setMessage] = useState('');

  const refresh = () => queryClient.invalidateQueries({ queryKey: keys.notifications });
  const markOne = useMutation({
    mutationFn: (item: Notification) => markNotificationRead(api, item.id),
    onSuccess: async (marked) => {
      setOlder(
        (pages) => pages && { ...pages, items: pages.items.map((n) => (n.id === marked.id ? marked : n)) },
      );
      await refresh();
    },
  });
  const markAll = useMutation({
    mutationFn: () => markAllNotificationsRead(api),
    onSuccess: async (count) => {
      setMessage(count === 1 ? '1 notification marked read.' : `${count} notifications marked read.`);
      setOlder((pages) => pages && { ...pages, items: pages.items.map((n) => ({ ...n, read: true })) });
      await refresh();
    },
  });

  if (feed.error) return <ProblemMessage error={feed.error} onRetry={() => void feed.refetch()} />;
  if (!feed.data) return <Loading what="notifications" />;

  const seen = new Set(feed.data.items.map((item) => item.id));
  const items = [...feed.data.items, ...(older?.items.filter((item) => !seen.has(item.id)) ?? [])];
  const nextCursor = older ? older.nextCursor : feed.data.nextCursor;
  const unread = feed.data.unreadCount;

  const loadOlder = async (): Promise<void> => {
    if (!nextCursor) return;
    setLoadingOlder(true);
    setOlderError(undefined);
    try {
      const page = await listNotifications(api, nextCursor);
      setOlder((pages) => ({ items: [...(pages?.items ?? []), ...page.items], nextCursor: page.nextCursor }));
    } catch (error) {
      setOlderError(error);
    } finally {
      setLoadingOlder(false);
    }
  };

  return (
    <>
      <div className="toolbar">
        <p aria-live="polite">{unread === 0 ? 'All caught up: nothing unread.' : `${unread} unread.`}</p>
        <button type="button" onClick={() => markAll.mutate()} disabled={markAll.isPending || unread === 0}>
          Mark all read
        </button>
      </div>
      <StatusMessage>{message}</StatusMessage>
      <ProblemMessage error={markAll.error ?? markOne.error} />
      {items.length === 0 ? (
        <Empty>
          No notifications yet. Enrolled devices, new members, billing events and threat alerts show here.
        </Empty>
      ) : (
        <ul className="feed" aria-label="Notifications, newest first">
          {items.map((item) => (
            <li key={item.id} className={item.read ? 'feed-item' : 'feed-item feed-unread'}>
              <div className="feed-text">
                <p>
                  {!item.read && <span className="tag tag-unread">Unread</span>}{' '}
                  <span className="feed-type">{TYPE_LABEL[item.type] ?? item.type}</span>
                  <span className="visually-hidden">: </span>
                </p>
                <p className="feed-message" id={`notification-${item.id}`}>
                  {item.message}
                </p>
                <p className="muted">
                  <RelativeTime value={item.created_at} />
                </p>
              </div>
              {!item.read && (
                <button
                  type="button"
                  className="button-secondary"
                  aria-describedby={`notification-${item.id}`}
                  onClick={() => markOne.mutate(item)}
                  disabled={markOne.isPending && markOne.variables?.id === item.id}
                >
                  Mark read
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      <ProblemMessage error={olderError} />
      {nextCursor && (
        <button
          type="button"
          className="button-secondary"
          onClick={() => void loadOlder()}
          disabled={loadingOlder}
        >
          {loadingOlder ? 'Loading…' : 'Load older notifications'}
        </button>
      )}
    </>
  );
}
