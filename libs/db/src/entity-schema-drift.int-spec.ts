import { EntitySchema } from '@mikro-orm/postgresql';
import { Migration } from '@mikro-orm/migrations';
import { createLogger } from '@sts/logger/create-logger';
import { createTestDatabase } from '@sts/testing/postgres';
import { entitySchemaDrift, type EntitySchemaDriftOptions } from './entity-schema-drift';

class Things extends Migration {
  override up(): void {
    this.addSql(`create schema if not exists drift_test;
      create table drift_test.things (
        id uuid primary key,
        name text not null,
        state text not null check (state in ('new', 'done')),
        done_at timestamptz null
      );
      create index things_open_idx on drift_test.things (name) where done_at is null;`);
  }
}

interface Thing {
  id: string;
  name: string;
  state: 'new' | 'done';
  doneAt: Date | null;
}

/** The entity of the table above, with `change` applied to its metadata. */
function thingEntity(
  change: (meta: ConstructorParameters<typeof EntitySchema<Thing>>[0]) => void = () => {},
) {
  const meta: ConstructorParameters<typeof EntitySchema<Thing>>[0] = {
    name: 'Thing',
    tableName: 'things',
    properties: {
      id: { type: 'uuid', primary: true },
      name: { type: 'text' },
      state: { enum: true, items: ['new', 'done'], columnType: 'text' },
      doneAt: { type: 'datetime', fieldName: 'done_at', nullable: true },
    },
    indexes: [
      {
        name: 'things_open_idx',
        expression: (table, _columns, name) =>
          `CREATE INDEX ${name} ON ${String(table)} USING btree (name) WHERE (done_at IS NULL)`,
      },
    ],
  };
  change(meta);
  return new EntitySchema<Thing>(meta);
}

describe('entity schema drift (PostgreSQL)', () => {
  const drift = async (entity: EntitySchema<Thing>, ignore?: EntitySchemaDriftOptions['ignore']) => {
    const database = await createTestDatabase('drift');
    try {
      return await entitySchemaDrift({
        databaseUrl: database.url,
        schema: 'drift_test',
        entities: [entity as EntitySchema],
        migrations: [{ name: '0001_things', class: Things }],
        logger: createLogger('drift-test', 'silent'),
        ignore,
      });
    } finally {
      await database.drop();
    }
  };

  it('is empty when the entities describe the migrated schema', async () => {
    expect(await drift(thingEntity())).toEqual([]);
  });

  it("reports a property that differs from its column, in the schema generator's own words", async () => {
    expect(
      await drift(
        thingEntity((meta) => {
          meta.properties!.doneAt = { type: 'datetime', fieldName: 'done_at' };
        }),
      ),
    ).toContainEqual(expect.stringMatching(/alter column "done_at" set not null/));
    expect(
      await drift(
        thingEntity((meta) => {
          meta.properties!.state = { enum: true, items: ['new', 'done', 'failed'], columnType: 'text' };
        }),
      ),
    ).not.toEqual([]);
  });

  it('reports a partial index whose definition differs, which the generator compares by name only', async () => {
    expect(
      await drift(
        thingEntity((meta) => {
          meta.indexes = [
            {
              name: 'things_open_idx',
              expression: (table, _columns, name) =>
                `CREATE INDEX ${name} ON ${String(table)} USING btree (name) WHERE (done_at IS NOT NULL)`,
            },
          ];
        }),
      ),
    ).toEqual([expect.stringMatching(/^index things_open_idx of things: the entity says/)]);
  });

  it('leaves out only what the ignore list matches', async () => {
    const withoutState = thingEntity((meta) => {
      delete (meta.properties as Partial<typeof meta.properties>)!.state;
    });
    expect(await drift(withoutState)).toEqual([expect.stringMatching(/drop column "state"/)]);
    expect(await drift(withoutState, [{ statement: /drop column "state"/, why: 'a test' }])).toEqual([]);
  });
});
