import { AppError } from '@sts/errors/app-error';
import { NotificationService } from './notification-service';
import { InMemoryNotificationStore, ManualClock } from './test/in-memory-notification-store';

describe('the notification feed of one user', () => {
  let store: InMemoryNotificationStore;
  let clock: ManualClock;
  let service: NotificationService;
  const scope = { orgId: 'org-1', userId: 'u1' };

  beforeEach(() => {
    store = new InMemoryNotificationStore();
    clock = new ManualClock();
    service = new NotificationService(store, clock);
    for (const [id, minutesAgo] of [
      ['n1', 3],
      ['n2', 2],
      ['n3', 1],
    ] as const) {
      store.state.feed.push({
        id,
        orgId: 'org-1',
        type: 'member.joined',
        message: `item ${id}`,
        createdAt: new Date(clock.now().getTime() - minutesAgo * 60_000),
      });
    }
  });

  it('lists read and unread items newest first unless asked for unread ones only, with the unread count', async () => {
    await service.markRead({ ...scope, notificationId: 'n2' });

    const all = await service.list(scope, { limit: 10, after: null });
    expect(all.rows.map((row) => [row.id, row.read])).toEqual([
      ['n3', false],
      ['n2', true],
      ['n1', false],
    ]);
    expect(all.unreadCount).toBe(2);

    const unread = await service.list(scope, { limit: 10, after: null }, true);
    expect(unread.rows.map((row) => row.id)).toEqual(['n3', 'n1']);
  });

  it('asks for one item more than the page, so the caller can tell another page follows', async () => {
    const page = await service.list(scope, { limit: 1, after: null });
    expect(page.rows.map((row) => row.id)).toEqual(['n3', 'n2']);
    expect(page.unreadCount).toBe(3);
  });

  it('marks one item read for this user only, idempotently; an unknown or foreign id is not found', async () => {
    expect(await service.markRead({ ...scope, notificationId: 'n1' })).toMatchObject({
      id: 'n1',
      read: true,
    });
    expect(await service.markRead({ ...scope, notificationId: 'n1' })).toMatchObject({
      id: 'n1',
      read: true,
    });
    expect((await service.list(scope, { limit: 10, after: null })).unreadCount).toBe(2);
    expect((await service.list({ ...scope, userId: 'u2' }, { limit: 10, after: null })).unreadCount).toBe(3);

    const notFound = await service
      .markRead({ orgId: 'org-2', userId: 'u1', notificationId: 'n2' })
      .catch((error: unknown) => error);
    expect(notFound).toBeInstanceOf(AppError);
    expect((notFound as AppError).code).toBe('NOTIFICATION_NOT_FOUND');
  });

  it('marks everything read and says how many became read', async () => {
    await service.markRead({ ...scope, notificationId: 'n1' });
    expect(await service.markAllRead(scope)).toBe(2);
    expect(await service.markAllRead(scope)).toBe(0);
    expect((await service.list(scope, { limit: 10, after: null })).unreadCount).toBe(0);
  });
});
