import { randomUUID } from 'node:crypto';
import type { AlertDelivery, AlertEndpointWithSecret } from '../alert-model';
import type { FeedItem } from '../notification-model';
import type { FeedQuery, NotificationStore } from '../notification-ports';

/** A store to check. */
export interface NotificationStoreUnderTest {
  store: NotificationStore;
  close?(): Promise<void>;
}

/**
 * The behaviour every `NotificationStore` owes its callers, run against the in-memory store
 * (`in-memory-notification-store.spec.ts`) and the PostgreSQL store (notification-infra's
 * `postgres-notification-store.int-spec.ts`) alike. The domain's unit tests trust the in-memory store to
 * behave as PostgreSQL does (events handled once, feed order and paging, read state per user, scoping by
 * organization, endpoint and delivery ordering); this suite is what holds the two to one contract, so
 * that a check written for one is never missing from the other. Each check works in an organization of
 * its own, so one store serves the whole suite. (The delivery schedule, `AlertDeliveryQueue`, is a port
 * of its own with no in-memory double, and is not part of this contract.)
 */
export function describeNotificationStoreContract(
  name: string,
  open: () => Promise<NotificationStoreUnderTest>,
): void {
  describe(`NotificationStore contract: ${name}`, () => {
    let subject: NotificationStoreUnderTest;
    let store: NotificationStore;

    beforeAll(async () => {
      subject = await open();
      store = subject.store;
    });

    afterAll(async () => {
      await subject?.close?.();
    });

    const NOW = new Date('2026-03-01T12:00:00.000Z');
    const minutes = (n: number) => new Date(NOW.getTime() + n * 60_000);
    const orgId = () => `org-${randomUUID()}`;
    const userId = () => `user-${randomUUID()}`;

    const item = (org: string, createdAt: Date, overrides: Partial<FeedItem> = {}): FeedItem => ({
      id: randomUUID(),
      orgId: org,
      type: 'device.enrolled',
      message: `enrolled at ${createdAt.toISOString()}`,
      createdAt,
      ...overrides,
    });

    /** Items of `org` created `0..count-1` minutes after NOW, returned oldest first. */
    async function feedOf(org: string, count: number): Promise<FeedItem[]> {
      const items = Array.from({ length: count }, (_, index) => item(org, minutes(index)));
      await store.transaction((repos) => repos.insertFeedItems(items));
      return items;
    }

    const feed = (org: string, user: string, query: Partial<FeedQuery> = {}) =>
      store.read((repos) =>
        repos.listFeed(org, user, { limit: 50, after: null, unreadOnly: false, ...query }),
      );
    const unread = (org: string, user: string) => store.read((repos) => repos.countUnread(org, user));
    const ids = (rows: { id: string }[]) => rows.map((row) => row.id);
    const position = (of: FeedItem) => ({ at: of.createdAt.toISOString(), id: of.id });

    const endpoint = (
      org: string,
      overrides: Partial<AlertEndpointWithSecret> = {},
    ): AlertEndpointWithSecret => ({
      id: randomUUID(),
      orgId: org,
      url: `https://alerts.example.com/${randomUUID()}`,
      description: 'on-call',
      secretSealed: `sealed-${randomUUID()}`,
      previousSecretSealed: null,
      previousSecretExpiresAt: null,
      createdAt: NOW,
      disabledAt: null,
      ...overrides,
    });

    const delivery = (
      of: AlertEndpointWithSecret,
      createdAt: Date,
      overrides: Partial<AlertDelivery> = {},
    ): AlertDelivery => ({
      id: randomUUID(),
      orgId: of.orgId,
      endpointId: of.id,
      eventType: 'alert.threat_detected',
      body: JSON.stringify({ at: createdAt.toISOString() }),
      status: 'pending',
      attempts: 0,
      nextAttemptAt: createdAt,
      createdAt,
      lastAttemptAt: null,
      lastResponseCode: null,
      lastError: null,
      lastDurationMs: null,
      ...overrides,
    });

    const insertEndpoint = (of: AlertEndpointWithSecret) =>
      store.transaction((repos) => repos.insertAlertEndpoint(of));
    const endpoints = (org: string) => store.read((repos) => repos.listAlertEndpoints(org));
    const findEndpoint = (org: string, id: string) =>
      store.transaction((repos) => repos.findAlertEndpoint(org, id));

    describe('the feed', () => {
      it('handles an event once: its id is recorded the first time only, and a feed item id already present is kept as it was', async () => {
        const org = orgId();
        const [first, second] = [randomUUID(), randomUUID()];
        const once = await store.transaction((repos) =>
          repos.recordEventsOnce([
            { id: first, type: 'device.enrolled' },
            { id: second, type: 'member.joined' },
          ]),
        );
        expect(once).toEqual(new Set([first, second]));
        const again = await store.transaction((repos) =>
          repos.recordEventsOnce([
            { id: first, type: 'device.enrolled' },
            { id: randomUUID(), type: 'device.enrolled' },
          ]),
        );
        expect(again.size).toBe(1);
        expect(again.has(first)).toBe(false);

        const original = item(org, NOW, { message: 'the first one' });
        await store.transaction((repos) => repos.insertFeedItems([original]));
        await store.transaction((repos) =>
          repos.insertFeedItems([{ ...original, message: 'a redelivery', createdAt: minutes(5) }]),
        );
        expect(await feed(org, userId())).toEqual([
          { id: original.id, type: 'device.enrolled', message: 'the first one', read: false, createdAt: NOW },
        ]);
      });

      it('keeps nothing of a transaction whose work throws: neither the feed items nor the event ids', async () => {
        const org = orgId();
        const eventId = randomUUID();
        const failure = await store
          .transaction(async (repos) => {
            await repos.recordEventsOnce([{ id: eventId, type: 'device.enrolled' }]);
            await repos.insertFeedItems([item(org, NOW)]);
            throw new Error('changed my mind');
          })
          .catch((error: unknown) => error);
        expect((failure as Error).message).toBe('changed my mind');
        expect(await feed(org, userId())).toEqual([]);
        expect(
          await store.transaction((repos) =>
            repos.recordEventsOnce([{ id: eventId, type: 'device.enrolled' }]),
          ),
        ).toEqual(new Set([eventId]));
      });

      it("lists the organization's items only, newest first (ties by id, descending), paged after a position", async () => {
        const org = orgId();
        const user = userId();
        const [a, b, c] = await feedOf(org, 3);
        // Two items created at the same instant (between b and c): the greater id comes first.
        const [low, high] = [randomUUID(), randomUUID()].sort();
        const tied = [item(org, minutes(1.5), { id: low }), item(org, minutes(1.5), { id: high })];
        await store.transaction((repos) => repos.insertFeedItems([...tied, item(orgId(), minutes(9))]));
        const all = await feed(org, user);
        expect(ids(all)).toEqual([c!.id, high, low, b!.id, a!.id]);
        expect(ids(await feed(org, user, { limit: 2 }))).toEqual([c!.id, high]);
        expect(ids(await feed(org, user, { limit: 2, after: position(tied[1]!) }))).toEqual([low, b!.id]);
        expect(ids(await feed(org, user, { after: position(b!) }))).toEqual([a!.id]);
        expect(await feed(orgId(), user)).toEqual([]);
      });

      it('keeps read state per user: marking an item read (twice) changes only that user’s view and counts', async () => {
        const org = orgId();
        const [reader, other] = [userId(), userId()];
        const [a, b, c] = await feedOf(org, 3);
        expect(await unread(org, reader)).toBe(3);
        await store.transaction(async (repos) => {
          await repos.markRead(reader, b!.id, minutes(10));
          await repos.markRead(reader, b!.id, minutes(11));
        });
        expect(await unread(org, reader)).toBe(2);
        expect(await unread(org, other)).toBe(3);
        expect((await feed(org, reader)).map((row) => row.read)).toEqual([false, true, false]);
        expect(ids(await feed(org, reader, { unreadOnly: true }))).toEqual([c!.id, a!.id]);
        expect(ids(await feed(org, reader, { unreadOnly: true, limit: 1 }))).toEqual([c!.id]);
        expect(ids(await feed(org, other, { unreadOnly: true }))).toEqual([c!.id, b!.id, a!.id]);
      });

      it('finds one item as the user sees it, within its organization only', async () => {
        const org = orgId();
        const user = userId();
        const [own] = await feedOf(org, 1);
        await store.transaction((repos) => repos.markRead(user, own!.id, minutes(1)));
        const find = (inOrg: string, who: string, id: string) =>
          store.read((repos) => repos.findNotification(inOrg, who, id));
        expect(await find(org, user, own!.id)).toEqual({
          id: own!.id,
          type: own!.type,
          message: own!.message,
          read: true,
          createdAt: own!.createdAt,
        });
        expect(await find(org, userId(), own!.id)).toMatchObject({ read: false });
        expect(await find(orgId(), user, own!.id)).toBeNull();
        expect(await find(org, user, randomUUID())).toBeNull();
      });

      it('reads all up to a time for one user in one organization, counting what became read, never moving back', async () => {
        const org = orgId();
        const [user, other] = [userId(), userId()];
        const [a, b, c, d] = await feedOf(org, 4);
        const elsewhere = orgId();
        await feedOf(elsewhere, 2);
        await store.transaction((repos) => repos.markRead(user, a!.id, minutes(10)));
        // b and c become read (created at or before the time); a was read already, d comes after.
        expect(await store.transaction((repos) => repos.markAllReadUntil(org, user, c!.createdAt))).toBe(2);
        expect(ids(await feed(org, user, { unreadOnly: true }))).toEqual([d!.id]);
        expect(await unread(org, user)).toBe(1);
        expect(await unread(org, other)).toBe(4);
        expect(await unread(elsewhere, user)).toBe(2);
        // An earlier time neither counts anything nor makes b or c unread again.
        expect(await store.transaction((repos) => repos.markAllReadUntil(org, user, b!.createdAt))).toBe(0);
        expect(await unread(org, user)).toBe(1);
        // Items created after the watermark are unread.
        await store.transaction((repos) => repos.insertFeedItems([item(org, minutes(20))]));
        expect(await unread(org, user)).toBe(2);
        expect(await store.transaction((repos) => repos.markAllReadUntil(org, user, minutes(30)))).toBe(2);
        expect(await unread(org, user)).toBe(0);
      });
    });

    describe('alert endpoints', () => {
      it('are created once per URL in an organization and listed oldest first, with their secrets', async () => {
        const org = orgId();
        const older = endpoint(org, { createdAt: minutes(-10), description: null });
        const newer = endpoint(org, { createdAt: minutes(0) });
        expect(await insertEndpoint(newer)).toBe(true);
        expect(await insertEndpoint(older)).toBe(true);
        expect(await insertEndpoint(endpoint(org, { url: newer.url }))).toBe(false);
        // Another organization may use the same URL.
        const stranger = endpoint(orgId(), { url: newer.url });
        expect(await insertEndpoint(stranger)).toBe(true);
        expect(await endpoints(org)).toEqual([older, newer]);
        expect(await endpoints(stranger.orgId)).toEqual([stranger]);
        // The store keeps its own copy: changing what was inserted or listed changes nothing stored.
        const [listed] = await endpoints(org);
        listed!.url = 'https://changed.example.com/';
        const inserted = { ...newer };
        newer.description = 'changed by the caller';
        expect(await endpoints(org)).toEqual([older, inserted]);
        expect(await endpoints(orgId())).toEqual([]);
      });

      it('are found, enabled and given a rotated secret only within their organization', async () => {
        const org = orgId();
        const disabled = endpoint(org, { disabledAt: minutes(-5) });
        await insertEndpoint(disabled);
        const other = orgId();
        expect(await findEndpoint(other, disabled.id)).toBeNull();
        expect(await findEndpoint(org, randomUUID())).toBeNull();
        expect(await findEndpoint(org, disabled.id)).toEqual(disabled);

        const rotation = {
          secretSealed: 'sealed-new',
          previousSecretSealed: disabled.secretSealed,
          previousSecretExpiresAt: minutes(24 * 60),
        };
        expect(
          await store.transaction(async (repos) => [
            await repos.enableAlertEndpoint(other, disabled.id),
            await repos.rotateAlertSecret(other, disabled.id, rotation),
          ]),
        ).toEqual([false, false]);
        expect(await findEndpoint(org, disabled.id)).toEqual(disabled);

        expect(
          await store.transaction(async (repos) => [
            await repos.enableAlertEndpoint(org, disabled.id),
            await repos.rotateAlertSecret(org, disabled.id, rotation),
          ]),
        ).toEqual([true, true]);
        expect(await endpoints(org)).toEqual([{ ...disabled, ...rotation, disabledAt: null }]);
      });

      it('are deleted within their organization only, once, and their deliveries with them', async () => {
        const org = orgId();
        const doomed = endpoint(org);
        await insertEndpoint(doomed);
        await store.transaction((repos) => repos.insertAlertDeliveries([delivery(doomed, NOW)]));
        expect(await store.transaction((repos) => repos.deleteAlertEndpoint(orgId(), doomed.id))).toBe(false);
        expect(await endpoints(org)).toEqual([doomed]);
        expect(await store.transaction((repos) => repos.deleteAlertEndpoint(org, doomed.id))).toBe(true);
        expect(await store.transaction((repos) => repos.deleteAlertEndpoint(org, doomed.id))).toBe(false);
        expect(await endpoints(org)).toEqual([]);
        expect(await store.read((repos) => repos.listAlertDeliveries(org, doomed.id, 10))).toBeNull();
        // A new endpoint may take the URL again.
        expect(await insertEndpoint(endpoint(org, { url: doomed.url }))).toBe(true);
      });
    });

    describe('alert deliveries', () => {
      it("are listed per endpoint, newest first, up to the limit; null for an endpoint not the organization's", async () => {
        const org = orgId();
        const own = endpoint(org);
        const sibling = endpoint(org);
        await insertEndpoint(own);
        await insertEndpoint(sibling);
        const [first, second, third] = [
          delivery(own, minutes(0)),
          delivery(own, minutes(1), {
            status: 'delivered',
            attempts: 1,
            nextAttemptAt: null,
            lastAttemptAt: minutes(1),
            lastResponseCode: 204,
            lastDurationMs: 35,
          }),
          delivery(own, minutes(2), { status: 'failed', nextAttemptAt: null, lastError: 'timed out' }),
        ];
        // Inserted out of order: the list follows creation time, not insertion.
        await store.transaction((repos) =>
          repos.insertAlertDeliveries([second, third, delivery(sibling, minutes(3))]),
        );
        await store.transaction((repos) => repos.insertAlertDeliveries([first]));
        const list = (inOrg: string, id: string, limit: number) =>
          store.read((repos) => repos.listAlertDeliveries(inOrg, id, limit));
        expect(await list(org, own.id, 10)).toEqual([third, second, first]);
        expect(await list(org, own.id, 2)).toEqual([third, second]);
        expect(await list(orgId(), own.id, 10)).toBeNull();
        expect(await list(org, randomUUID(), 10)).toBeNull();
      });

      it("give the endpoint's test messages created after a time, and no others", async () => {
        const org = orgId();
        const own = endpoint(org);
        const sibling = endpoint(org);
        await insertEndpoint(own);
        await insertEndpoint(sibling);
        await store.transaction((repos) =>
          repos.insertAlertDeliveries([
            delivery(own, minutes(0), { eventType: 'alert.test' }),
            delivery(own, minutes(1), { eventType: 'alert.test' }),
            delivery(own, minutes(2), { eventType: 'alert.test' }),
            delivery(own, minutes(3)),
            delivery(sibling, minutes(4), { eventType: 'alert.test' }),
          ]),
        );
        const times = async (inOrg: string, since: Date) =>
          (await store.read((repos) => repos.testSendTimes(inOrg, own.id, since)))
            .map((time) => time.getTime())
            .sort((x, y) => x - y);
        expect(await times(org, minutes(0))).toEqual([minutes(1).getTime(), minutes(2).getTime()]);
        expect(await times(org, minutes(-1))).toHaveLength(3);
        expect(await times(orgId(), minutes(-1))).toEqual([]);
      });
    });
  });
}
