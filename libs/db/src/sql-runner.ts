import { DriverException, type EntityManager } from '@mikro-orm/postgresql';

/**
 * Hand-written SQL bound to an EntityManager's transaction (if any): the one path for raw SQL, used only
 * where a benchmark needs it or the ORM has no form for the statement (see `unit-of-work.ts`), each
 * statement with a one-line comment saying why. Values always travel as parameters (`?`).
 *
 * Errors come out as MikroORM's exceptions, as from the ORM's own queries: a unique violation is a
 * `UniqueConstraintViolationException`, a serialization failure or deadlock a `DeadlockException`
 * (`Connection.execute` hands back the driver's raw error, so stores would otherwise need two checks).
 */
export interface SqlRunner {
  all<Row>(sql: string, params?: unknown[]): Promise<Row[]>;
  one<Row>(sql: string, params?: unknown[]): Promise<Row | null>;
  /** Returns the number of affected rows. */
  run(sql: string, params?: unknown[]): Promise<number>;
}

export function sqlRunner(em: EntityManager): SqlRunner {
  const connection = em.getConnection();
  const driver = em.getDriver();
  const context = (): unknown => em.getTransactionContext();
  const converted = (error: unknown): unknown =>
    error instanceof Error && !(error instanceof DriverException) ? driver.convertException(error) : error;
  const all = async <Row>(sql: string, params: unknown[] = []) => {
    try {
      return await connection.execute<Row[]>(sql, params, 'all', context());
    } catch (error) {
      throw converted(error);
    }
  };
  return {
    all,
    one: async <Row>(sql: string, params: unknown[] = []) => (await all<Row>(sql, params))[0] ?? null,
    run: async (sql: string, params: unknown[] = []) => {
      try {
        const result = await connection.execute<{ affectedRows: number }>(sql, params, 'run', context());
        return result.affectedRows;
      } catch (error) {
        throw converted(error);
      }
    },
  };
}
