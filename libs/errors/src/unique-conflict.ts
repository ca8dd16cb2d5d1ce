/**
 * Thrown by a store when a write lost a race (a unique key taken, a row changed or deleted concurrently)
 * and left nothing behind; the work may be retried. The PostgreSQL stores raise it for unique violations
 * (`@sts/db/unit-of-work`); domain services and the in-memory stores of the domain tests use it the same way.
 */
export class UniqueConflict extends Error {
  constructor(cause?: unknown) {
    super('unique constraint conflict', { cause });
    this.name = 'UniqueConflict';
  }
}
