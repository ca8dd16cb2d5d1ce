import { Migration } from '@mikro-orm/migrations';
import { Client } from 'pg';
import { createLogger } from '@sts/logger/create-logger';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { assertMigrated, createServiceOrm, migrateToLatest, type ServiceOrm } from './service-orm';

/** Slow on purpose: a second process arriving meanwhile must wait, not apply it again. */
class SlowTable extends Migration {
  override up(): void {
    this.addSql('select pg_sleep(0.3); create table "migrations_test"."things" (id text primary key);');
  }
}

class Counter extends Migration {
  override up(): void {
    this.addSql(`create table "migrations_test"."applied" (at timestamptz not null default clock_timestamp());
      insert into "migrations_test"."applied" default values;`);
  }
}

describe('service migrations (PostgreSQL)', () => {
  const logger = createLogger('migrations-test', 'silent');
  let database: TestDatabase;
  const orms: ServiceOrm[] = [];
  const open = async () => {
    const orm = await createServiceOrm({
      databaseUrl: database.url,
      schema: 'migrations_test',
      entities: [],
      migrations: [
        { name: '0001_slow', class: SlowTable },
        { name: '0002_counter', class: Counter },
      ],
      logger,
      poolMax: 2,
    });
    orms.push(orm);
    return orm;
  };

  beforeAll(async () => {
    database = await createTestDatabase('migrations');
  });

  afterAll(async () => {
    await Promise.all(orms.map((orm) => orm.close(true)));
    await database.drop();
  });

  it('refuses to start with pending migrations in check mode, naming them', async () => {
    const orm = await open();
    await expect(assertMigrated(orm)).rejects.toThrow(/2 pending migration\(s\) \(0001_slow, 0002_counter\)/);
  });

  it('applies them once when several processes migrate at the same time', async () => {
    const processes = await Promise.all([open(), open(), open()]);
    await Promise.all(processes.map((orm) => migrateToLatest(orm, logger)));
    const client = new Client({ connectionString: database.url });
    await client.connect();
    try {
      expect((await client.query('select count(*)::int as n from migrations_test.applied')).rows).toEqual([
        { n: 1 },
      ]);
      expect(
        (await client.query('select name from migrations_test.schema_migrations order by name')).rows.map(
          (row: { name: string }) => row.name,
        ),
      ).toEqual(['0001_slow', '0002_counter']);
    } finally {
      await client.end();
    }
    await expect(assertMigrated(processes[0])).resolves.toBeUndefined();
  });
});
