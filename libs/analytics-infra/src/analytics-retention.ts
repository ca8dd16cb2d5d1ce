import type { ClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { inList, integerLiteral, sql } from '@sts/clickhouse/sql-escape';
import type { Logger } from '@sts/logger/create-logger';
import type { AnalyticsSchemaTarget, AnalyticsTable } from './analytics-migrations';
import { singleServerTables, type AnalyticsTables } from './analytics-tables';

/** A table partitioned by UTC day (`toYYYYMMDD`) or month (`toYYYYMM`), and how many days it keeps. */
export interface PartitionRetention {
  table: AnalyticsTable;
  partitionedBy: 'day' | 'month';
  days: number;
}

/** What each table of analytics-migrations.ts keeps: raw rows and their ledger shortest, daily rollups longest. */
export function retentionOf(config: {
  TELEMETRY_RAW_RETENTION_DAYS: number;
  TELEMETRY_HOURLY_RETENTION_DAYS: number;
  TELEMETRY_DAILY_RETENTION_DAYS: number;
}): PartitionRetention[] {
  return [
    { table: 'telemetry_events', partitionedBy: 'day', days: config.TELEMETRY_RAW_RETENTION_DAYS },
    { table: 'ingested_batches', partitionedBy: 'day', days: config.TELEMETRY_RAW_RETENTION_DAYS },
    { table: 'telemetry_hourly', partitionedBy: 'day', days: config.TELEMETRY_HOURLY_RETENTION_DAYS },
    { table: 'telemetry_daily', partitionedBy: 'month', days: config.TELEMETRY_DAILY_RETENTION_DAYS },
  ];
}

/**
 * Drops whole partitions older than each table's retention: no `TTL` (ClickHouse 18.16 has none for
 * rows of this kind), no mutations, no rewritten parts. A month partition goes once its last day is
 * older than the retention.
 */
export async function dropExpiredPartitions(
  client: ClickHouseClient,
  database: AnalyticsSchemaTarget['database'],
  tables: readonly PartitionRetention[],
  now: Date,
  logger: Logger,
  placement: AnalyticsTables = singleServerTables(client),
): Promise<number> {
  const byPartsName = new Map(tables.map((rule) => [placement.parts.nameOf(rule.table), rule]));
  const result = await client.query({
    query: sql`SELECT DISTINCT table, partition FROM ${placement.parts.from}
               WHERE database = ${database} AND active AND table IN ${inList([...byPartsName.keys()])}`.text,
    format: 'JSONEachRow',
    clickhouse_settings: { skip_unavailable_shards: 1 },
  });
  const parts = await result.json<{ table: string; partition: string }>();
  let dropped = 0;
  for (const { table, partition } of parts) {
    const rule = byPartsName.get(table);
    if (!rule || !/^\d{6}(\d{2})?$/.test(partition)) continue;
    const cutoff = new Date(now.getTime() - rule.days * 86_400_000);
    if (partitionEnd(partition, rule.partitionedBy) > cutoff) continue;
    // The partition key is a number (toYYYYMMDD, toYYYYMM): 18.16 refuses it as a string.
    await placement.alter(rule.table, sql`DROP PARTITION ${integerLiteral(Number(partition))}`);
    dropped++;
    logger.info({ table: rule.table, partition }, 'dropped an expired partition');
  }
  return dropped;
}

/** The instant a partition's last day ends (UTC). */
function partitionEnd(partition: string, by: 'day' | 'month'): Date {
  const year = Number(partition.slice(0, 4));
  const month = Number(partition.slice(4, 6)) - 1;
  return by === 'day'
    ? new Date(Date.UTC(year, month, Number(partition.slice(6, 8)) + 1))
    : new Date(Date.UTC(year, month + 1, 1));
}
