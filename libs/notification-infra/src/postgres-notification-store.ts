import { randomUUID } from 'node:crypto';
import { LockMode, raw, type MikroORM } from '@mikro-orm/postgresql';
import { recordEventsOnce } from '@sts/db/processed-events';
import { UnitOfWork, type WorkScope } from '@sts/db/unit-of-work';
import { isUuid } from '@sts/vocabulary/identifiers';
import type {
  EmailLogEntry,
  FeedItem,
  Notification,
  NotificationType,
} from '@sts/notification-domain/notification-model';
import type { AlertDelivery, AlertEndpointWithSecret } from '@sts/notification-domain/alert-model';
import type {
  AlertDeliveryQueue,
  AttemptRecord,
  ClaimedDelivery,
  FeedQuery,
  NotificationRepositories,
  NotificationStore,
} from '@sts/notification-domain/notification-ports';
import {
  AlertDeliveryEntity,
  AlertEndpointEntity,
  EmailLogEntity,
  FeedItemEntity,
  NotificationReadEntity,
  ReadWatermarkEntity,
  type AlertDeliveryRow,
  type AlertEndpointRow,
} from './notification-entities';

/** A feed item as one user sees it; node-postgres hands MikroORM's timestamps over as text. */
interface NotificationViewRow {
  id: string;
  type: NotificationType;
  message: string;
  created_at: string;
  read: boolean;
}

/**
 * The feed as one user sees it: each item with the user's read state joined in, by the domain's rule
 * (`isReadBy`: marked individually, or created at or before the read-all watermark). Parameters, in
 * order: user id (watermark), user id (reads). Raw SQL, as are the three statements that use it: two
 * left joins on keys that are not the items' own and the rule as SQL, which the QueryBuilder would carry
 * only as SQL fragments.
 */
const FEED_VIEW = `select f.id, f.type, f.message, f.created_at,
    (r.notification_id is not null or f.created_at <= coalesce(w.read_all_before, '-infinity'::timestamptz)) as read
  from notification.feed_items f
  left join notification.read_watermarks w on w.org_id = f.org_id and w.user_id = ?
  left join notification.notification_reads r on r.notification_id = f.id and r.user_id = ?`;

const UNREAD = `r.notification_id is null and f.created_at > coalesce(w.read_all_before, '-infinity'::timestamptz)`;

/** NotificationStore over PostgreSQL (schema `notification`); it publishes no events. */
export class PostgresNotificationStore implements NotificationStore {
  private readonly unit: UnitOfWork;

  constructor(orm: MikroORM) {
    this.unit = new UnitOfWork(orm);
  }

  transaction<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T> {
    return this.unit.transaction((scope) => work(new PostgresNotificationRepositories(scope)));
  }

  read<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T> {
    return this.unit.autocommit((scope) => work(new PostgresNotificationRepositories(scope)));
  }
}

class PostgresNotificationRepositories implements NotificationRepositories {
  constructor(private readonly scope: WorkScope) {}

  recordEventsOnce(events: readonly { id: string; type: string }[]): Promise<Set<string>> {
    return recordEventsOnce(this.scope.em, events);
  }

  async insertFeedItems(items: readonly FeedItem[]): Promise<void> {
    if (items.length === 0) return;
    await this.scope.em
      .createQueryBuilder(FeedItemEntity)
      .insert(items.map(feedItemOf))
      .onConflict('id')
      .ignore()
      .execute('run');
  }

  async listFeed(orgId: string, userId: string, query: FeedQuery): Promise<Notification[]> {
    const after = query.after && isUuid(query.after.id) ? query.after : null;
    const rows = await this.scope.sql.all<NotificationViewRow>(
      `${FEED_VIEW}
       where f.org_id = ?
         ${after ? 'and (f.created_at, f.id) < (?::timestamptz, ?::uuid)' : ''}
         ${query.unreadOnly ? `and ${UNREAD}` : ''}
       order by f.created_at desc, f.id desc
       limit ?`,
      [userId, userId, orgId, ...(after ? [after.at, after.id] : []), query.limit],
    );
    return rows.map(toNotification);
  }

  async countUnread(orgId: string, userId: string): Promise<number> {
    const row = await this.scope.sql.one<{ count: number }>(
      `select count(*)::int as count
       from notification.feed_items f
       left join notification.read_watermarks w on w.org_id = f.org_id and w.user_id = ?
       left join notification.notification_reads r on r.notification_id = f.id and r.user_id = ?
       where f.org_id = ? and ${UNREAD}`,
      [userId, userId, orgId],
    );
    return row?.count ?? 0;
  }

  async findNotification(
    orgId: string,
    userId: string,
    notificationId: string,
  ): Promise<Notification | null> {
    if (!isUuid(notificationId)) return null;
    const row = await this.scope.sql.one<NotificationViewRow>(
      `${FEED_VIEW} where f.id = ? and f.org_id = ?`,
      [userId, userId, notificationId, orgId],
    );
    return row ? toNotification(row) : null;
  }

  async markRead(userId: string, notificationId: string, at: Date): Promise<void> {
    await this.scope.em
      .createQueryBuilder(NotificationReadEntity)
      .insert({ notificationId, userId, readAt: at })
      .onConflict(['notificationId', 'userId'])
      .ignore()
      .execute('run');
  }

  async markAllReadUntil(orgId: string, userId: string, at: Date): Promise<number> {
    const em = this.scope.em;
    // Lock the user's watermark row first (creating it if needed), so that concurrent read-alls of
    // the same user count each item once.
    await em
      .createQueryBuilder(ReadWatermarkEntity)
      .insert({ orgId, userId, readAllBefore: null })
      .onConflict(['orgId', 'userId'])
      .ignore()
      .execute('run');
    const watermark = await em.findOne(
      ReadWatermarkEntity,
      { orgId, userId },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    const row = await this.scope.sql.one<{ count: number }>(
      `select count(*)::int as count
       from notification.feed_items f
       join notification.read_watermarks w on w.org_id = f.org_id and w.user_id = ?
       left join notification.notification_reads r on r.notification_id = f.id and r.user_id = ?
       where f.org_id = ? and f.created_at <= ? and ${UNREAD}`,
      [userId, userId, orgId, at],
    );
    const before = watermark?.readAllBefore ?? null;
    await em.nativeUpdate(
      ReadWatermarkEntity,
      { orgId, userId },
      { readAllBefore: before && before > at ? before : at, updatedAt: raw('now()') },
    );
    return row?.count ?? 0;
  }

  async insertEmailLog(entry: EmailLogEntry): Promise<void> {
    await this.scope.em.insert(EmailLogEntity, {
      id: randomUUID(),
      eventId: entry.eventId,
      recipient: entry.recipient,
      subject: entry.subject,
      template: entry.template,
      sentAt: entry.sentAt,
    });
  }

  async listAlertEndpoints(orgId: string): Promise<AlertEndpointWithSecret[]> {
    const rows = await this.scope.em.find(
      AlertEndpointEntity,
      { orgId },
      { orderBy: { createdAt: 'asc', id: 'asc' } },
    );
    return rows.map(toAlertEndpoint);
  }

  async findAlertEndpoint(orgId: string, endpointId: string): Promise<AlertEndpointWithSecret | null> {
    if (!isUuid(endpointId)) return null;
    const row = await this.scope.em.findOne(
      AlertEndpointEntity,
      { id: endpointId, orgId },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    return row ? toAlertEndpoint(row) : null;
  }

  async insertAlertEndpoint(endpoint: AlertEndpointWithSecret): Promise<boolean> {
    const inserted = await this.scope.em
      .createQueryBuilder(AlertEndpointEntity)
      .insert(toAlertEndpoint(endpoint))
      .onConflict(['orgId', 'url'])
      .ignore()
      .execute<{ affectedRows: number }>('run');
    return inserted.affectedRows === 1;
  }

  async deleteAlertEndpoint(orgId: string, endpointId: string): Promise<boolean> {
    if (!isUuid(endpointId)) return false;
    return (await this.scope.em.nativeDelete(AlertEndpointEntity, { id: endpointId, orgId })) === 1;
  }

  async enableAlertEndpoint(orgId: string, endpointId: string): Promise<boolean> {
    if (!isUuid(endpointId)) return false;
    const changed = await this.scope.em.nativeUpdate(
      AlertEndpointEntity,
      { id: endpointId, orgId },
      { disabledAt: null, failingSince: null },
    );
    return changed === 1;
  }

  async rotateAlertSecret(
    orgId: string,
    endpointId: string,
    rotation: { secretSealed: string; previousSecretSealed: string; previousSecretExpiresAt: Date },
  ): Promise<boolean> {
    if (!isUuid(endpointId)) return false;
    const changed = await this.scope.em.nativeUpdate(
      AlertEndpointEntity,
      { id: endpointId, orgId },
      {
        secretSealed: rotation.secretSealed,
        previousSecretSealed: rotation.previousSecretSealed,
        previousSecretExpiresAt: rotation.previousSecretExpiresAt,
      },
    );
    return changed === 1;
  }

  async insertAlertDeliveries(deliveries: readonly AlertDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await this.scope.em.insertMany<AlertDeliveryRow>(AlertDeliveryEntity, deliveries.map(toAlertDelivery));
  }

  async testSendTimes(orgId: string, endpointId: string, since: Date): Promise<Date[]> {
    if (!isUuid(endpointId)) return [];
    const rows = await this.scope.em.find(
      AlertDeliveryEntity,
      { orgId, endpointId, eventType: 'alert.test', createdAt: { $gt: since } },
      { fields: ['createdAt'] },
    );
    return rows.map((row) => row.createdAt);
  }

  async listAlertDeliveries(
    orgId: string,
    endpointId: string,
    limit: number,
  ): Promise<AlertDelivery[] | null> {
    if (!isUuid(endpointId)) return null;
    const endpoint = await this.scope.em.findOne(
      AlertEndpointEntity,
      { id: endpointId, orgId },
      { fields: ['id'] },
    );
    if (!endpoint) return null;
    const rows = await this.scope.em.find(
      AlertDeliveryEntity,
      { endpointId, orgId },
      { orderBy: { createdAt: 'desc', id: 'desc' }, limit },
    );
    return rows.map(toAlertDelivery);
  }
}

/** How many attempts one endpoint may have in flight at once, so that a slow receiver keeps the others' slots free. */
const IN_FLIGHT_PER_ENDPOINT = 4;

/** The durable schedule of alert deliveries over PostgreSQL (schema `notification`). */
export class PostgresAlertDeliveryQueue implements AlertDeliveryQueue {
  private readonly unit: UnitOfWork;

  constructor(orm: MikroORM) {
    this.unit = new UnitOfWork(orm);
  }

  claimDue(limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    // Raw: `for update skip locked` with a per-endpoint bound (a window over the due rows) in one
    // statement, which the ORM does not express. Times are the database's (one clock for every process).
    // Each endpoint gets at most its free slots (IN_FLIGHT_PER_ENDPOINT minus its leased rows), counted
    // per endpoint within this claim too.
    return this.unit.autocommit(async ({ sql }) => {
      const rows = await sql.all<ClaimedRow>(
        `with candidates as (
           select d.id, d.endpoint_id, d.next_attempt_at,
                  row_number() over (partition by d.endpoint_id order by d.next_attempt_at, d.id) as rank
           from notification.alert_deliveries d
           where d.status = 'pending' and d.next_attempt_at <= now()
             and (d.locked_until is null or d.locked_until <= now())
             -- A disabled endpoint gets test messages only (how an admin checks it before enabling it).
             and (d.event_type = 'alert.test' or not exists (select 1 from notification.alert_endpoints off
                  where off.id = d.endpoint_id and off.disabled_at is not null))
         ),
         busy as (
           select endpoint_id, count(*) as leased from notification.alert_deliveries
           where status = 'pending' and locked_until > now() group by endpoint_id
         ),
         chosen as (
           select c.id from candidates c left join busy b on b.endpoint_id = c.endpoint_id
           where c.rank <= ? - coalesce(b.leased, 0)
           order by c.next_attempt_at
           limit ?
         ),
         due as (
           select d.id from notification.alert_deliveries d join chosen on chosen.id = d.id
           where d.status = 'pending' and (d.locked_until is null or d.locked_until <= now())
           for update of d skip locked
         )
         update notification.alert_deliveries d
         set locked_until = now() + ? * interval '1 millisecond', lease_token = gen_random_uuid()
         from due, notification.alert_endpoints e
         where d.id = due.id and e.id = d.endpoint_id
         returning d.*, e.url as endpoint_url, e.secret_sealed as endpoint_secret_sealed,
           e.previous_secret_sealed as endpoint_previous_secret_sealed,
           e.previous_secret_expires_at as endpoint_previous_secret_expires_at`,
        [IN_FLIGHT_PER_ENDPOINT, limit, leaseMs],
      );
      return rows.map(toClaimedDelivery);
    });
  }

  recordAttempt(
    claimed: ClaimedDelivery,
    record: AttemptRecord,
  ): Promise<{ recorded: boolean; failingSince: Date | null }> {
    // Raw: the delivery's attempt and the endpoint's failure streak in one statement (atomic without a
    // transaction, one round trip), only while this claim still holds the delivery (not after its lease
    // ran out and another took it, nor after the endpoint was disabled). Once per attempt on the alert
    // fan-out, which runs at its capacity at the target rate (bench/alert-fanout.bench.ts: 495 of 500
    // deliveries/s offered, docs/benchmarks.md); the ORM's form would be a transaction of three statements.
    return this.unit.autocommit(async ({ sql }) => {
      const rows = await sql.all<{ failing_since: string | null }>(
        `with attempt as (
           update notification.alert_deliveries
           set status = ?, attempts = attempts + 1, next_attempt_at = ?, locked_until = null, lease_token = null,
               last_attempt_at = ?, last_response_code = ?, last_error = ?, last_duration_ms = ?
           where id = ? and lease_token = ? and status = 'pending'
           returning endpoint_id
         )
         update notification.alert_endpoints e
         set failing_since = case when ? then null else coalesce(e.failing_since, ?::timestamptz) end
         from attempt where e.id = attempt.endpoint_id
         returning e.failing_since`,
        [
          record.status,
          record.nextAttemptAt,
          record.at,
          record.responseCode,
          record.error,
          Math.round(record.durationMs),
          claimed.delivery.id,
          claimed.leaseToken,
          record.status === 'delivered',
          record.at,
        ],
      );
      const [health] = rows;
      return {
        recorded: rows.length === 1,
        failingSince: health?.failing_since ? new Date(health.failing_since) : null,
      };
    });
  }

  disableEndpoint(endpoint: { id: string; orgId: string }, at: Date, notice: FeedItem): Promise<boolean> {
    return this.unit.transaction(async ({ em }) => {
      const disabled = await em.nativeUpdate(
        AlertEndpointEntity,
        { id: endpoint.id, orgId: endpoint.orgId, disabledAt: null },
        { disabledAt: at },
      );
      if (disabled !== 1) return false;
      await em.nativeUpdate(
        AlertDeliveryEntity,
        { endpointId: endpoint.id, status: 'pending' },
        {
          status: 'failed',
          nextAttemptAt: null,
          lastError: raw(`coalesce(last_error, '') || ' (endpoint disabled)'`),
        },
      );
      await em.insert(FeedItemEntity, feedItemOf(notice));
      return true;
    });
  }
}

/** A claimed delivery with its endpoint, as the claim returns it (timestamps as text). */
interface ClaimedRow {
  id: string;
  org_id: string;
  endpoint_id: string;
  event_type: AlertDelivery['eventType'];
  body: string;
  status: AlertDelivery['status'];
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
  last_attempt_at: string | null;
  last_response_code: number | null;
  last_error: string | null;
  last_duration_ms: number | null;
  endpoint_url: string;
  lease_token: string;
  endpoint_secret_sealed: string;
  endpoint_previous_secret_sealed: string | null;
  endpoint_previous_secret_expires_at: string | null;
}

function toClaimedDelivery(row: ClaimedRow): ClaimedDelivery {
  return {
    leaseToken: row.lease_token,
    delivery: {
      id: row.id,
      orgId: row.org_id,
      endpointId: row.endpoint_id,
      eventType: row.event_type,
      body: row.body,
      status: row.status,
      attempts: row.attempts,
      nextAttemptAt: row.next_attempt_at ? new Date(row.next_attempt_at) : null,
      createdAt: new Date(row.created_at),
      lastAttemptAt: row.last_attempt_at ? new Date(row.last_attempt_at) : null,
      lastResponseCode: row.last_response_code,
      lastError: row.last_error,
      lastDurationMs: row.last_duration_ms,
    },
    endpoint: {
      id: row.endpoint_id,
      orgId: row.org_id,
      url: row.endpoint_url,
      secretSealed: row.endpoint_secret_sealed,
      previousSecretSealed: row.endpoint_previous_secret_sealed,
      previousSecretExpiresAt: row.endpoint_previous_secret_expires_at
        ? new Date(row.endpoint_previous_secret_expires_at)
        : null,
    },
  };
}

function feedItemOf(item: FeedItem): FeedItem {
  return {
    id: item.id,
    orgId: item.orgId,
    type: item.type,
    message: item.message,
    createdAt: item.createdAt,
  };
}

function toAlertEndpoint(row: AlertEndpointWithSecret | AlertEndpointRow): AlertEndpointWithSecret {
  return {
    id: row.id,
    orgId: row.orgId,
    url: row.url,
    description: row.description,
    secretSealed: row.secretSealed,
    previousSecretSealed: row.previousSecretSealed,
    previousSecretExpiresAt: row.previousSecretExpiresAt,
    createdAt: row.createdAt,
    disabledAt: row.disabledAt,
  };
}

function toAlertDelivery(row: AlertDelivery | AlertDeliveryRow): AlertDelivery {
  return {
    id: row.id,
    orgId: row.orgId,
    endpointId: row.endpointId,
    eventType: row.eventType,
    body: row.body,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.nextAttemptAt,
    createdAt: row.createdAt,
    lastAttemptAt: row.lastAttemptAt,
    lastResponseCode: row.lastResponseCode,
    lastError: row.lastError,
    lastDurationMs: row.lastDurationMs,
  };
}

function toNotification(row: NotificationViewRow): Notification {
  return {
    id: row.id,
    type: row.type,
    message: row.message,
    read: row.read,
    createdAt: new Date(row.created_at),
  };
}
