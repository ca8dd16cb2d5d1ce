import { createClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { migrationProgress, runClickHouseMigrations } from '@sts/clickhouse/clickhouse-migrations';
import { readClusterShards } from '@sts/clickhouse/cluster-shards';
import { sql } from '@sts/clickhouse/sql-escape';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { analyticsMigrations } from './analytics-migrations';
import { clientSettingsOf } from './analytics-tables';

const clickhouse = testClickHouseDatabase('migrations');
const target = { database: clickhouse.name, cluster: clickhouse.cluster };
const migrations = analyticsMigrations(target);
const migrate = () =>
  runClickHouseMigrations({
    connection: { url: clickhouse.url, settings: clientSettingsOf(target) },
    database: clickhouse.name,
    cluster: clickhouse.cluster,
    migrations,
  });

afterAll(async () => {
  await clickhouse.drop();
});

/**
 * The analytics schema on either topology (on the cluster tier, every server of the cluster), migrated by
 * two processes starting at the same moment, as two replicas of the service do.
 */
describe('analytics migrations (ClickHouse)', () => {
  it('apply once when two processes migrate together, every table on every server, and again change nothing', async () => {
    const both = await Promise.all([migrate(), migrate()]);
    const ids = migrations.map((migration) => migration.id);
    for (const result of both) expect([...result.applied, ...result.skipped].sort()).toEqual([...ids].sort());

    // Seven tables and three views (on a cluster a local and a Distributed table each), and the ledger.
    const expected = clickhouse.cluster === null ? 7 + 3 + 1 : 7 * 2 + 3 + 1;
    const servers =
      clickhouse.cluster === null
        ? [null]
        : (await readClusterShards(clickhouse.client, clickhouse.cluster, clickhouse.url)).flatMap((shard) =>
            shard.replicas.split('|'),
          );
    for (const server of servers) {
      const tables = server === null ? sql`system.tables` : sql`remote(${server}, system, tables)`;
      const result = await clickhouse.client.query({
        query: sql`SELECT count() AS n FROM ${tables} WHERE database = ${clickhouse.name}`.text,
        format: 'JSONEachRow',
      });
      const [row] = await result.json<{ n: string | number }>();
      expect({ server, tables: Number(row?.n) }).toEqual({ server, tables: expected });
    }

    const ledger = createClickHouseClient({ url: clickhouse.url, database: clickhouse.name });
    const progress = await migrationProgress(ledger).finally(() => ledger.close());
    expect(Object.fromEntries(progress)).toEqual(
      Object.fromEntries(migrations.map((migration) => [migration.id, migration.statements.length])),
    );
    expect(await migrate()).toEqual({ applied: [], skipped: ids });
  }, 120_000);
});
