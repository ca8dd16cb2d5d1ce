import { randomUUID } from 'node:crypto';
import type { TelemetryRow } from '@sts/analytics-domain/analytics-ports';
import { runClickHouseMigrations } from '@sts/clickhouse/clickhouse-migrations';
import { createLogger } from '@sts/logger/create-logger';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { analyticsMigrations } from './analytics-migrations';
import { dropExpiredPartitions, retentionOf } from './analytics-retention';
import { clientSettingsOf, openAnalyticsClickHouse, type AnalyticsClickHouse } from './analytics-tables';
import { ClickHouseAnalyticsStore } from './clickhouse-analytics-store';

const logger = createLogger('analytics-retention-test', 'silent');
const clickhouse = testClickHouseDatabase('retention');
const target = { database: clickhouse.name, cluster: clickhouse.cluster };

const DAY_S = 86_400;

describe('analytics retention (ClickHouse)', () => {
  const now = new Date('2026-11-25T12:00:00Z');
  const orgId = randomUUID();
  const deviceId = randomUUID();

  let analytics: AnalyticsClickHouse;

  beforeAll(async () => {
    await runClickHouseMigrations({
      connection: { url: clickhouse.url, logger, settings: clientSettingsOf(target) },
      database: clickhouse.name,
      cluster: clickhouse.cluster,
      migrations: analyticsMigrations(target),
      logger,
    });
    analytics = await openAnalyticsClickHouse({ url: clickhouse.url, target });
    // Two events each 10, 40 and 100 days ago, as ingestion stores them (the views fill rollups and ledger).
    const rows: TelemetryRow[] = [10, 40, 100].flatMap((daysAgo) =>
      [0, 1].map((i) => {
        const at = Math.floor(now.getTime() / 1000) - daysAgo * DAY_S + i;
        return {
          org_id: orgId,
          device_id: deviceId,
          batch_key: `${deviceId}:${daysAgo}`,
          observed_at: at,
          host: 'example.com',
          verdict: 'allowed',
          classification_ms: 10,
          received_at: at,
        };
      }),
    );
    await new ClickHouseAnalyticsStore(analytics.client, analytics.tables).insert(rows);
  });

  afterAll(async () => {
    await analytics?.close();
    await clickhouse.drop();
  });

  const daysKept = async (table: string, column: string) => {
    const result = await clickhouse.client.query({
      query: `SELECT DISTINCT dateDiff('day', toDate(${column}), toDate('2026-11-25')) AS days_ago FROM ${table} ORDER BY days_ago`,
      format: 'JSONEachRow',
    });
    return (await result.json<{ days_ago: number | string }>()).map((row) => Number(row.days_ago));
  };

  it('drops whole expired partitions, raw rows before rollups, and keeps the rest', async () => {
    const retention = retentionOf({
      TELEMETRY_RAW_RETENTION_DAYS: 35,
      TELEMETRY_HOURLY_RETENTION_DAYS: 90,
      TELEMETRY_DAILY_RETENTION_DAYS: 400,
    });
    expect(await daysKept('telemetry_events', 'observed_at')).toEqual([10, 40, 100]);

    const dropped = await dropExpiredPartitions(
      clickhouse.client,
      clickhouse.name,
      retention,
      now,
      logger,
      analytics.tables,
    );

    expect(await daysKept('telemetry_events', 'observed_at')).toEqual([10]);
    expect(await daysKept('ingested_batches', 'received_day')).toEqual([10]);
    expect(await daysKept('telemetry_hourly', 'hour')).toEqual([10, 40]);
    expect(await daysKept('telemetry_daily', 'day')).toEqual([10, 40, 100]);
    // Raw and ledger 40 and 100 days, hourly 100 days: five day partitions.
    expect(dropped).toBe(5);
    // Nothing more to drop on the next pass.
    expect(
      await dropExpiredPartitions(
        clickhouse.client,
        clickhouse.name,
        retention,
        now,
        logger,
        analytics.tables,
      ),
    ).toBe(0);
  });
});
