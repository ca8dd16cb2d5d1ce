import { NO_TOTALS, type Totals, type WindowRange } from '@sts/analytics-domain/analytics-model';
import type {
  AnalyticsReader,
  BlockCount,
  DeviceRef,
  DeviceState,
  DeviceStateStore,
  DeviceTimeline,
  TelemetryRow,
  TelemetryStore,
} from '@sts/analytics-domain/analytics-ports';
import { insertJsonEachRow, observeInsert, type ClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import {
  dateLiteral,
  dateTimeInputValue,
  identifier,
  inList,
  sql,
  type SqlFragment,
} from '@sts/clickhouse/sql-escape';
import { DEVICE_TELEMETRY_TABLES } from './analytics-migrations';
import { singleServerTables, type AnalyticsTables } from './analytics-tables';

interface TotalsRow {
  bucket?: string | number;
  total_analyzed: string | number;
  dangerous_blocks: string | number;
  risky_warnings: string | number;
  classification_ms_sum: string | number;
}

const TELEMETRY_COLUMNS: [keyof TelemetryRow, ...(keyof TelemetryRow)[]] = [
  'org_id',
  'device_id',
  'batch_key',
  'observed_at',
  'host',
  'verdict',
  'classification_ms',
  'received_at',
];

/**
 * Analytics over ClickHouse (tables of analytics-migrations.ts). Every value enters SQL through sql-escape.
 * The summaries and series read the tables by name (on a cluster, the Distributed tables); what ingestion
 * reads to decide what to write goes where `tables` says (on a cluster, one shard's fresh replicas).
 */
export class ClickHouseAnalyticsStore implements AnalyticsReader, TelemetryStore, DeviceStateStore {
  constructor(
    private readonly client: ClickHouseClient,
    private readonly tables: AnalyticsTables = singleServerTables(client),
  ) {}

  // Reads of the rollups.

  async totals(orgId: string, range: WindowRange, deviceId: string | null): Promise<Totals> {
    const rows = await this.rows<TotalsRow>(totalsQuery(orgId, range, deviceId));
    return rows[0] ? toTotals(rows[0]) : NO_TOTALS;
  }

  async bucketTotals(
    orgId: string,
    range: WindowRange,
    deviceId: string | null,
  ): Promise<Map<number, Totals>> {
    const rows = await this.rows<TotalsRow>(bucketTotalsQuery(orgId, range, deviceId));
    const buckets = new Map<number, Totals>();
    for (const row of rows) {
      const start =
        range.granularity === 'hour'
          ? Number(row.bucket) * 1000
          : Date.parse(`${String(row.bucket)}T00:00:00Z`);
      buckets.set(start, toTotals(row));
    }
    return buckets;
  }

  // Ingestion.

  async storedBatchKeys(keys: readonly string[], since: Date): Promise<Set<string>> {
    if (keys.length === 0) return new Set();
    const rows = await this.decidingRows<{ batch_key: string }>(
      sql`SELECT DISTINCT batch_key FROM ${this.tables.from('ingested_batches')}
          WHERE received_day >= ${dateLiteral(since)} AND batch_key IN ${inList(keys)}`,
    );
    return new Set(rows.map((row) => row.batch_key));
  }

  async deletedDevices(devices: readonly DeviceRef[]): Promise<Set<string>> {
    if (devices.length === 0) return new Set();
    const rows = await this.decidingRows<{ device_id: string }>(
      sql`SELECT device_id FROM (
            SELECT device_id, argMax(state, version) AS current FROM ${this.tables.from('device_states')}
            WHERE (org_id, device_id) IN ${pairs(devices)} GROUP BY device_id
          ) WHERE current = 'deleted'`,
    );
    return new Set(rows.map((row) => row.device_id));
  }

  async deviceTimelines(devices: readonly DeviceRef[]): Promise<Map<string, DeviceTimeline>> {
    if (devices.length === 0) return new Map();
    const rows = await this.decidingRows<{
      device_id: string;
      state: DeviceState;
      version: string | number;
      enrolled_at: string | number;
    }>(
      sql`SELECT device_id, toString(state) AS state, version, enrolled_at FROM ${this.tables.from('device_state_changes')}
          WHERE (org_id, device_id) IN ${pairs(devices)}
          ORDER BY device_id, version, state`,
    );
    const timelines = new Map<
      string,
      { changes: DeviceTimeline['changes'][number][]; enrolledAt: number | null }
    >();
    for (const row of rows) {
      let timeline = timelines.get(row.device_id);
      if (!timeline) timelines.set(row.device_id, (timeline = { changes: [], enrolledAt: null }));
      timeline.changes.push({ state: row.state, at: Number(row.version) });
      const enrolledAt = Number(row.enrolled_at);
      if (enrolledAt > 0 && (timeline.enrolledAt === null || enrolledAt < timeline.enrolledAt))
        timeline.enrolledAt = enrolledAt;
    }
    return timelines;
  }

  /** Rows go as they are (no copy through `insertJsonEachRow`): they are built in column shape (bench/ingestion.bench.ts). */
  async insert(rows: readonly TelemetryRow[]): Promise<void> {
    await this.tables.insert('telemetry_events', rows, async (client, table, part) => {
      await observeInsert('telemetry_events', part.length, () =>
        client.insert({ table, columns: TELEMETRY_COLUMNS, values: part, format: 'JSONEachRow' }),
      );
    });
  }

  async blockedCounts(devices: readonly DeviceRef[], since: Date, until: Date): Promise<BlockCount[]> {
    if (devices.length === 0) return [];
    const rows = await this.decidingRows<{ org_id: string; device_id: string; blocked: string | number }>(
      sql`SELECT org_id, device_id, count() AS blocked FROM ${this.tables.from('telemetry_events')}
          WHERE (org_id, device_id) IN ${pairs(devices)}
            AND observed_at >= ${since} AND observed_at < ${until} AND verdict = 'blocked'
          GROUP BY org_id, device_id`,
    );
    return rows.map((row) => ({ orgId: row.org_id, deviceId: row.device_id, blocked: Number(row.blocked) }));
  }

  async recentlyDetected(devices: readonly DeviceRef[], since: Date): Promise<Set<string>> {
    if (devices.length === 0) return new Set();
    const rows = await this.decidingRows<{ device_id: string }>(
      sql`SELECT DISTINCT device_id FROM ${this.tables.from('threat_detections')}
          WHERE (org_id, device_id) IN ${pairs(devices)} AND detected_at >= ${since}`,
    );
    return new Set(rows.map((row) => row.device_id));
  }

  async recordDetection(detection: BlockCount & { detectedAt: Date }): Promise<void> {
    const row = {
      org_id: detection.orgId,
      device_id: detection.deviceId,
      detected_at: dateTimeInputValue(detection.detectedAt),
      dangerous_blocks: detection.blocked,
    };
    await this.tables.insert('threat_detections', [row], (client, table, rows) =>
      insertJsonEachRow(client, table, ['org_id', 'device_id', 'detected_at', 'dangerous_blocks'], rows),
    );
  }

  async hostnames(devices: readonly DeviceRef[]): Promise<Map<string, string>> {
    if (devices.length === 0) return new Map();
    const rows = await this.decidingRows<{ device_id: string; hostname: string }>(
      sql`SELECT device_id, argMax(hostname, version) AS hostname FROM ${this.tables.from('device_states')}
          WHERE (org_id, device_id) IN ${pairs(devices)} GROUP BY device_id`,
    );
    return new Map(rows.map((row) => [row.device_id, row.hostname]));
  }

  // Device lifecycle.

  /** The change first: a repeat after a failure between the two inserts only repeats the change (folded by merges). */
  async setState(
    device: DeviceRef,
    hostname: string,
    state: DeviceState,
    version: number,
    enrolledAt = 0,
  ): Promise<void> {
    const change = {
      org_id: device.orgId,
      device_id: device.deviceId,
      version,
      state,
      enrolled_at: enrolledAt,
    };
    await this.tables.insert('device_state_changes', [change], (client, table, rows) =>
      insertJsonEachRow(client, table, ['org_id', 'device_id', 'version', 'state', 'enrolled_at'], rows),
    );
    const current = { org_id: device.orgId, device_id: device.deviceId, hostname, state, version };
    await this.tables.insert('device_states', [current], (client, table, rows) =>
      insertJsonEachRow(client, table, ['org_id', 'device_id', 'hostname', 'state', 'version'], rows),
    );
  }

  /** An asynchronous mutation per table: queries leave the device out at once (its state is `deleted`). */
  async purge(device: DeviceRef): Promise<void> {
    for (const table of DEVICE_TELEMETRY_TABLES) {
      await this.tables.alter(
        table,
        sql`DELETE WHERE org_id = ${device.orgId} AND device_id = ${device.deviceId}`,
      );
    }
  }

  private async rows<Row>(query: SqlFragment): Promise<Row[]> {
    const result = await this.client.query({ query: query.text, format: 'JSONEachRow' });
    return result.json<Row>();
  }

  private async decidingRows<Row>(query: SqlFragment): Promise<Row[]> {
    const result = await this.client.query({
      query: query.text,
      format: 'JSONEachRow',
      clickhouse_settings: this.tables.decidingReads,
    });
    return result.json<Row>();
  }
}

/** The sums of a window (the summary's query); exported so that the query benchmark sends the same SQL. */
export function totalsQuery(orgId: string, range: WindowRange, deviceId: string | null): SqlFragment {
  return sql`SELECT ${sums()} FROM ${rollup(range)} WHERE ${scope(orgId, range, deviceId)}`;
}

/** The sums of each bucket of a window (the series' query). */
export function bucketTotalsQuery(orgId: string, range: WindowRange, deviceId: string | null): SqlFragment {
  const bucket = range.granularity === 'hour' ? sql`toUInt32(hour)` : sql`toString(day)`;
  return sql`SELECT ${bucket} AS bucket, ${sums()} FROM ${rollup(range)}
    WHERE ${scope(orgId, range, deviceId)} GROUP BY bucket`;
}

/**
 * The organization and the range; one device (unless deleted), or every device that is neither
 * disabled nor deleted. The device states are read with `argMax`, not `FINAL`: the newest version
 * wins whether or not the table has merged yet.
 */
function scope(orgId: string, range: WindowRange, deviceId: string | null): SqlFragment {
  const time =
    range.granularity === 'hour'
      ? sql`hour >= ${range.from} AND hour < ${range.to}`
      : sql`day >= ${dateLiteral(range.from)} AND day < ${dateLiteral(range.to)}`;
  const left = deviceId === null ? sql`current != 'active'` : sql`current = 'deleted'`;
  const device = deviceId === null ? sql`` : sql`AND device_id = ${deviceId}`;
  return sql`org_id = ${orgId} AND ${time} ${device}
    AND device_id NOT IN (
      SELECT device_id FROM (
        SELECT device_id, argMax(state, version) AS current FROM device_states
        WHERE org_id = ${orgId} GROUP BY device_id
      ) WHERE ${left}
    )`;
}

function rollup(range: WindowRange): SqlFragment {
  return range.granularity === 'hour' ? identifier('telemetry_hourly') : identifier('telemetry_daily');
}

function sums(): SqlFragment {
  return sql`sum(total_analyzed) AS total_analyzed, sum(dangerous_blocks) AS dangerous_blocks,
    sum(risky_warnings) AS risky_warnings, sum(classification_ms_sum) AS classification_ms_sum`;
}

function pairs(devices: readonly DeviceRef[]): SqlFragment {
  return inList(devices.map((device) => sql`(${device.orgId}, ${device.deviceId})`));
}

function toTotals(row: TotalsRow): Totals {
  return {
    totalAnalyzed: Number(row.total_analyzed),
    dangerousBlocks: Number(row.dangerous_blocks),
    riskyWarnings: Number(row.risky_warnings),
    classificationMsSum: Number(row.classification_ms_sum),
  };
}
