import {
  DeadlockException,
  DriverException,
  UniqueConstraintViolationException,
  type EntityManager,
  type MikroORM,
} from '@mikro-orm/postgresql';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import { sqlRunner, type SqlRunner } from './sql-runner';

/**
 * The one way a store reaches PostgreSQL: each unit of work (a transaction, or statements that commit one
 * by one) runs on an EntityManager forked for it alone, writes its events to the outbox inside its
 * transaction, tells the outbox relay after a commit that wrote any, and reports a lost race on a unique
 * key as the one {@link UniqueConflict} of `@sts/errors`.
 *
 * How stores query, so that every store reads alike:
 * - The entities (`<service>-entities.ts`, checked against the migrated schema by
 *   `<service>-entities.int-spec.ts` through `entitySchemaDrift`) are the one description of each table. Rows
 *   come back as entities (from the QueryBuilder's `execute`, as plain objects keyed by property) and are
 *   mapped field by field to domain objects.
 * - EntityManager methods first: `find`/`findOne`/`count` for reads (`lockMode` for `for update`),
 *   `insert`/`insertMany`/`nativeUpdate`/`nativeDelete`/`upsert` for writes. Nothing is `persist`ed or
 *   flushed: the identity map is off for every EntityManager of a service ORM (`disableIdentityMap` in
 *   `createServiceOrm`), so a read always returns what the database holds and no store repeats the option.
 * - The QueryBuilder on an entity (`em.createQueryBuilder(Entity)`) where those have no form: an insert
 *   that ignores a conflict and must say whether it inserted, joins, `returning`, `where` or `set` with an
 *   SQL expression (`raw()` fragments, values always as parameters).
 * - Raw SQL through `scope.sql` (`sqlRunner`) only where a benchmark needs it, or where the ORM has no form
 *   for the statement (`for no key update`, `skip locked` claims, advisory locks, data-modifying CTEs that
 *   must be one statement); each such statement carries a one-line comment saying why.
 */

/** Writes one event to the outbox in the transaction of `em`: `enqueueEvent` of `@sts/outbox/outbox`. */
export type OutboxWriter = <Type extends EventType>(
  em: EntityManager,
  type: Type,
  data: EventData<Type>,
) => Promise<unknown>;

export interface UnitOfWorkOptions {
  /** How events are written; a service that publishes none leaves it out (then `emit` throws). */
  outbox?: OutboxWriter;
  /** Called after a commit that wrote events (the outbox relay's `wake`), so they are published at once. */
  onCommitWithEvents?: () => void;
}

/** What one unit of work gives a store's repositories. */
export interface WorkScope {
  /** Forked for this unit of work alone; in a transaction, bound to it. */
  readonly em: EntityManager;
  /** Hand-written SQL on the same connection and transaction as `em` (see the module comment for when). */
  readonly sql: SqlRunner;
  /** Writes an event to the outbox of this transaction: published if and only if it commits. */
  emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void>;
}

export class UnitOfWork {
  constructor(
    private readonly orm: MikroORM,
    private readonly options: UnitOfWorkOptions = {},
  ) {}

  /**
   * Runs `work` in one transaction. After the commit, `onCommitWithEvents` is called if it wrote events;
   * a unique violation (the transaction is rolled back) comes out as {@link UniqueConflict}.
   */
  async transaction<T>(work: (scope: WorkScope) => Promise<T>): Promise<T> {
    let emitted = 0;
    const outbox = this.options.outbox;
    let result: T;
    try {
      result = await this.orm.em.fork().transactional((em) =>
        work({
          em,
          sql: sqlRunner(em),
          emit: async (type, data) => {
            if (!outbox) throw new Error(`${this.schema()} publishes no events`);
            await outbox(em, type, data);
            emitted += 1;
          },
        }),
      );
    } catch (error) {
      const exception = this.driverException(error);
      throw exception instanceof UniqueConstraintViolationException ? new UniqueConflict(exception) : error;
    }
    if (emitted > 0) this.options.onCommitWithEvents?.();
    return result;
  }

  /**
   * Runs `work` without a transaction: each statement commits on its own (reads, or one statement that is
   * atomic by itself, e.g. a measured hot path's one round trip). Nothing may be emitted: a statement that
   * writes events writes them itself (`outboxInsertPart`), and `committedEvents` tells from the result
   * whether it did, for `onCommitWithEvents`. A unique violation or a serialization failure (a statement
   * that undid itself) is {@link UniqueConflict}: the failed statement changed nothing, and may be retried.
   */
  async autocommit<T>(
    work: (scope: WorkScope) => Promise<T>,
    options: { committedEvents?: (result: T) => boolean } = {},
  ): Promise<T> {
    const em = this.orm.em.fork();
    let result: T;
    try {
      result = await work({
        em,
        sql: sqlRunner(em),
        emit: () => Promise.reject(new Error('events are written in a transaction only')),
      });
    } catch (error) {
      const exception = this.driverException(error);
      throw exception instanceof UniqueConstraintViolationException || exception instanceof DeadlockException
        ? new UniqueConflict(exception)
        : error;
    }
    if (options.committedEvents?.(result)) this.options.onCommitWithEvents?.();
    return result;
  }

  /**
   * The error as one of MikroORM's exceptions: the QueryBuilder's `execute` hands back node-postgres's
   * own error (code 23505 for a unique violation), the EntityManager's methods and `sqlRunner` convert it.
   */
  private driverException(error: unknown): unknown {
    if (!(error instanceof Error) || error instanceof DriverException) return error;
    return this.orm.em.getDriver().convertException(error);
  }

  private schema(): string {
    return `schema ${this.orm.config.get('schema')}`;
  }
}
