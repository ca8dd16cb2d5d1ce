import { redactedError } from '@sts/logger/redacted-error';
import {
  ClickHouseLogLevel,
  createClient,
  type ClickHouseClient,
  type ClickHouseSettings,
  type ErrorLogParams,
  type Logger as ClientLogger,
  type LogParams,
  type WarnLogParams,
} from '@clickhouse/client';
import type { Logger } from '@sts/logger/create-logger';
import {
  clickhouseInsertFailures,
  clickhouseInsertRows,
  clickhouseInsertSeconds,
} from '@sts/observability/metrics';
import { inSpan, SpanKind } from '@sts/observability/trace-context';
import { identifier } from './sql-escape';

export type { ClickHouseClient };

export interface ClickHouseClientOptions {
  /** CLICKHOUSE_URL: `http[s]://[user:password@]host:port[/database]`. */
  url: string;
  /** Database for unqualified table names; overrides one given in the URL. Default: `default`. */
  database?: string;
  /** Per-request timeout. Default 30 s. */
  requestTimeoutMs?: number;
  /** Settings sent with every request besides {@link CLICKHOUSE_SETTINGS} (a topology's, for instance). */
  settings?: ClickHouseSettings;
  /** Receives the client library's own warnings and errors. Without it they are dropped: every failed
   *  call also rejects, and the caller decides what to log. */
  logger?: Logger;
}

/**
 * Settings sent with every request. Only settings that ClickHouse 18.16 knows may be sent: it rejects
 * unknown ones ("Unknown setting ...", code 115), and that includes `param_*` (no query parameters).
 */
export const CLICKHOUSE_SETTINGS: ClickHouseSettings = {
  // 64-bit integers (count(), uniq(), sum() of integers, UInt64/Int64 columns) come back as JSON strings.
  // That is 18.16's default; ClickHouse 25.8 changed the default to bare numbers, which JavaScript would
  // round past 2^53. Pinned so both versions return the same JSON.
  output_format_json_quote_64bit_integers: 1,
};

/** A client for the ClickHouse HTTP interface, configured to behave the same on 18.16 and current versions. */
export function createClickHouseClient(options: ClickHouseClientOptions): ClickHouseClient {
  const { logger } = options;
  // The client lets a database in the URL path win over the `database` option (and warns on the
  // console): drop the path when a database is given explicitly.
  const url = new URL(options.url);
  if (options.database !== undefined) url.pathname = '/';
  return createClient({
    url,
    ...(options.database === undefined ? {} : { database: options.database }),
    request_timeout: options.requestTimeoutMs ?? 30_000,
    clickhouse_settings: { ...CLICKHOUSE_SETTINGS, ...options.settings },
    log: logger
      ? { LoggerClass: pinoAdapter(logger), level: ClickHouseLogLevel.WARN }
      : { level: ClickHouseLogLevel.OFF },
  });
}

function pinoAdapter(logger: Logger): new () => ClientLogger {
  const log = logger.child({ component: 'clickhouse-client' });
  return class implements ClientLogger {
    trace({ module, message, args }: LogParams): void {
      log.trace({ module, args }, message);
    }
    debug({ module, message, args }: LogParams): void {
      log.debug({ module, args }, message);
    }
    info({ module, message, args }: LogParams): void {
      log.info({ module, args }, message);
    }
    warn({ module, message, err }: WarnLogParams): void {
      log.warn({ module, err: err && redactedError(err) }, message);
    }
    error({ module, message, err }: ErrorLogParams): void {
      log.error({ module, err: redactedError(err) }, message);
    }
  };
}

/**
 * Inserts rows as JSONEachRow into `table` (`name` or `database.name`), naming the columns:
 *
 * - ClickHouse 18.16 fills a column that the INSERT does not name with its DEFAULT expression, but a
 *   field merely missing from a JSONEachRow row with the type's zero value (`0000-00-00`, `''`, 0) —
 *   current versions apply the DEFAULT in both cases. Naming the columns and requiring every row to
 *   carry each of them gives the same result on both.
 * - Fields not in `columns` are left out (18.16 rejects unknown fields).
 * - `Date` objects are refused: JSON would carry ISO 8601 text, which 18.16 cannot parse into DateTime.
 *   Use `dateTimeInputValue(date)` (epoch seconds) for DateTime, `'YYYY-MM-DD'` for Date.
 *
 * The client library puts table and column names into the query unescaped, hence the checks here.
 */
export async function insertJsonEachRow<Row extends Record<string, unknown>>(
  client: ClickHouseClient,
  table: string,
  columns: readonly (keyof Row & string)[],
  rows: readonly Row[],
): Promise<void> {
  const [first, ...rest] = columns.map((column) => identifier(column).text);
  if (first === undefined) throw new TypeError('insertJsonEachRow needs at least one column');
  const tableName = identifier(...table.split('.')).text;
  if (rows.length === 0) return;
  const values = rows.map((row, index) => {
    const picked: Record<string, unknown> = {};
    for (const column of columns) {
      const value = row[column];
      if (value === undefined) throw new TypeError(`row ${index} has no value for column ${column}`);
      if (value instanceof Date) {
        throw new TypeError(`row ${index}, column ${column}: pass dateTimeInputValue(date), not a Date`);
      }
      picked[column] = value;
    }
    return picked;
  });
  await observeInsert(table, values.length, () =>
    client.insert({ table: tableName, columns: [first, ...rest], values, format: 'JSONEachRow' }),
  );
}

/**
 * Every insert into ClickHouse goes through here: rows and duration counted per table (failures
 * apart), and a client span when tracing is on.
 */
export async function observeInsert<T>(table: string, rows: number, insert: () => Promise<T>): Promise<T> {
  const stopTimer = clickhouseInsertSeconds.startTimer({ table });
  try {
    const result = await inSpan(
      `INSERT ${table}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system.name': 'clickhouse',
          'db.collection.name': table,
          'db.operation.batch.size': rows,
        },
      },
      insert,
    );
    clickhouseInsertRows.inc({ table }, rows);
    return result;
  } catch (error) {
    clickhouseInsertFailures.inc({ table });
    throw error;
  } finally {
    stopTimer();
  }
}
