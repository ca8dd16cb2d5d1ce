import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Hand-written SQL bound to an EntityManager's transaction (if any). Used where a query is on a hot
 * path or needs locking clauses the ORM does not express; values always travel as parameters (`?`).
 */
export interface SqlRunner {
  all<Row>(sql: string, params?: unknown[]): Promise<Row[]>;
  one<Row>(sql: string, params?: unknown[]): Promise<Row | null>;
  /** Returns the number of affected rows. */
  run(sql: string, params?: unknown[]): Promise<number>;
}

export function sqlRunner(em: EntityManager): SqlRunner {
  const connection = em.getConnection();
  const context = (): unknown => em.getTransactionContext();
  return {
    all: <Row>(sql: string, params: unknown[] = []) => connection.execute<Row[]>(sql, params, 'all', context()),
    one: async <Row>(sql: string, params: unknown[] = []) =>
      (await connection.execute<Row[]>(sql, params, 'all', context()))[0] ?? null,
    run: async (sql: string, params: unknown[] = []) => {
      const result = await connection.execute<{ affectedRows: number }>(sql, params, 'run', context());
      return result.affectedRows;
    },
  };
}
