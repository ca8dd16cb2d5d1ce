import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ClickHouseSettings, PingResult } from '@clickhouse/client';
import { CLICKHOUSE_SETTINGS, type ClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { identifier, numberLiteral, stringLiteral } from '@sts/clickhouse/sql-escape';

/**
 * A current ClickHouse in the test process: chDB (`tools/chdb`, installed by scripts/ensure-chdb.sh, not by the
 * root package.json), behind the part of @clickhouse/client's `ClickHouseClient` that the analytics store,
 * retention, migrations and `insertJsonEachRow` use, so that the same production code runs on it and on the
 * server (ClickHouse 18.16). Tests only.
 *
 *   const chdb = startChdb();
 *   const client = chdb.client({ database: 'analytics' });
 *   ...
 *   await chdb.close(); // every client's session, then the data directory
 *
 * What each client does:
 * - `query({ query, format: 'JSONEachRow', clickhouse_settings? })` → `.json()` (rows) / `.text()`;
 * - `command({ query, clickhouse_settings? })`, output dropped;
 * - `insert({ table, columns?, values, format: 'JSONEachRow' })`, an array of rows (the same
 *   `INSERT INTO table (columns) FORMAT JSONEachRow` the HTTP client sends, the rows inline);
 * - `ping({ select? })` (always a `SELECT 1`), `close()`.
 * Anything else (other formats, streams, query parameters, `exec`) is refused with a TypeError rather
 * than half-imitated.
 *
 * Like `createClickHouseClient`, a client sends CLICKHOUSE_SETTINGS with every statement unless given
 * other `clickhouse_settings`; a call's own settings apply to that call only (parameters of the HTTP
 * interface among them, such as `wait_end_of_query`, are left out). Each client has a chDB session
 * of its own on the one data directory (its database and settings are its own, the tables shared), and runs
 * its calls one at a time, in order.
 *
 * Errors: chDB's own (`Code: 60. DB::Exception: ... (UNKNOWN_TABLE)`), as a {@link ChdbQueryError} carrying
 * the statement.
 */
export interface ChdbServer {
  /** The engine's version, e.g. `26.7.2.1`. */
  readonly version: string;
  /** The chdb package's version. */
  readonly chdbVersion: string;
  /** The data directory (temporary, removed by `close`). */
  readonly path: string;
  /** A client on `database` (default `default`); the database need not exist until the first call. */
  client(options?: { database?: string; clickhouse_settings?: ClickHouseSettings }): ClickHouseClient;
  /** Closes every client's session and removes the data directory. */
  close(): Promise<void>;
}

export class ChdbQueryError extends Error {
  /** ClickHouse's error code, e.g. `60`, when chDB gave one. */
  readonly code: string | undefined;
  /** ClickHouse's error name, e.g. `UNKNOWN_TABLE`, when the message names it. */
  readonly type: string | undefined;

  constructor(
    message: string,
    readonly query: string,
    options: { cause: unknown; code?: string | undefined },
  ) {
    super(message, { cause: options.cause });
    this.name = 'ChdbQueryError';
    this.code = options.code;
    this.type = /\(([A-Z][A-Z0-9_]+)\)\s*$/.exec(message)?.[1];
  }
}

/** Where scripts/ensure-chdb.sh installs chDB: a package of its own, outside the workspace's dependencies. */
export const CHDB_PACKAGE_DIR = resolve(__dirname, '../../../tools/chdb');

// The part of chDB's API used here (its own types are in tools/chdb, which typecheck does not need).
interface ChdbResult {
  text(): string;
}
interface ChdbSession {
  queryAsync(query: string, options?: { format?: string }): Promise<ChdbResult>;
  close(): void;
}
interface ChdbModule {
  Session: new (path: string, options?: { connectionArgs?: readonly string[] }) => ChdbSession;
  version(): { chdb: string; libchdb: string };
  drainPending(): Promise<void>;
}

let loaded: ChdbModule | undefined;

/** chDB from tools/chdb/node_modules; a clear error, not a skip, when it is not installed. */
export function loadChdb(): ChdbModule {
  if (loaded) return loaded;
  const entry = join(CHDB_PACKAGE_DIR, 'node_modules', 'chdb');
  if (!existsSync(join(entry, 'package.json'))) {
    throw new Error(
      `chDB is not installed (no ${entry}): run scripts/ensure-chdb.sh, which installs it from tools/chdb/package-lock.json`,
    );
  }
  try {
    // Node's own require (not jest's module registry): the engine is a native library loaded once per process.
    loaded = createRequire(join(CHDB_PACKAGE_DIR, 'package.json'))(entry) as ChdbModule;
  } catch (error) {
    throw new Error(
      `chDB in ${entry} failed to load (${String(error)}): run scripts/ensure-chdb.sh to reinstall it`,
      { cause: error },
    );
  }
  return loaded;
}

/**
 * Server configuration as a server has it by default: chDB's own default of 2 background threads runs a
 * mutation part after part, seconds for a purge of a few dozen partitions (16 is ClickHouse's default).
 */
const ENGINE_ARGS = ['--background_pool_size=16'];

let running: ChdbServer | undefined;

/**
 * Starts chDB on a new temporary data directory. The engine binds one data directory per process: one
 * server at a time, so close the previous one first.
 */
export function startChdb(): ChdbServer {
  if (running) throw new Error('a chDB server is already running in this process: close it first');
  const chdb = loadChdb();
  const path = mkdtempSync(join(tmpdir(), 'sts-chdb-'));
  const sessions = new Set<ChdbSession>();
  const clients = new Set<ChdbClient>();
  const versions = chdb.version();
  let closed = false;
  const server: ChdbServer = {
    version: versions.libchdb.replace(/"/g, ''),
    chdbVersion: versions.chdb,
    path,
    client(options = {}) {
      if (closed) throw new Error('this chDB server is closed');
      const session = new chdb.Session(path, { connectionArgs: ENGINE_ARGS });
      sessions.add(session);
      const client = new ChdbClient(
        session,
        options.database ?? 'default',
        options.clickhouse_settings ?? CLICKHOUSE_SETTINGS,
        () => sessions.delete(session),
      );
      clients.add(client);
      // Only the subset documented above: enough for the code under test, checked by it.
      return client as unknown as ClickHouseClient;
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const client of clients) await client.close();
      for (const session of sessions) session.close();
      await chdb.drainPending();
      rmSync(path, { recursive: true, force: true, maxRetries: 5 });
      running = undefined;
    },
  };
  running = server;
  return server;
}

interface ResultSetLike {
  query_id: string;
  response_headers: Record<string, string>;
  text(): Promise<string>;
  json<T>(): Promise<T[]>;
  close(): void;
}

class ChdbClient {
  /** Settings this session has SET, as rendered. */
  private readonly applied = new Map<string, string>();
  /** Calls run one at a time: the session's database and settings are state. */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly session: ChdbSession,
    private readonly database: string,
    private readonly settings: ClickHouseSettings,
    private readonly onClose: () => void,
  ) {
    identifier(database); // a TypeError for a name that is not one
  }

  async query(params: {
    query: string;
    format?: string;
    clickhouse_settings?: ClickHouseSettings;
    query_params?: unknown;
  }): Promise<ResultSetLike> {
    const format = params.format ?? 'JSON';
    if (format !== 'JSONEachRow') {
      throw new TypeError(`chdb-client: query format ${format} is not supported (JSONEachRow only)`);
    }
    refuseQueryParams(params);
    // As the HTTP client sends it.
    const statement = `${withoutTrailingSemicolons(params.query)} \nFORMAT ${format}`;
    const text = await this.run(statement, params.clickhouse_settings);
    const query_id = randomUUID();
    return {
      query_id,
      response_headers: {},
      text: async () => text,
      json: async <T>() =>
        text
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as T),
      close: () => undefined,
    };
  }

  async command(params: {
    query: string;
    clickhouse_settings?: ClickHouseSettings;
    query_params?: unknown;
  }): Promise<{ query_id: string; response_headers: Record<string, string> }> {
    refuseQueryParams(params);
    await this.run(withoutTrailingSemicolons(params.query), params.clickhouse_settings);
    return { query_id: randomUUID(), response_headers: {} };
  }

  async insert(params: {
    table: string;
    values: unknown;
    format?: string;
    columns?: unknown;
    clickhouse_settings?: ClickHouseSettings;
  }): Promise<{ executed: boolean; query_id: string; response_headers: Record<string, string> }> {
    if (params.format !== 'JSONEachRow') {
      throw new TypeError(
        `chdb-client: insert format ${String(params.format)} is not supported (JSONEachRow only)`,
      );
    }
    if (!Array.isArray(params.values)) {
      throw new TypeError('chdb-client: insert takes an array of rows (no streams)');
    }
    const rows: unknown[] = params.values;
    if (rows.length === 0) return { executed: false, query_id: '', response_headers: {} };
    let columns = '';
    if (params.columns !== undefined) {
      if (!Array.isArray(params.columns) || !params.columns.every((c) => typeof c === 'string')) {
        throw new TypeError('chdb-client: insert columns must be an array of names');
      }
      const names: string[] = params.columns;
      if (names.length > 0) columns = ` (${names.join(', ')})`;
    }
    // The statement the HTTP client sends, with the rows (one JSON object a line) as its inline data.
    const data = rows.map((row) => JSON.stringify(row)).join('\n');
    await this.run(
      `INSERT INTO ${params.table.trim()}${columns} FORMAT JSONEachRow\n${data}`,
      params.clickhouse_settings,
    );
    return { executed: true, query_id: randomUUID(), response_headers: {} };
  }

  async ping(_params?: { select?: boolean }): Promise<PingResult> {
    try {
      await this.run('SELECT 1', undefined);
      return { success: true };
    } catch (error) {
      return { success: false, error: error as Error };
    }
  }

  async exec(): Promise<never> {
    throw new TypeError('chdb-client: exec is not supported');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue.catch(() => undefined);
    this.session.close();
    this.onClose();
  }

  /** Runs one statement in this client's database with its settings; resolves to what it printed. */
  private run(statement: string, callSettings: ClickHouseSettings | undefined): Promise<string> {
    if (this.closed) return Promise.reject(new Error('chdb-client: the client is closed'));
    const next = this.queue.then(async () => {
      const wanted = this.wantedSettings(callSettings);
      const setup = [`USE ${identifier(this.database).text}`, ...this.settingChanges(wanted)];
      try {
        await this.execute(setup.join('; '));
      } catch (error) {
        // Some of the SETs may have run: SET (or reset) each of them again next time.
        for (const name of wanted.keys()) this.applied.set(name, '');
        throw error;
      }
      this.applied.clear();
      for (const [name, value] of wanted) this.applied.set(name, value);
      return this.execute(statement);
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  private wantedSettings(callSettings: ClickHouseSettings | undefined): Map<string, string> {
    const wanted = new Map<string, string>();
    for (const [name, value] of Object.entries({ ...this.settings, ...callSettings })) {
      if (value !== undefined && !HTTP_INTERFACE_PARAMETERS.has(name)) {
        wanted.set(name, settingValue(name, value));
      }
    }
    return wanted;
  }

  /** SET for each setting wanted that the session lacks, back to DEFAULT for those no longer wanted. */
  private settingChanges(wanted: ReadonlyMap<string, string>): string[] {
    const changes: string[] = [];
    for (const name of this.applied.keys()) {
      if (!wanted.has(name)) changes.push(`SET ${identifier(name).text} = DEFAULT`);
    }
    for (const [name, value] of wanted) {
      if (this.applied.get(name) !== value) changes.push(`SET ${identifier(name).text} = ${value}`);
    }
    return changes;
  }

  private async execute(statement: string): Promise<string> {
    try {
      return (await this.session.queryAsync(statement, { format: 'JSONEachRow' })).text();
    } catch (error) {
      const { message, clickhouseCode } = error as { message?: string; clickhouseCode?: number | string };
      throw new ChdbQueryError(message ?? String(error), statement, {
        cause: error,
        code: clickhouseCode === undefined ? undefined : String(clickhouseCode),
      });
    }
  }
}

/**
 * Parameters of the HTTP interface that @clickhouse/client sends among the settings (its
 * `ClickHouseHTTPSettings`): not settings, so not SET here. In process there is nothing to wait for or
 * compress: a statement's answer comes when it has ended (`wait_end_of_query`).
 */
const HTTP_INTERFACE_PARAMETERS = new Set([
  'wait_end_of_query',
  'buffer_size',
  'compress',
  'decompress',
  'quota_key',
  'stacktrace',
  'default_format',
  'session_timeout',
  'session_check',
]);

function settingValue(name: string, value: unknown): string {
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value === 'number') return numberLiteral(value).text;
  if (typeof value === 'string') return stringLiteral(value).text;
  throw new TypeError(`chdb-client: setting ${name} must be a number, string or boolean`);
}

function refuseQueryParams(params: { query_params?: unknown }): void {
  // ClickHouse 18.16 has no query parameters, so the code under test never sends any.
  if (params.query_params !== undefined) throw new TypeError('chdb-client: query_params are not supported');
}

function withoutTrailingSemicolons(query: string): string {
  return query.trim().replace(/;+$/, '');
}
