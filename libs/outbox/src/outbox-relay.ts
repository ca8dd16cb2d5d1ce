import type { MikroORM } from '@mikro-orm/postgresql';
import type { EventEnvelope } from '@sts/events/event-envelope';
import type { Logger } from '@sts/logger/create-logger';

export type PublishEnvelope = (envelope: EventEnvelope) => Promise<void>;

/** Published rows are kept as long as the event stream keeps the events (libs/nats event-stream max_age). */
const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
const DEFAULT_PRUNE_INTERVAL_MS = 60 * 60 * 1000;
/** Rows deleted per statement, so pruning never holds many row locks or one long transaction. */
const PRUNE_BATCH = 5_000;

interface OutboxRow {
  id: string;
  envelope: EventEnvelope;
}

/**
 * Publishes committed outbox rows in order. Rows are claimed with `FOR UPDATE SKIP LOCKED`, so
 * several replicas of a service can run relays side by side. Publishing is at-least-once; the
 * envelope id is the JetStream message id, so the stream drops duplicates within its window.
 * Published rows older than `retentionMs` are deleted, at most once per `pruneIntervalMs`, so the
 * table holds what is pending plus a recent record instead of growing forever.
 */
export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private wakeRequested = false;
  private nextPruneAt = 0;

  constructor(
    private readonly orm: MikroORM,
    private readonly publish: PublishEnvelope,
    private readonly logger: Logger,
    private readonly options: {
      pollIntervalMs?: number;
      batchSize?: number;
      retentionMs?: number;
      pruneIntervalMs?: number;
    } = {},
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Asks for an immediate pass (called after a commit that wrote events). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.wakeRequested = true;
      return;
    }
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** Publishes everything pending now; returns how many rows were published. Used by tests too. */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const published = await this.publishBatch();
      total += published;
      if (published < (this.options.batchSize ?? 100)) return total;
    }
  }

  private schedule(delayMs: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.drain()
        .then(() => this.pruneWhenDue())
        .catch((error: unknown) => this.logger.warn({ err: error }, 'outbox relay pass failed; will retry'))
        .finally(() => {
          this.running = undefined;
          if (this.stopped) return;
          const again = this.wakeRequested;
          this.wakeRequested = false;
          this.schedule(again ? 0 : (this.options.pollIntervalMs ?? 500));
        });
    }, delayMs);
  }

  /**
   * Deletes published rows older than the retention, in batches; returns how many. Rows not yet
   * published are never deleted, however old. Used by tests too.
   */
  async prunePublished(): Promise<number> {
    const schema = this.orm.config.get('schema');
    const retentionSeconds = (this.options.retentionMs ?? DEFAULT_RETENTION_MS) / 1000;
    const connection = this.orm.em.getConnection();
    let total = 0;
    for (;;) {
      const deleted = await connection.execute<{ id: string }[]>(
        `delete from "${schema}"."outbox" where id in (
           select id from "${schema}"."outbox"
           where published_at is not null and published_at < now() - make_interval(secs => ?)
           limit ${PRUNE_BATCH}
         ) returning id`,
        [retentionSeconds],
        'all',
      );
      total += deleted.length;
      if (deleted.length < PRUNE_BATCH) return total;
    }
  }

  private async pruneWhenDue(): Promise<void> {
    if (Date.now() < this.nextPruneAt) return;
    this.nextPruneAt = Date.now() + (this.options.pruneIntervalMs ?? DEFAULT_PRUNE_INTERVAL_MS);
    const pruned = await this.prunePublished();
    if (pruned > 0) this.logger.info({ pruned }, 'outbox: published rows past retention deleted');
  }

  private async publishBatch(): Promise<number> {
    const em = this.orm.em.fork();
    const schema = this.orm.config.get('schema');
    return em.transactional(async (tx) => {
      const connection = tx.getConnection();
      const context: unknown = tx.getTransactionContext();
      const rows = await connection.execute<OutboxRow[]>(
        `select id, envelope from "${schema}"."outbox" where published_at is null
         order by created_at, id limit ? for update skip locked`,
        [this.options.batchSize ?? 100],
        'all',
        context,
      );
      const published: string[] = [];
      for (const row of rows) {
        try {
          await this.publish(row.envelope);
          published.push(row.id);
        } catch (error) {
          // Keep order: stop at the first failure, record it, retry on the next pass.
          await connection.execute(
            `update "${schema}"."outbox" set attempts = attempts + 1, last_error = ? where id = ?`,
            [String((error as Error).message ?? error).slice(0, 500), row.id],
            'run',
            context,
          );
          this.logger.warn({ err: error, eventId: row.id }, 'outbox publish failed');
          break;
        }
      }
      if (published.length > 0) {
        await connection.execute(
          `update "${schema}"."outbox" set published_at = now() where id in (${published.map(() => '?').join(', ')})`,
          published,
          'run',
          context,
        );
      }
      return published.length;
    });
  }
}
