import { DeadlockException, UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { Migration } from '@mikro-orm/migrations';
import { createLogger } from '@sts/logger/create-logger';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { createServiceOrm, migrateToLatest, type ServiceOrm } from './service-orm';
import { sqlRunner } from './sql-runner';

class Things extends Migration {
  override up(): void {
    this.addSql('create table "sql_runner_test"."things" (id text primary key);');
  }
}

describe('sqlRunner against PostgreSQL', () => {
  const logger = createLogger('sql-runner-test', 'silent');
  let database: TestDatabase;
  let orm: ServiceOrm;

  beforeAll(async () => {
    database = await createTestDatabase('sqlrunner');
    orm = await createServiceOrm({
      databaseUrl: database.url,
      schema: 'sql_runner_test',
      entities: [],
      migrations: [{ name: '0001_things', class: Things }],
      logger,
    });
    await migrateToLatest(orm, logger);
  });

  afterAll(async () => {
    await orm.close(true);
    await database.drop();
  });

  it("raises MikroORM's exceptions for raw statements, as for the ORM's own queries", async () => {
    const sql = sqlRunner(orm.em.fork());
    expect(await sql.run(`insert into sql_runner_test.things (id) values (?)`, ['a'])).toBe(1);
    await expect(sql.run(`insert into sql_runner_test.things (id) values (?)`, ['a'])).rejects.toBeInstanceOf(
      UniqueConstraintViolationException,
    );
    await expect(
      sql.all(`insert into sql_runner_test.things (id) values (?) returning id`, ['a']),
    ).rejects.toBeInstanceOf(UniqueConstraintViolationException);
    await expect(
      sql.one(`do $$ begin raise exception using errcode = '40001', message = 'try again'; end $$`),
    ).rejects.toBeInstanceOf(DeadlockException);
  });
});
