import { raw, type MikroORM } from '@mikro-orm/postgresql';
import type { EventEnvelope } from '@sts/events/event-envelope';
import type { Logger } from '@sts/logger/create-logger';
import { outboxDeadLettered, outboxPublished } from '@sts/observability/metrics';
import { contextFromHeaders, SpanKind, startSpan, type TraceHeaders } from '@sts/observability/trace-context';
import { OutboxEntity, type OutboxRow } from './outbox';

export type PublishEnvelope = (envelope: EventEnvelope) => Promise<void>;

/** A claimed row: its organization (`aggregate`) and what is published. */
interface ClaimedRow {
  id: string;
  aggregate: string;
  envelope: EventEnvelope;
  /** The writing change's trace context, when it was traced. */
  trace_context: TraceHeaders | null;
}

interface FailedRow {
  id: string;
  aggregate: string;
  error: unknown;
}

export interface OutboxRelayOptions {
  pollIntervalMs?: number;
  batchSize?: number;
  /** Failed publishes, counted while the publishing path works, before a row is parked. Default 10. */
  maxAttempts?: number;
  /**
   * Whether the broker answers (e.g. a JetStream account-info round trip). Asked only when nothing in
   * a pass was published, to tell a row at fault from a broker that is down.
   */
  brokerAnswers?: () => Promise<boolean>;
  /**
   * Whether a publish failed for the broker's sake whatever else answers (no responders while a stream
   * elects a leader, a timeout, a lost connection): such a failure never counts against its row.
   */
  isBrokerFailure?: (error: unknown) => boolean;
  /**
   * The largest message the broker takes (NATS `max_payload`). A larger event fails before anything of
   * the batch is sent, so that it can block its organization's later events (see `publishBatch`).
   */
  maxPayloadBytes?: number;
}

/** The advisory lock the relays of one schema take turns with. */
const relayLockKey = (schema: string | undefined) => `sts-outbox:${schema ?? ''}`;

/** How soon a relay looks again when another one of its schema was publishing. */
const OTHER_RELAY_RETRY_MS = 50;

/** Room for the headers the publisher adds (message id, expected stream). */
const HEADER_ALLOWANCE_BYTES = 1_024;

/**
 * Events of one organization are published in the order they were written; organizations do not
 * wait for each other. Every event names its organization (`data.org_id`), so that is the aggregate.
 */
const AGGREGATE_SQL = `coalesce(envelope->'data'->>'org_id', '')`;

/**
 * Publishes committed outbox rows in order per organization. Replicas of a service each run a relay;
 * one at a time publishes (a transaction-level advisory lock per schema), the others look again soon,
 * and when the publishing one dies its lock goes with its connection. Publishing is
 * at-least-once; the envelope id is the JetStream message id, so the stream drops duplicates within
 * its window.
 *
 * A row that fails blocks only the later rows of its organization. Its failure counts as an attempt
 * only when the broker is known to work: another row was published in the same pass, or the broker
 * answers a round trip. When NATS is down, no row is blamed. After `maxAttempts` such failures the row is parked (`dead_lettered_at`), logged and
 * counted (`sts_outbox_dead_lettered_total`), and its organization's later rows go on.
 */
/** Unpublished events, the oldest one's age in seconds, parked rows (the outbox gauges' fields). */
export type OutboxBacklog = Record<'events' | 'oldestAgeSeconds' | 'parked', number>;

export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private wakeRequested = false;
  /** Set when a pass found another relay of the schema publishing: this one looks again soon. */
  private otherRelayActive = false;

  constructor(
    private readonly orm: MikroORM,
    private readonly publish: PublishEnvelope,
    private readonly logger: Logger,
    private readonly options: OutboxRelayOptions = {},
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

  /** What waits in this schema's outbox, for the metrics: unpublished events, the oldest one's age, parked rows. */
  async backlog(): Promise<OutboxBacklog> {
    const em = this.orm.em.fork();
    const waiting = { publishedAt: null, deadLetteredAt: null };
    const events = await em.count(OutboxEntity, waiting);
    const parked = await em.count(OutboxEntity, { publishedAt: null, deadLetteredAt: { $ne: null } });
    const oldest = await em
      .createQueryBuilder(OutboxEntity)
      .select(raw('extract(epoch from clock_timestamp() - min(created_at))::float8 as age'))
      .where(waiting)
      .execute<{ age: number | null }>('get');
    return { events, oldestAgeSeconds: oldest?.age ?? 0, parked };
  }

  /** Publishes everything pending now; returns how many rows were published. Used by tests too. */
  async drain(): Promise<number> {
    const batchSize = this.options.batchSize ?? 100;
    const blocked = new Set<string>();
    const failed: FailedRow[] = [];
    let total = 0;
    for (;;) {
      const { claimed, published } = await this.publishBatch(batchSize, blocked, failed);
      total += published;
      if (claimed < batchSize) break;
    }
    if (failed.length > 0) {
      const blame = total > 0 || ((await this.options.brokerAnswers?.().catch(() => false)) ?? false);
      await this.recordFailures(failed, blame);
    }
    return total;
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
          const otherRelay = this.otherRelayActive;
          this.wakeRequested = false;
          this.otherRelayActive = false;
          // Rows committed while another relay held the lock may have missed its last pass.
          this.schedule(again ? 0 : otherRelay ? OTHER_RELAY_RETRY_MS : (this.options.pollIntervalMs ?? 500));
        });
    }, delayMs);
  }

  /** One batch of pending rows of organizations not blocked earlier in this pass. */
  private async publishBatch(
    batchSize: number,
    blocked: Set<string>,
    failed: FailedRow[],
  ): Promise<{ claimed: number; published: number }> {
    const em = this.orm.em.fork();
    const schema = this.orm.config.get('schema');
    return em.transactional(async (tx) => {
      // Raw SQL here goes over the connection itself: @sts/db's sqlRunner is another driver library, which
      // this one may not import (eslint.config.mjs); these statements raise nothing the relay tells apart.
      const connection = tx.getConnection();
      const context: unknown = tx.getTransactionContext();
      // Raw: an advisory lock, which the ORM does not express. One relay of the schema publishes at a time
      // (replicas of a service each run one): with two, the second would skip the first's locked rows and
      // send an organization's later events before its earlier ones. The lock ends with the transaction,
      // also when its process dies.
      const [lock] = await connection.execute<{ locked: boolean }[]>(
        'select pg_try_advisory_xact_lock(hashtext(?)) as locked',
        [relayLockKey(schema)],
        'all',
        context,
      );
      if (!lock?.locked) {
        this.otherRelayActive = true;
        return { claimed: 0, published: 0 };
      }
      // Raw: `for update skip locked` over the organization read from the envelope's JSON, which the ORM
      // does not express.
      const rows = await connection.execute<ClaimedRow[]>(
        `select id, ${AGGREGATE_SQL} as aggregate, envelope, trace_context from "${schema}"."outbox"
         where published_at is null and dead_lettered_at is null and ${AGGREGATE_SQL} not in (select jsonb_array_elements_text(?::jsonb))
         order by created_at, id limit ? for update skip locked`,
        [JSON.stringify([...blocked]), batchSize],
        'all',
        context,
      );
      // Pipelined: every message of the batch is sent before the first acknowledgement is awaited (one
      // round trip per batch, not per row; a roll-out writes 1,000 events a second). JetStream stores the
      // messages of one connection in the order they were sent, so each organization's order holds. A
      // message refused for itself (too large) is caught before sending, so it blocks its organization's
      // later rows, which are not sent; a transient failure (timeout, lost connection) can still fail one
      // message and not the next, and the failed one then follows later.
      const sending: { row: ClaimedRow; outcome: Promise<void> }[] = [];
      for (const row of rows) {
        if (blocked.has(row.aggregate)) continue;
        const tooLarge = this.tooLarge(row.envelope);
        if (tooLarge) {
          blocked.add(row.aggregate);
          failed.push({ id: row.id, aggregate: row.aggregate, error: tooLarge });
          continue;
        }
        sending.push({ row, outcome: this.publishTraced(row) });
      }
      const outcomes = await Promise.allSettled(sending.map(({ outcome }) => outcome));
      const published: string[] = [];
      sending.forEach(({ row }, index) => {
        const outcome = outcomes[index];
        if (outcome?.status === 'fulfilled') {
          published.push(row.id);
          return;
        }
        blocked.add(row.aggregate);
        failed.push({ id: row.id, aggregate: row.aggregate, error: outcome?.reason });
      });
      if (published.length > 0) {
        outboxPublished.inc({ schema }, published.length);
        await tx.nativeUpdate(OutboxEntity, { id: { $in: published } }, { publishedAt: raw('now()') });
      }
      return { claimed: rows.length, published: published.length };
    });
  }

  /** A traced change's event is published in a producer span of that trace; the publisher passes it on. */
  private publishTraced(row: ClaimedRow): Promise<void> {
    if (!row.trace_context) return this.publish(row.envelope);
    const span = startSpan(`publish ${row.envelope.type}`, {
      kind: SpanKind.PRODUCER,
      parent: contextFromHeaders(row.trace_context),
      attributes: { 'messaging.system': 'nats', 'messaging.message.id': row.envelope.id },
    });
    return span
      .run(() => this.publish(row.envelope))
      .catch((error: unknown) => {
        span.fail(error);
        throw error;
      })
      .finally(() => span.end());
  }

  private tooLarge(envelope: EventEnvelope): Error | undefined {
    const max = this.options.maxPayloadBytes;
    if (max === undefined) return undefined;
    const bytes = Buffer.byteLength(JSON.stringify(envelope)) + HEADER_ALLOWANCE_BYTES;
    return bytes > max
      ? new Error(`event of ${bytes} bytes exceeds the broker's max_payload of ${max}`)
      : undefined;
  }

  /** Records the pass's failures; an attempt counts only if something else went through (`blame`). */
  private async recordFailures(failed: FailedRow[], blame: boolean): Promise<void> {
    const schema = this.orm.config.get('schema');
    const maxAttempts = this.options.maxAttempts ?? 10;
    const blamed = failed.map((row) => blame && !(this.options.isBrokerFailure?.(row.error) ?? false));
    // Under the relays' lock, in one transaction: a row locked by this update must not be skipped by
    // another relay's claim, which would then send its organization's later rows first.
    const outcomes = await this.orm.em.fork().transactional(async (tx) => {
      // Raw: the relays' advisory lock (see publishBatch).
      await tx
        .getConnection()
        .execute(
          'select pg_advisory_xact_lock(hashtext(?))',
          [relayLockKey(schema)],
          'all',
          tx.getTransactionContext(),
        );
      const rows: (Pick<OutboxRow, 'attempts' | 'deadLetteredAt'> | undefined)[] = [];
      for (const [index, row] of failed.entries()) {
        const message = String((row.error as Error)?.message ?? row.error).slice(0, 500);
        const step = blamed[index]! ? 1 : 0;
        const [updated] = await tx
          .createQueryBuilder(OutboxEntity)
          .update({
            attempts: raw('attempts + ?', [step]),
            lastError: message,
            deadLetteredAt: raw('case when attempts + ? >= ? then now() end', [step, maxAttempts]),
          })
          .where({ id: row.id, publishedAt: null })
          .returning(['attempts', 'deadLetteredAt'])
          .execute<Pick<OutboxRow, 'attempts' | 'deadLetteredAt'>[]>('all');
        rows.push(updated);
      }
      return rows;
    });
    for (const [index, row] of failed.entries()) {
      const updated = outcomes[index];
      if (updated?.deadLetteredAt) {
        outboxDeadLettered.inc({ schema });
        this.logger.error(
          { eventId: row.id, org_id: row.aggregate, attempts: updated.attempts, err: row.error },
          'outbox row parked after repeated publish failures; later events of its organization go on',
        );
      } else {
        this.logger.warn({ err: row.error, eventId: row.id, blamed: blamed[index] }, 'outbox publish failed');
      }
    }
  }
}
