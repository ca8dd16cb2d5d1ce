import { EntitySchema } from '@mikro-orm/postgresql';
import { Migration } from '@mikro-orm/migrations';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import { createLogger } from '@sts/logger/create-logger';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { createServiceOrm, migrateToLatest, type ServiceOrm } from './service-orm';
import { UnitOfWork, type OutboxWriter } from './unit-of-work';

class Things extends Migration {
  override up(): void {
    this.addSql(`create schema if not exists uow_test;
      create table uow_test.things (id text primary key);
      create table uow_test.events (type text not null);`);
  }
}

const ThingEntity = new EntitySchema<{ id: string }>({
  name: 'Thing',
  tableName: 'things',
  properties: { id: { type: 'text', primary: true } },
});

const EventEntity = new EntitySchema<{ type: string }>({
  name: 'TestEvent',
  tableName: 'events',
  properties: { type: { type: 'text', primary: true } },
});

describe('unit of work (PostgreSQL)', () => {
  const logger = createLogger('uow-test', 'silent');
  let database: TestDatabase;
  let orm: ServiceOrm;
  let woken = 0;
  /** Stands in for `enqueueEvent` (@sts/outbox, which this library may not import). */
  const outbox: OutboxWriter = async (em, type) => {
    await em.insert(EventEntity, { type });
  };
  let unit: UnitOfWork;
  const count = async (entity: EntitySchema) => orm.em.fork().count(entity, {});

  beforeAll(async () => {
    database = await createTestDatabase('uow');
    orm = await createServiceOrm({
      databaseUrl: database.url,
      schema: 'uow_test',
      entities: [ThingEntity as EntitySchema, EventEntity as EntitySchema],
      migrations: [{ name: '0001_things', class: Things }],
      logger,
      poolMax: 2,
    });
    await migrateToLatest(orm, logger);
    unit = new UnitOfWork(orm, { outbox, onCommitWithEvents: () => (woken += 1) });
  });

  afterAll(async () => {
    await orm.close(true);
    await database.drop();
  });

  beforeEach(() => {
    woken = 0;
  });

  const orgCreated = { org_id: 'o', name: 'Acme', domain: null, created_at: new Date(0).toISOString() };

  it('calls onCommitWithEvents after a commit that wrote events, and only then', async () => {
    await unit.transaction(async ({ em, emit }) => {
      await em.insert(ThingEntity, { id: 'a' });
      await emit('org.created', orgCreated);
      expect(woken).toBe(0);
    });
    expect(woken).toBe(1);
    await unit.transaction(({ em }) => em.insert(ThingEntity, { id: 'b' }));
    expect(woken).toBe(1);
    await expect(
      unit.transaction(async ({ emit }) => {
        await emit('org.created', orgCreated);
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(woken).toBe(1);
    expect(await count(EventEntity as EntitySchema)).toBe(1);
  });

  it('reports unique violations as UniqueConflict, from the EntityManager, the QueryBuilder and raw SQL', async () => {
    await unit.transaction(({ em }) => em.insert(ThingEntity, { id: 'taken' }));
    await expect(
      unit.transaction(({ em }) => em.insert(ThingEntity, { id: 'taken' })),
    ).rejects.toBeInstanceOf(UniqueConflict);
    await expect(
      unit.transaction(({ em }) => em.createQueryBuilder(ThingEntity).insert({ id: 'taken' }).execute('run')),
    ).rejects.toBeInstanceOf(UniqueConflict);
    await expect(
      unit.autocommit(({ sql }) => sql.run('insert into uow_test.things (id) values (?)', ['taken'])),
    ).rejects.toBeInstanceOf(UniqueConflict);
    await expect(unit.transaction(() => Promise.reject(new Error('not a conflict')))).rejects.toThrow(
      'not a conflict',
    );
  });

  it('writes no events outside a transaction, and reports a statement that wrote its own', async () => {
    await expect(unit.autocommit(({ emit }) => emit('org.created', orgCreated))).rejects.toThrow(
      'events are written in a transaction only',
    );
    expect(
      await unit.autocommit(({ em }) => em.insert(EventEntity, { type: 'by-statement' }).then(() => true), {
        committedEvents: (wrote) => wrote,
      }),
    ).toBe(true);
    expect(woken).toBe(1);
  });

  it('keeps no entity in the identity map: every read returns what the database holds', async () => {
    await unit.transaction(async ({ em }) => {
      await em.insert(ThingEntity, { id: 'read-twice' });
      expect(await em.findOne(ThingEntity, { id: 'read-twice' })).toEqual({ id: 'read-twice' });
      await em.nativeDelete(ThingEntity, { id: 'read-twice' });
      expect(await em.findOne(ThingEntity, { id: 'read-twice' })).toBeNull();
      expect(em.getUnitOfWork().getIdentityMap().values()).toHaveLength(0);
    });
  });
});
