import { randomUUID } from 'node:crypto';
import { LockMode, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { recordEventsOnce } from '@sts/db/processed-events';
import { sqlRunner, type SqlRunner } from '@sts/db/sql-runner';
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
} from './notification-entities';

interface NotificationViewRow {
  id: string;
  type: NotificationType;
  message: string;
  created_at: Date;
  read: boolean;
}

/**
 * The feed as one user sees it. Parameters, in order: user id (watermark), user id (reads).
 * `read` follows the domain's rule: marked individually, or created at or before the read-all watermark.
 */
const FEED_VIEW = `select f.id, f.type, f.message, f.created_at,
    (r.notification_id is not null or f.created_at <= coalesce(w.read_all_before, '-infinity'::timestamptz)) as read
  from notification.feed_items f
  left join notification.read_watermarks w on w.org_id = f.org_id and w.user_id = ?
  left join notification.notification_reads r on r.notification_id = f.id and r.user_id = ?`;

const UNREAD = `r.notification_id is null and f.created_at > coalesce(w.read_all_before, '-infinity'::timestamptz)`;

/** NotificationStore over PostgreSQL (schema `notification`). */
export class MikroNotificationStore implements NotificationStore {
  constructor(private readonly orm: MikroORM) {}

  transaction<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T> {
    return this.orm.em.fork().transactional((tx) => work(new NotificationRepositoriesSql(tx)));
  }

  read<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T> {
    return work(new NotificationRepositoriesSql(this.orm.em.fork()));
  }
}

class NotificationRepositoriesSql implements NotificationRepositories {
  private readonly sql: SqlRunner;

  constructor(private readonly em: EntityManager) {
    this.sql = sqlRunner(em);
  }

  recordEventsOnce(events: readonly { id: string; type: string }[]): Promise<Set<string>> {
    return recordEventsOnce(this.em, events);
  }

  async insertFeedItems(items: readonly FeedItem[]): Promise<void> {
    if (items.length === 0) return;
    await this.em
      .createQueryBuilder(FeedItemEntity)
      .insert([...items])
      .onConflict('id')
      .ignore()
      .execute();
  }

  async listFeed(orgId: string, userId: string, query: FeedQuery): Promise<Notification[]> {
    const after = query.after && isUuid(query.after.id) ? query.after : null;
    const rows = await this.sql.all<NotificationViewRow>(
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
    const row = await this.sql.one<{ count: number }>(
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
    const row = await this.sql.one<NotificationViewRow>(`${FEED_VIEW} where f.id = ? and f.org_id = ?`, [
      userId,
      userId,
      notificationId,
      orgId,
    ]);
    return row ? toNotification(row) : null;
  }

  async markRead(userId: string, notificationId: string, at: Date): Promise<void> {
    await this.sql.run(
      `insert into notification.notification_reads (notification_id, user_id, read_at) values (?, ?, ?)
       on conflict do nothing`,
      [notificationId, userId, at],
    );
  }

  async markAllReadUntil(orgId: string, userId: string, at: Date): Promise<number> {
    // Lock the user's watermark row first (creating it if needed), so that concurrent read-alls of
    // the same user count each item once.
    await this.sql.run(
      `insert into notification.read_watermarks (org_id, user_id, read_all_before) values (?, ?, null)
       on conflict do nothing`,
      [orgId, userId],
    );
    await this.sql.all(
      `select 1 from notification.read_watermarks where org_id = ? and user_id = ? for update`,
      [orgId, userId],
    );
    const row = await this.sql.one<{ count: number }>(
      `select count(*)::int as count
       from notification.feed_items f
       join notification.read_watermarks w on w.org_id = f.org_id and w.user_id = ?
       left join notification.notification_reads r on r.notification_id = f.id and r.user_id = ?
       where f.org_id = ? and f.created_at <= ? and ${UNREAD}`,
      [userId, userId, orgId, at],
    );
    await this.sql.run(
      `update notification.read_watermarks
       set read_all_before = greatest(read_all_before, ?::timestamptz), updated_at = now()
       where org_id = ? and user_id = ?`,
      [at, orgId, userId],
    );
    return row?.count ?? 0;
  }

  async insertEmailLog(entry: EmailLogEntry): Promise<void> {
    await this.em.insert(EmailLogEntity, { id: randomUUID(), ...entry });
  }

  async listAlertEndpoints(orgId: string): Promise<AlertEndpointWithSecret[]> {
    const rows = await this.em.find(
      AlertEndpointEntity,
      { orgId },
      { orderBy: { createdAt: 'asc', id: 'asc' }, disableIdentityMap: true },
    );
    return rows.map((row) => ({ ...row }));
  }

  async findAlertEndpoint(orgId: string, endpointId: string): Promise<AlertEndpointWithSecret | null> {
    if (!isUuid(endpointId)) return null;
    const row = await this.em.findOne(
      AlertEndpointEntity,
      { id: endpointId, orgId },
      { lockMode: LockMode.PESSIMISTIC_WRITE, disableIdentityMap: true },
    );
    return row ? { ...row } : null;
  }

  async insertAlertEndpoint(endpoint: AlertEndpointWithSecret): Promise<boolean> {
    const inserted = await this.em
      .createQueryBuilder(AlertEndpointEntity)
      .insert(endpoint)
      .onConflict(['orgId', 'url'])
      .ignore()
      .execute<{ affectedRows: number }>('run');
    return inserted.affectedRows === 1;
  }

  async deleteAlertEndpoint(orgId: string, endpointId: string): Promise<boolean> {
    if (!isUuid(endpointId)) return false;
    return (await this.em.nativeDelete(AlertEndpointEntity, { id: endpointId, orgId })) === 1;
  }

  async enableAlertEndpoint(orgId: string, endpointId: string): Promise<boolean> {
    if (!isUuid(endpointId)) return false;
    // Raw: failing_since is the queue's bookkeeping, not a field of the entity.
    const changed = await this.sql.run(
      `update notification.alert_endpoints set disabled_at = null, failing_since = null where id = ? and org_id = ?`,
      [endpointId, orgId],
    );
    return changed === 1;
  }

  async rotateAlertSecret(
    orgId: string,
    endpointId: string,
    rotation: { secretSealed: string; previousSecretSealed: string; previousSecretExpiresAt: Date },
  ): Promise<boolean> {
    if (!isUuid(endpointId)) return false;
    return (await this.em.nativeUpdate(AlertEndpointEntity, { id: endpointId, orgId }, rotation)) === 1;
  }

  async insertAlertDeliveries(deliveries: readonly AlertDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await this.em.insertMany(AlertDeliveryEntity, [...deliveries]);
  }

  async testSendTimes(orgId: string, endpointId: string, since: Date): Promise<Date[]> {
    if (!isUuid(endpointId)) return [];
    const rows = await this.em.find(
      AlertDeliveryEntity,
      { orgId, endpointId, eventType: 'alert.test', createdAt: { $gt: since } },
      { fields: ['createdAt'], disableIdentityMap: true },
    );
    return rows.map((row) => row.createdAt);
  }

  async listAlertDeliveries(
    orgId: string,
    endpointId: string,
    limit: number,
  ): Promise<AlertDelivery[] | null> {
    if (!isUuid(endpointId)) return null;
    const endpoint = await this.em.findOne(
      AlertEndpointEntity,
      { id: endpointId, orgId },
      { disableIdentityMap: true },
    );
    if (!endpoint) return null;
    const rows = await this.em.find(
      AlertDeliveryEntity,
      { endpointId, orgId },
      { orderBy: { createdAt: 'desc', id: 'desc' }, limit, disableIdentityMap: true },
    );
    return rows.map(toAlertDelivery);
  }
}

function toAlertDelivery(row: AlertDelivery & { lockedUntil?: Date | null }): AlertDelivery {
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

/** How many attempts one endpoint may have in flight at once, so that a slow receiver keeps the others' slots free. */
const IN_FLIGHT_PER_ENDPOINT = 4;

/**
 * The durable schedule of alert deliveries over PostgreSQL. Raw SQL: the claim needs `FOR UPDATE SKIP
 * LOCKED` and a per-endpoint bound in one statement, which the ORM does not express.
 */
export class PostgresAlertDeliveryQueue implements AlertDeliveryQueue {
  constructor(private readonly orm: MikroORM) {}

  async claimDue(limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    const sql = sqlRunner(this.orm.em.fork());
    // Times are the database's (one clock for every process). Each endpoint gets at most its free
    // slots (IN_FLIGHT_PER_ENDPOINT minus its leased rows), counted per endpoint within this claim too.
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
    return rows.map((row) => ({
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
    }));
  }

  async recordAttempt(
    claimed: ClaimedDelivery,
    record: AttemptRecord,
  ): Promise<{ recorded: boolean; failingSince: Date | null }> {
    // One statement (atomic, one round trip): the delivery's attempt and the endpoint's failure streak,
    // only while this claim still holds the delivery (not after its lease ran out and another took it,
    // nor after the endpoint was disabled).
    const rows = await sqlRunner(this.orm.em.fork()).all<{ failing_since: Date | null }>(
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
  }

  async disableEndpoint(
    endpoint: { id: string; orgId: string },
    at: Date,
    notice: FeedItem,
  ): Promise<boolean> {
    return this.orm.em.fork().transactional(async (tx) => {
      const sql = sqlRunner(tx);
      const disabled = await sql.run(
        `update notification.alert_endpoints set disabled_at = ? where id = ? and org_id = ? and disabled_at is null`,
        [at, endpoint.id, endpoint.orgId],
      );
      if (disabled !== 1) return false;
      await sql.run(
        `update notification.alert_deliveries
         set status = 'failed', next_attempt_at = null, last_error = coalesce(last_error, '') || ' (endpoint disabled)'
         where endpoint_id = ? and status = 'pending'`,
        [endpoint.id],
      );
      await tx.insert(FeedItemEntity, notice);
      return true;
    });
  }
}

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

function toNotification(row: NotificationViewRow): Notification {
  return {
    id: row.id,
    type: row.type,
    message: row.message,
    read: row.read,
    createdAt: new Date(row.created_at),
  };
}
