import type { MikroORM } from '@mikro-orm/postgresql';
import type { EventEnvelope } from '@sts/events/event-envelope';
import type { Logger } from '@sts/logger/create-logger';

export type PublishEnvelope = (envelope: EventEnvelope) => Promise<void>;

interface OutboxRow {
  id: string;
  envelope: EventEnvelope;
}

/**
 * Publishes committed outbox rows in order. Rows are claimed with `FOR UPDATE SKIP LOCKED`, so
 * several replicas of a service can run relays side by side. Publishing is at-least-once; the
 * envelope id is the JetStream message id, so the stream drops duplicates within its window.
 */
export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private wakeRequested = false;

  constructor(
    private readonly orm: MikroORM,
    private readonly publish: PublishEnvelope,
    private readonly logger: Logger,
    private readonly options: { pollIntervalMs?: number; batchSize?: number } = {},
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
        .then(() => undefined)
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
