import { randomUUID } from 'node:crypto';
import { AppError } from '@sts/errors/app-error';
import { encodeCursor } from '@sts/pagination/keyset-cursor';
import { Metadata } from '@grpc/grpc-js';
import { isReadBy, type FeedItem } from '@sts/notification-domain/notification-model';
import { AlertService } from '@sts/notification-domain/alert-service';
import { NotificationService } from '@sts/notification-domain/notification-service';
import {
  InMemoryNotificationStore,
  ManualClock,
} from '@sts/notification-domain/test/in-memory-notification-store';
import { notificationGrpcHandlers } from './notification-grpc-handlers';

/**
 * The feed through its gRPC handlers (validation and paging live there, docs/conventions.md) over
 * the domain service and the in-memory store.
 */
function feedOver(store: InMemoryNotificationStore, clock: ManualClock) {
  const handlers = notificationGrpcHandlers(
    new NotificationService(store, clock),
    new AlertService(store, clock, { sealingKey: Buffer.alloc(32), publicAppUrl: 'https://app.example' }),
  );
  const context = { metadata: new Metadata(), requestId: 'test' };
  return {
    list: (input: { orgId: string; userId: string; limit?: number; cursor?: string; unreadOnly?: boolean }) =>
      handlers.listNotifications(
        {
          orgId: input.orgId,
          userId: input.userId,
          limit: input.limit ?? 0,
          cursor: input.cursor ?? '',
          unreadOnly: input.unreadOnly ?? false,
        },
        context,
      ),
    markRead: async (input: { orgId: string; userId: string; notificationId: string }) =>
      (await handlers.markRead(input, context)).notification!,
    markAllRead: async (input: { orgId: string; userId: string }) =>
      (await handlers.markAllRead(input, context)).marked,
  };
}

const ORG = 'org-1';
const OTHER_ORG = 'org-2';
const ADA = 'user-ada';
const BOB = 'user-bob';

describe('notification feed', () => {
  let store: InMemoryNotificationStore;
  let clock: ManualClock;
  let service: ReturnType<typeof feedOver>;

  const addItem = (orgId = ORG, message = 'something happened'): FeedItem => {
    clock.advance(1_000);
    const item: FeedItem = {
      id: randomUUID(),
      orgId,
      type: 'member.joined',
      message,
      createdAt: clock.now(),
    };
    store.state.feed.push(item);
    return item;
  };

  beforeEach(() => {
    store = new InMemoryNotificationStore();
    clock = new ManualClock();
    service = feedOver(store, clock);
  });

  it('lists the organization feed newest first with the unread count', async () => {
    const first = addItem(ORG, 'first');
    const second = addItem(ORG, 'second');
    addItem(OTHER_ORG, 'elsewhere');

    const page = await service.list({ orgId: ORG, userId: ADA });

    expect(page.notifications.map((n) => n.id)).toEqual([second.id, first.id]);
    expect(page.notifications.every((n) => !n.read)).toBe(true);
    expect(page.unreadCount).toBe(2);
    expect(page.nextCursor).toBe('');
  });

  it('pages with an opaque cursor without gaps or repeats', async () => {
    const items = Array.from({ length: 5 }, (_, i) => addItem(ORG, `item ${i}`)).reverse();

    const first = await service.list({ orgId: ORG, userId: ADA, limit: 2 });
    const second = await service.list({ orgId: ORG, userId: ADA, limit: 2, cursor: first.nextCursor });
    const third = await service.list({ orgId: ORG, userId: ADA, limit: 2, cursor: second.nextCursor });

    expect(
      [...first.notifications, ...second.notifications, ...third.notifications].map((n) => n.id),
    ).toEqual(items.map((i) => i.id));
    expect(first.nextCursor).not.toBe('');
    expect(third.nextCursor).toBe('');
    expect(third.unreadCount).toBe(5);
  });

  it('keeps read state per user', async () => {
    const item = addItem();

    const marked = await service.markRead({ orgId: ORG, userId: ADA, notificationId: item.id });

    expect(marked).toMatchObject({ id: item.id, read: true, message: item.message });
    expect((await service.list({ orgId: ORG, userId: ADA })).notifications[0]?.read).toBe(true);
    expect((await service.list({ orgId: ORG, userId: ADA })).unreadCount).toBe(0);
    expect((await service.list({ orgId: ORG, userId: BOB })).notifications[0]?.read).toBe(false);
    expect((await service.list({ orgId: ORG, userId: BOB })).unreadCount).toBe(1);
  });

  it('marks read idempotently', async () => {
    const item = addItem();
    await service.markRead({ orgId: ORG, userId: ADA, notificationId: item.id });
    await expect(
      service.markRead({ orgId: ORG, userId: ADA, notificationId: item.id }),
    ).resolves.toMatchObject({ read: true });
  });

  it('does not reveal or mark notifications of another organization', async () => {
    const foreign = addItem(OTHER_ORG);

    const error = await service
      .markRead({ orgId: ORG, userId: ADA, notificationId: foreign.id })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('NOTIFICATION_NOT_FOUND');
    expect(store.state.reads.size).toBe(0);
    await expect(
      service.markRead({ orgId: ORG, userId: ADA, notificationId: randomUUID() }),
    ).rejects.toMatchObject({
      code: 'NOTIFICATION_NOT_FOUND',
    });
    await expect(
      service.markRead({ orgId: ORG, userId: ADA, notificationId: 'not-a-uuid' }),
    ).rejects.toMatchObject({
      code: 'NOTIFICATION_NOT_FOUND',
    });
  });

  it('marks all read with one watermark; later items are unread; repeated calls mark nothing', async () => {
    const a = addItem();
    addItem();
    addItem();
    await service.markRead({ orgId: ORG, userId: ADA, notificationId: a.id });

    expect(await service.markAllRead({ orgId: ORG, userId: ADA })).toBe(2);
    expect(await service.markAllRead({ orgId: ORG, userId: ADA })).toBe(0);

    const later = addItem();
    const page = await service.list({ orgId: ORG, userId: ADA });
    expect(page.unreadCount).toBe(1);
    expect(page.notifications.find((n) => n.id === later.id)?.read).toBe(false);
    expect(page.notifications.filter((n) => n.read)).toHaveLength(3);
    // Bob's state is his own.
    expect((await service.list({ orgId: ORG, userId: BOB })).unreadCount).toBe(4);
  });

  it('filters to unread items', async () => {
    const a = addItem();
    const b = addItem();
    await service.markRead({ orgId: ORG, userId: ADA, notificationId: b.id });

    const page = await service.list({ orgId: ORG, userId: ADA, unreadOnly: true });

    expect(page.notifications.map((n) => n.id)).toEqual([a.id]);
    expect(page.unreadCount).toBe(1);
  });

  it('validates scope, limit and cursor', async () => {
    await expect(service.list({ orgId: '', userId: ADA })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    await expect(service.list({ orgId: ORG, userId: ' ' })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    await expect(service.markAllRead({ orgId: ORG, userId: '' })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    await expect(service.list({ orgId: ORG, userId: ADA, limit: 201 })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    await expect(service.list({ orgId: ORG, userId: ADA, cursor: 'garbage' })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    const notUuid = encodeCursor({ at: new Date().toISOString(), id: "x' or 1=1" });
    await expect(service.list({ orgId: ORG, userId: ADA, cursor: notUuid })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
  });

  it('defaults the page size to 50', async () => {
    for (let i = 0; i < 51; i++) addItem();
    const page = await service.list({ orgId: ORG, userId: ADA, limit: 0 });
    expect(page.notifications).toHaveLength(50);
    expect(page.nextCursor).not.toBe('');
  });
});

describe('read rule', () => {
  const item = { id: 'n1', createdAt: new Date('2026-01-01T00:00:01Z') };

  it('counts individual reads and the read-all watermark (inclusive)', () => {
    expect(isReadBy(item, { readAllBefore: null, readIds: new Set() })).toBe(false);
    expect(isReadBy(item, { readAllBefore: null, readIds: new Set(['n1']) })).toBe(true);
    expect(isReadBy(item, { readAllBefore: new Date('2026-01-01T00:00:01Z'), readIds: new Set() })).toBe(
      true,
    );
    expect(isReadBy(item, { readAllBefore: new Date('2026-01-01T00:00:00.999Z'), readIds: new Set() })).toBe(
      false,
    );
  });
});
