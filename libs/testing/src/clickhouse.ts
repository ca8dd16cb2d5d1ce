import { randomBytes } from 'node:crypto';
import { createClickHouseClient, type ClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { identifier, sql } from '@sts/clickhouse/sql-escape';

export interface TestClickHouseDatabase {
  url: string;
  /** Not created here: the code under test creates it (as a service does at start). */
  name: string;
  /** A client on the database, for assertions. */
  client: ClickHouseClient;
  drop(): Promise<void>;
}

/** A ClickHouse database name per test file (CLICKHOUSE_URL, default local), dropped at the end. */
export function testClickHouseDatabase(label = 'test'): TestClickHouseDatabase {
  const url = process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
  const name = `sts_${label
    .replace(/[^a-z0-9]/gi, '')
    .toLowerCase()
    .slice(0, 20)}_${randomBytes(5).toString('hex')}`;
  const client = createClickHouseClient({ url, database: name });
  return {
    url,
    name,
    client,
    drop: async () => {
      await client.close();
      const admin = createClickHouseClient({ url, database: 'default' });
      try {
        await admin.command({ query: sql`DROP DATABASE IF EXISTS ${identifier(name)}`.text });
      } finally {
        await admin.close();
      }
    },
  };
}
