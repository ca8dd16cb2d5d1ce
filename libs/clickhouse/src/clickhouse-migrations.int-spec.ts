import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { clickhouseEnv } from '@sts/config/env-fragments';
import { loadConfig } from '@sts/config/load-config';
import { createClickHouseClient, insertJsonEachRow, type ClickHouseClient } from './clickhouse-client';
import {
  MIGRATIONS_TABLE,
  migrationProgress,
  runClickHouseMigrations,
  type ClickHouseMigration,
} from './clickhouse-migrations';
import {
  dateTimeInputValue,
  dateTimeLiteral,
  identifier,
  inList,
  joinSql,
  likePattern,
  numberLiteral,
  sql,
  stringLiteral,
  type SqlFragment,
} from './sql-escape';

// Against the real ClickHouse (18.16 from Debian here, current versions elsewhere), in a database of
// its own that afterAll drops.
const { CLICKHOUSE_URL } = loadConfig(z.object(clickhouseEnv));
const database = `sts_test_ch_${randomBytes(6).toString('hex')}`;
const connection = { url: CLICKHOUSE_URL };

const MIGRATIONS: ClickHouseMigration[] = [
  {
    id: '001_events',
    statements: [
      `CREATE TABLE IF NOT EXISTS events (
        org_id String,
        name String,
        ts DateTime,
        day Date DEFAULT toDate(ts),
        hits UInt64
      ) ENGINE = MergeTree() PARTITION BY toYYYYMM(day) ORDER BY (org_id, ts)`,
    ],
  },
  {
    id: '002_event_tags',
    statements: [
      // No IF NOT EXISTS on 18.16: safe because the runner records each statement.
      'ALTER TABLE events ADD COLUMN tags Array(String)',
      `CREATE TABLE IF NOT EXISTS daily_hits (org_id String, day Date, hits UInt64)
        ENGINE = SummingMergeTree() ORDER BY (org_id, day)`,
    ],
  },
];

const HOSTILE = [
  '',
  "'",
  "O'Brien",
  '\\',
  "\\'",
  "'; DROP TABLE x; --",
  "x' OR '1'='1",
  "') , ('injected', 'row",
  '\0',
  'a\0b\0',
  '\\0 \\N \\x41 \\u0041',
  'line1\nline2\r\n\ttab',
  '\b\f\v\x07\x1b\x7f\x01\x1f',
  '`backticks` "double"',
  '/* c */ -- c # c',
  '{name:String} ? $1',
  'é ü ß 中文 العربية עברית',
  '😀👍🏽🇩🇪',
  '\u2028\u2029\u200b\ufeff\u0085',
  Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join(''),
];

let client: ClickHouseClient;

beforeAll(() => {
  client = createClickHouseClient({ ...connection, database });
});

afterAll(async () => {
  await client.close();
  // 18.16 can take over 30 s to drop a database on a loaded machine (@sts/testing's dropClickHouseDatabase says more).
  const admin = createClickHouseClient({ ...connection, requestTimeoutMs: 180_000 });
  try {
    await admin.command({ query: sql`DROP DATABASE IF EXISTS ${identifier(database)}`.text });
  } finally {
    await admin.close();
  }
});

async function rows<T>(query: SqlFragment): Promise<T[]> {
  const result = await client.query({ query: query.text, format: 'JSONEachRow' });
  return result.json<T>();
}

describe('runClickHouseMigrations', () => {
  it('creates the database and applies the migrations in order', async () => {
    const result = await runClickHouseMigrations({ connection, database, migrations: MIGRATIONS });
    expect(result).toEqual({ applied: ['001_events', '002_event_tags'], skipped: [] });

    const tables = await rows<{ name: string; engine: string }>(
      sql`SELECT name, engine FROM system.tables WHERE database = ${database} ORDER BY name`,
    );
    expect(tables).toEqual([
      { name: 'daily_hits', engine: 'SummingMergeTree' },
      { name: 'events', engine: 'MergeTree' },
      { name: MIGRATIONS_TABLE, engine: 'MergeTree' },
    ]);
    const columns = await rows<{ name: string; type: string }>(
      sql`SELECT name, type FROM system.columns WHERE database = ${database} AND table = 'events' ORDER BY name`,
    );
    expect(columns).toContainEqual({ name: 'tags', type: 'Array(String)' });
    expect(Object.fromEntries(await migrationProgress(client))).toEqual({
      '001_events': 1,
      '002_event_tags': 2,
    });
  });

  it('applies nothing when run again', async () => {
    const result = await runClickHouseMigrations({ connection, database, migrations: MIGRATIONS });
    expect(result).toEqual({ applied: [], skipped: ['001_events', '002_event_tags'] });
    const [count] = await rows<{ c: string }>(sql`SELECT count() AS c FROM ${identifier(MIGRATIONS_TABLE)}`);
    expect(count).toEqual({ c: '3' });
  });

  it('resumes a failed migration at the statement that failed', async () => {
    const broken: ClickHouseMigration = {
      id: '003_partial',
      statements: [
        'ALTER TABLE events ADD COLUMN source String',
        'ALTER TABLE no_such_table ADD COLUMN x String',
      ],
    };
    await expect(
      runClickHouseMigrations({ connection, database, migrations: [...MIGRATIONS, broken] }),
    ).rejects.toThrow(/003_partial failed at statement 2 of 2/);

    const fixed: ClickHouseMigration = {
      id: '003_partial',
      statements: [broken.statements[0]!, 'ALTER TABLE events ADD COLUMN region String'],
    };
    const result = await runClickHouseMigrations({
      connection,
      database,
      migrations: [...MIGRATIONS, fixed],
    });
    expect(result.applied).toEqual(['003_partial']);
    const columns = await rows<{ name: string }>(
      sql`SELECT name FROM system.columns WHERE database = ${database} AND table = 'events' AND name IN ${inList(['source', 'region'])} ORDER BY name`,
    );
    expect(columns).toEqual([{ name: 'region' }, { name: 'source' }]);
  });

  it('refuses invalid input before touching the server', async () => {
    await expect(
      runClickHouseMigrations({ connection, database: 'bad-name', migrations: [] }),
    ).rejects.toThrow(TypeError);
    await expect(
      runClickHouseMigrations({ connection, database, migrations: [MIGRATIONS[0]!, MIGRATIONS[0]!] }),
    ).rejects.toThrow(/appears twice/);
  });
});

describe('values in and out', () => {
  const ts = new Date('2024-03-04T05:06:07Z');

  it('round-trips hostile strings written as SQL literals', async () => {
    const values = joinSql(
      HOSTILE.map((name, i) => sql`(${'sql-org'}, ${name}, ${ts}, ${i}, ${[name, 'x']})`),
    );
    await client.command({
      query: sql`INSERT INTO events (org_id, name, ts, hits, tags) VALUES ${values}`.text,
    });

    const back = await rows<{ name: string; hits: string; tags: string[] }>(
      sql`SELECT name, hits, tags FROM events WHERE org_id = ${'sql-org'} ORDER BY hits`,
    );
    expect(back.map((row) => row.name)).toEqual(HOSTILE);
    expect(back.map((row) => row.tags)).toEqual(HOSTILE.map((name) => [name, 'x']));
    // 64-bit integers come back as strings on every version (output_format_json_quote_64bit_integers=1).
    expect(back.map((row) => row.hits)).toEqual(HOSTILE.map((_, i) => String(i)));
  });

  it('matches LIKE patterns literally, wildcards and backslashes included', async () => {
    const [answer] = await rows<Record<string, number | string>>(
      sql`SELECT ${'50%_off'} LIKE ${likePattern('contains', '%_')} AS literal,
                 ${'50xoff'} LIKE ${likePattern('contains', '%_')} AS wildcard,
                 ${'a\\b.example'} LIKE ${likePattern('prefix', 'a\\b')} AS backslash,
                 ${'axb.example'} LIKE ${likePattern('prefix', 'a\\b')} AS not_escape`,
    );
    expect(Object.fromEntries(Object.entries(answer!).map(([k, v]) => [k, Number(v)]))).toEqual({
      literal: 1,
      wildcard: 0,
      backslash: 1,
      not_escape: 0,
    });
  });

  it('round-trips hostile strings inserted as JSONEachRow, and finds each with a literal', async () => {
    await insertJsonEachRow(
      client,
      'events',
      ['org_id', 'name', 'ts', 'hits', 'tags'],
      HOSTILE.map((name, i) => ({
        org_id: 'json-org',
        name,
        ts: dateTimeInputValue(ts),
        hits: i,
        tags: [name],
      })),
    );
    const back = await rows<{ name: string; tags: string[] }>(
      sql`SELECT name, tags FROM events WHERE org_id = ${'json-org'} ORDER BY hits`,
    );
    expect(back).toEqual(HOSTILE.map((name) => ({ name, tags: [name] })));

    for (const name of HOSTILE) {
      const [match] = await rows<{ c: string }>(
        sql`SELECT count() AS c FROM events WHERE org_id = ${'json-org'} AND name = ${name} AND has(tags, ${name})`,
      );
      expect({ name, count: match?.c }).toEqual({ name, count: '1' });
    }
  });

  it('reads DateTime literals and JSON epoch seconds as the same instant', async () => {
    const [row] = await rows<{ n: string; unix: number; day: string }>(
      sql`SELECT count() AS n, any(toUnixTimestamp(ts)) AS unix, toString(any(day)) AS day
          FROM events WHERE org_id = ${'json-org'} AND ts = ${ts}`,
    );
    expect(row).toEqual({ n: String(HOSTILE.length), unix: ts.getTime() / 1000, day: '2024-03-04' });
    const [edge] = await rows<{ lo: number; hi: number }>(
      sql`SELECT toUnixTimestamp(${new Date(0)}) AS lo, toUnixTimestamp(${new Date('2105-12-31T23:59:59Z')}) AS hi`,
    );
    expect(edge).toEqual({ lo: 0, hi: Date.UTC(2105, 11, 31, 23, 59, 59) / 1000 });
  });

  it('reads number literals back exactly', async () => {
    const numbers = [
      0,
      1,
      -1,
      255,
      -129,
      2 ** 31,
      -(2 ** 53 - 1),
      0.1,
      -2.5,
      1.5e-7,
      1e21,
      2.2250738585072014e-308,
    ];
    const columns = numbers.map((n, i) => sql`toString(${numberLiteral(n)}) AS ${identifier(`n${i}`)}`);
    const [row] = await rows<Record<string, string>>(sql`SELECT ${joinSql(columns)}`);
    expect(numbers.map((_, i) => Number(row?.[`n${i}`]))).toEqual(numbers);
    const [big] = await rows<{ u: string; i: string; d: string }>(
      sql`SELECT ${18446744073709551615n} AS u, ${-9223372036854775808n} AS i, toString(${2 ** 60}) AS d`,
    );
    expect(big).toEqual({ u: '18446744073709551615', i: '-9223372036854775808', d: '1152921504606846976' });
    // A negative value right after a minus sign stays an expression, not a `--` comment.
    const [minus] = await rows<{ r: number }>(sql`SELECT 1 -${-1} AS r`);
    expect(minus).toEqual({ r: 2 });
  });

  it('applies DEFAULT expressions to columns a JSONEachRow insert does not name', async () => {
    await insertJsonEachRow(
      client,
      `${database}.events`,
      ['org_id', 'name', 'ts', 'hits'],
      [{ org_id: 'defaults-org', name: 'n', ts: dateTimeInputValue(ts), hits: 1, ignored: 'x' }],
    );
    const back = await rows<{ day: string; tags: string[] }>(
      sql`SELECT toString(day) AS day, tags FROM events WHERE org_id = ${'defaults-org'}`,
    );
    expect(back).toEqual([{ day: '2024-03-04', tags: [] }]);
    await expect(
      insertJsonEachRow(client, 'events', ['org_id', 'ts'], [{ org_id: 'x', ts: new Date() }]),
    ).rejects.toThrow(TypeError);
    await expect(insertJsonEachRow(client, 'events; DROP', ['org_id'], [{ org_id: 'x' }])).rejects.toThrow(
      TypeError,
    );
  });

  it('keeps an injection attempt inside its literal', async () => {
    const attack = "x' OR 1 = 1 --";
    const [row] = await rows<{ c: string }>(sql`SELECT count() AS c FROM events WHERE name = ${attack}`);
    expect(row).toEqual({ c: '0' });
    const literal = stringLiteral("'; DROP TABLE events; --");
    await rows(sql`SELECT ${literal} AS s`);
    const [still] = await rows<{ c: string }>(
      sql`SELECT count() AS c FROM system.tables WHERE database = ${database} AND name = 'events'`,
    );
    expect(still).toEqual({ c: '1' });
  });

  it('writes DateTime literals that compare equal to stored values', async () => {
    const [row] = await rows<{ c: string }>(
      sql`SELECT count() AS c FROM events
          WHERE org_id IN ${inList(['sql-org', 'json-org'])}
            AND ts >= ${dateTimeLiteral(ts)} AND ts < ${new Date(ts.getTime() + 1000)}`,
    );
    expect(Number(row?.c)).toBe(HOSTILE.length * 2);
  });
});
