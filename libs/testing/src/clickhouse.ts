import { randomBytes } from 'node:crypto';
import { createClickHouseClient, type ClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { identifier, sql } from '@sts/clickhouse/sql-escape';

export interface TestClickHouseDatabase {
  url: string;
  /**
   * CLICKHOUSE_CLUSTER of the run (the cluster tier sets it; null on a single server): the code under
   * test makes the database and its tables on every server of that cluster.
   */
  cluster: string | null;
  /** Not created here: the code under test creates it (as a service does at start). */
  name: string;
  /** A client on the database, for assertions. */
  client: ClickHouseClient;
  drop(): Promise<void>;
}

/**
 * A ClickHouse database name per test file (CLICKHOUSE_URL, default local; CLICKHOUSE_CLUSTER when the
 * run is on a cluster), dropped at the end.
 */
export function testClickHouseDatabase(label = 'test'): TestClickHouseDatabase {
  const url = process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
  const cluster = process.env.CLICKHOUSE_CLUSTER || null;
  const name = `sts_${label
    .replace(/[^a-z0-9]/gi, '')
    .toLowerCase()
    .slice(0, 20)}_${randomBytes(5).toString('hex')}`;
  const client = createClickHouseClient({ url, database: name });
  return {
    url,
    cluster,
    name,
    client,
    drop: async () => {
      await client.close();
      await dropClickHouseDatabase(url, name, cluster);
    },
  };
}

/**
 * Drops a test's database (on every server of `cluster`, when given). ClickHouse 18.16 takes its time over a
 * database of the analytics schema (27 s seen on a loaded machine, past the client's usual 30 s now and then),
 * so the drop may take up to 3 minutes.
 */
export async function dropClickHouseDatabase(
  url: string,
  name: string,
  cluster: string | null,
): Promise<void> {
  const admin = createClickHouseClient({ url, database: 'default', requestTimeoutMs: 180_000 });
  try {
    await admin.command({
      query: (cluster === null
        ? sql`DROP DATABASE IF EXISTS ${identifier(name)}`
        : sql`DROP DATABASE IF EXISTS ${identifier(name)} ON CLUSTER ${identifier(cluster)}`
      ).text,
      clickhouse_settings: { wait_end_of_query: 1 },
    });
  } finally {
    await admin.close();
  }
}
