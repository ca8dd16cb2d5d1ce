import { randomUUID } from 'node:crypto';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { recordEventsOnce } from '@sts/db/processed-events';
import { sqlRunner, type SqlRunner } from '@sts/db/sql-runner';
import { isUuid } from '@sts/vocabulary/identifiers';
import type {
  EmailLogEntry,
  FeedItem,
  Notification,
  NotificationType,
} from '@sts/notification-domain/notification-model';
import type {
  FeedQuery,
  NotificationRepositories,
  NotificationStore,
} from '@sts/notification-domain/notification-ports';
import { EmailLogEntity, FeedItemEntity } from './notification-entities';

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
