import { AppError } from '@sts/errors/app-error';
import {
  SqlFragment,
  arrayLiteral,
  booleanLiteral,
  dateLiteral,
  dateTimeInputValue,
  dateTimeLiteral,
  identifier,
  inList,
  integerLiteral,
  joinSql,
  likePattern,
  numberLiteral,
  sql,
  sqlValue,
  stringLiteral,
  type SqlValue,
} from './sql-escape';

const text = (f: SqlFragment) => f.text;

/**
 * Reads a rendered string literal back the way ClickHouse does (escapes as in its parser), so the
 * tests can check that rendering round-trips. The integration test checks the same against a server.
 */
function parseClickHouseString(literal: string): string {
  expect(literal.startsWith("'") && literal.endsWith("'")).toBe(true);
  const body = literal.slice(1, -1);
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    if (ch === "'") throw new Error(`unescaped quote at ${i} in ${literal}`);
    if (ch !== '\\') {
      const cp = body.codePointAt(i)!;
      bytes.push(...Buffer.from(String.fromCodePoint(cp), 'utf8'));
      if (cp > 0xffff) i++;
      continue;
    }
    const next = body[++i];
    switch (next) {
      case '0':
        bytes.push(0);
        break;
      case 'b':
        bytes.push(8);
        break;
      case 't':
        bytes.push(9);
        break;
      case 'n':
        bytes.push(10);
        break;
      case 'f':
        bytes.push(12);
        break;
      case 'r':
        bytes.push(13);
        break;
      case "'":
      case '\\':
        bytes.push(next.charCodeAt(0));
        break;
      case 'x':
        bytes.push(parseInt(body.slice(i + 1, i + 3), 16));
        i += 2;
        break;
      default:
        throw new Error(`unexpected escape \\${next} in ${literal}`);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

const HOSTILE = [
  '',
  "'",
  "''",
  "O'Brien",
  '\\',
  "\\'",
  "\\\\'",
  "'; DROP TABLE x; --",
  "' OR 1 = 1 --",
  "x' UNION ALL SELECT * FROM system.users --",
  '\0',
  'a\0b',
  '\\0',
  '\\N',
  'line1\nline2\r\n\tTabbed',
  '\b\f\v\x07\x1b\x7f\x01\x1f',
  'backtick ` and "double" quotes',
  '/* comment */ -- comment',
  '{x:String} ? $1 :name',
  'é ü ß 中文 العربية',
  '😀👍🏽 \u{1F600}',
  '\u2028\u2029\u200b\ufeff',
  '\u0085\u009f',
  'trailing backslash \\',
];

describe('stringLiteral', () => {
  it('escapes backslash and single quote', () => {
    expect(text(stringLiteral("it's"))).toBe("'it\\'s'");
    expect(text(stringLiteral('a\\b'))).toBe("'a\\\\b'");
    expect(text(stringLiteral("\\'"))).toBe("'\\\\\\''");
  });

  it('renders NUL and control characters as escapes', () => {
    expect(text(stringLiteral('\0'))).toBe("'\\0'");
    expect(text(stringLiteral('\n\r\t\b\f'))).toBe("'\\n\\r\\t\\b\\f'");
    expect(text(stringLiteral('\x01\x1f\x7f\v\x1b'))).toBe("'\\x01\\x1F\\x7F\\x0B\\x1B'");
  });

  it('keeps printable ASCII and Unicode as is', () => {
    expect(text(stringLiteral('Hello, world! ~`"{}'))).toBe("'Hello, world! ~`\"{}'");
    expect(text(stringLiteral('é 中 😀'))).toBe("'é 中 😀'");
  });

  it('neutralizes an injection attempt', () => {
    const rendered = text(stringLiteral("'; DROP TABLE x; --"));
    expect(rendered).toBe("'\\'; DROP TABLE x; --'");
    // The only unescaped quotes are the delimiters.
    expect(rendered.slice(1, -1).replace(/\\./g, '')).not.toContain("'");
  });

  it.each(HOSTILE)('round-trips %j', (value) => {
    const rendered = text(stringLiteral(value));
    expect(parseClickHouseString(rendered)).toBe(value);
    // Never a raw control character or a bare backslash on the wire.
    expect(rendered).not.toMatch(/[\x00-\x1f\x7f]/);
  });

  it('round-trips every ASCII character', () => {
    const all = Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join('');
    expect(parseClickHouseString(text(stringLiteral(all)))).toBe(all);
  });

  it('rejects unpaired surrogates, which have no UTF-8 form', () => {
    for (const bad of ['\ud800', 'a\udc00b', '\ud83d', '\ude00\ud83d']) {
      expect(() => stringLiteral(bad)).toThrow(AppError);
    }
    try {
      stringLiteral('\ud800');
    } catch (error) {
      expect((error as AppError).code).toBe('VALIDATION_FAILED');
    }
  });

  it('rejects non-strings', () => {
    expect(() => stringLiteral(1 as unknown as string)).toThrow(TypeError);
  });
});

describe('numberLiteral', () => {
  it('renders integers as integer literals', () => {
    expect(text(numberLiteral(0))).toBe('0');
    expect(text(numberLiteral(42))).toBe('42');
    expect(text(numberLiteral(Number.MAX_SAFE_INTEGER))).toBe('9007199254740991');
    expect(text(numberLiteral(2 ** 60))).toBe('1152921504606846976');
    expect(text(numberLiteral(-(2 ** 63)))).toBe('(-9223372036854775808)');
    expect(text(numberLiteral(2 ** 64 - 2048))).toBe('18446744073709549568');
    // Past UInt64, a Float64 literal.
    expect(text(numberLiteral(2 ** 64))).toBe('18446744073709552000');
    expect(text(numberLiteral(1e21))).toBe('1e+21');
  });

  it('renders floats in shortest round-trip form', () => {
    expect(text(numberLiteral(0.1))).toBe('0.1');
    expect(text(numberLiteral(1.5e-7))).toBe('1.5e-7');
    expect(text(numberLiteral(1e21))).toBe('1e+21');
    expect(text(numberLiteral(Number.MAX_VALUE))).toBe('1.7976931348623157e+308');
    expect(text(numberLiteral(2.2250738585072014e-308))).toBe('2.2250738585072014e-308');
  });

  it('parenthesizes negatives so that `1 -${-1}` cannot become a `--` comment', () => {
    expect(text(numberLiteral(-1))).toBe('(-1)');
    expect(text(numberLiteral(-0.5))).toBe('(-0.5)');
    expect(text(sql`SELECT 1 -${-1}`)).toBe('SELECT 1 -(-1)');
    expect(text(numberLiteral(-0))).toBe('0');
  });

  it('renders bigints within Int64/UInt64', () => {
    expect(text(numberLiteral(18446744073709551615n))).toBe('18446744073709551615');
    expect(text(numberLiteral(-9223372036854775808n))).toBe('(-9223372036854775808)');
    expect(() => numberLiteral(18446744073709551616n)).toThrow(AppError);
    expect(() => numberLiteral(-9223372036854775809n)).toThrow(AppError);
  });

  it('rejects non-finite and subnormal numbers', () => {
    for (const bad of [NaN, Infinity, -Infinity, 5e-324, -4e-320, 2.225073858507201e-308]) {
      expect(() => numberLiteral(bad)).toThrow(AppError);
    }
  });

  it('rejects non-numbers', () => {
    expect(() => numberLiteral('1' as unknown as number)).toThrow(TypeError);
  });
});

describe('integerLiteral', () => {
  it('accepts safe integers and bigints only', () => {
    expect(text(integerLiteral(7))).toBe('7');
    expect(text(integerLiteral(-7))).toBe('(-7)');
    expect(text(integerLiteral(7n))).toBe('7');
    expect(() => integerLiteral(1.5)).toThrow(AppError);
    expect(() => integerLiteral(2 ** 53)).toThrow(AppError);
    expect(() => integerLiteral(NaN)).toThrow(AppError);
  });
});

describe('booleanLiteral', () => {
  it('renders 1 and 0 (18.16 has no true/false)', () => {
    expect(text(booleanLiteral(true))).toBe('1');
    expect(text(booleanLiteral(false))).toBe('0');
    expect(() => booleanLiteral(1 as unknown as boolean)).toThrow(TypeError);
  });
});

describe('dateTimeLiteral and dateLiteral', () => {
  it('renders the instant in UTC with whole seconds', () => {
    expect(text(dateTimeLiteral(new Date('2024-01-02T03:04:05.999Z')))).toBe(
      "toDateTime('2024-01-02 03:04:05', 'UTC')",
    );
    expect(text(dateTimeLiteral(new Date('2024-06-30T23:30:00+02:00')))).toBe(
      "toDateTime('2024-06-30 21:30:00', 'UTC')",
    );
    expect(text(dateLiteral(new Date('2024-06-30T23:30:00-02:00')))).toBe("toDate('2024-07-01')");
  });

  it('accepts the bounds of the DateTime range 18.16 supports', () => {
    expect(text(dateTimeLiteral(new Date('1970-01-01T00:00:00Z')))).toBe(
      "toDateTime('1970-01-01 00:00:00', 'UTC')",
    );
    expect(text(dateTimeLiteral(new Date('2105-12-31T23:59:59.999Z')))).toBe(
      "toDateTime('2105-12-31 23:59:59', 'UTC')",
    );
  });

  it('gives whole epoch seconds for JSONEachRow inserts', () => {
    expect(dateTimeInputValue(new Date('2024-01-02T03:04:05.999Z'))).toBe(1704164645);
    expect(dateTimeInputValue(new Date(0))).toBe(0);
    expect(() => dateTimeInputValue(new Date('2106-01-01T00:00:00Z'))).toThrow(AppError);
    expect(() => dateTimeInputValue(new Date(NaN))).toThrow(AppError);
  });

  it('rejects invalid dates and dates outside the range', () => {
    for (const bad of [
      'invalid',
      '1969-12-31T23:59:59.999Z',
      '2106-01-01T00:00:00Z',
      '+275760-09-13T00:00:00Z',
    ]) {
      expect(() => dateTimeLiteral(new Date(bad))).toThrow(AppError);
      expect(() => dateLiteral(new Date(bad))).toThrow(AppError);
    }
    expect(() => dateTimeLiteral('2024-01-01' as unknown as Date)).toThrow(TypeError);
  });
});

describe('identifier', () => {
  it('backquotes valid names and joins qualified ones', () => {
    expect(text(identifier('events'))).toBe('`events`');
    expect(text(identifier('_x9'))).toBe('`_x9`');
    expect(text(identifier('db_1', 'schema_migrations'))).toBe('`db_1`.`schema_migrations`');
  });

  it.each(['', '1abc', 'a-b', 'a.b', 'a b', 'a`b', "a'b", 'a;DROP', 'é', 'a\0', '`x`', 'x\n'])(
    'rejects %j',
    (name) => {
      expect(() => identifier(name)).toThrow(TypeError);
    },
  );

  it('rejects no parts and non-strings', () => {
    expect(() => identifier()).toThrow(TypeError);
    expect(() => identifier('db', undefined as unknown as string)).toThrow(TypeError);
  });
});

describe('arrayLiteral and inList', () => {
  it('renders arrays of mixed literals, nested and empty', () => {
    expect(text(arrayLiteral(['a', "b'c", '\\']))).toBe("['a', 'b\\'c', '\\\\']");
    expect(text(arrayLiteral([1, -2, 2.5]))).toBe('[1, (-2), 2.5]');
    expect(text(arrayLiteral([[1], [2, 3]]))).toBe('[[1], [2, 3]]');
    expect(text(arrayLiteral([null, true]))).toBe('[NULL, 1]');
    expect(text(arrayLiteral([new Date('2024-01-02T00:00:00Z')]))).toBe(
      "[toDateTime('2024-01-02 00:00:00', 'UTC')]",
    );
    expect(text(arrayLiteral([]))).toBe('[]');
  });

  it('escapes hostile strings inside arrays', () => {
    const rendered = text(arrayLiteral(["'; DROP TABLE x; --", ']', "'] --"]));
    expect(rendered).toBe("['\\'; DROP TABLE x; --', ']', '\\'] --']");
  });

  it('renders IN lists and refuses empty ones', () => {
    expect(text(inList(['a', 'b']))).toBe("('a', 'b')");
    expect(text(inList([1]))).toBe('(1)');
    expect(() => inList([])).toThrow(TypeError);
  });

  it('rejects non-arrays and bad elements', () => {
    expect(() => arrayLiteral('abc' as unknown as SqlValue[])).toThrow(TypeError);
    expect(() => arrayLiteral([1, undefined as unknown as SqlValue])).toThrow(TypeError);
    expect(() => arrayLiteral([NaN])).toThrow(AppError);
  });
});

describe('sqlValue', () => {
  it('dispatches by type', () => {
    expect(text(sqlValue('x'))).toBe("'x'");
    expect(text(sqlValue(3))).toBe('3');
    expect(text(sqlValue(3n))).toBe('3');
    expect(text(sqlValue(false))).toBe('0');
    expect(text(sqlValue(null))).toBe('NULL');
    expect(text(sqlValue(new Date(0)))).toBe("toDateTime('1970-01-01 00:00:00', 'UTC')");
    expect(text(sqlValue(['x']))).toBe("['x']");
    const f = identifier('t');
    expect(sqlValue(f)).toBe(f);
  });

  it.each([
    ['undefined', undefined],
    ['an object', { toString: () => "' OR 1=1" }],
    ['a function', () => 'x'],
    ['a symbol', Symbol('x')],
    ['a Map', new Map()],
    ['a String object', new String('x')],
    ['a Buffer', Buffer.from('x')],
  ])('rejects %s', (_label, value) => {
    expect(() => sqlValue(value as unknown as SqlValue)).toThrow(TypeError);
  });
});

describe('sql template', () => {
  it('escapes interpolations by type and embeds fragments', () => {
    const since = new Date('2024-01-02T03:04:05Z');
    const query = sql`SELECT count() FROM ${identifier('db', 'events')} WHERE org = ${"o'1"} AND n > ${-5} AND ts >= ${since} AND tag IN ${inList(['a', 'b'])} AND flag = ${true}`;
    expect(query.text).toBe(
      "SELECT count() FROM `db`.`events` WHERE org = 'o\\'1' AND n > (-5) AND ts >= toDateTime('2024-01-02 03:04:05', 'UTC') AND tag IN ('a', 'b') AND flag = 1",
    );
    expect(String(query)).toBe(query.text);
  });

  it('keeps an injected string inside its literal', () => {
    const query = sql`SELECT * FROM t WHERE name = ${"x'; DROP TABLE t; --"} LIMIT 1`;
    expect(query.text).toBe("SELECT * FROM t WHERE name = 'x\\'; DROP TABLE t; --' LIMIT 1");
  });

  it('composes nested fragments', () => {
    const where = sql`a = ${1}`;
    expect(sql`SELECT 1 WHERE ${where} AND b = ${'2'}`.text).toBe("SELECT 1 WHERE a = 1 AND b = '2'");
    expect(sql`SELECT 1`.text).toBe('SELECT 1');
  });

  it('refuses values it cannot render', () => {
    expect(() => sql`SELECT ${undefined as unknown as SqlValue}`).toThrow(TypeError);
    expect(() => sql`SELECT ${{} as SqlValue}`).toThrow(TypeError);
    expect(() => sql`SELECT ${Infinity}`).toThrow(AppError);
  });
});

describe('joinSql', () => {
  it('joins fragments with a fragment separator', () => {
    const parts = [sql`a = ${1}`, sql`b = ${'x'}`];
    expect(joinSql(parts, sql` AND `).text).toBe("a = 1 AND b = 'x'");
    expect(joinSql([identifier('a'), identifier('b')]).text).toBe('`a`, `b`');
    expect(joinSql([]).text).toBe('');
  });

  it('refuses plain strings', () => {
    expect(() => joinSql(['1; DROP' as unknown as SqlFragment])).toThrow(TypeError);
    expect(() => joinSql([sql`a`], ' OR 1=1 ' as unknown as SqlFragment)).toThrow(TypeError);
  });
});

describe('SqlFragment', () => {
  it('cannot be constructed from a plain string', () => {
    expect(() => new SqlFragment(Symbol('SqlFragment'), "' OR 1=1")).toThrow(TypeError);
  });
});

describe('the sql tag refuses values where code does not go', () => {
  it.each([
    ['inside a string', (x: string) => sql`SELECT * FROM t WHERE url LIKE '%${x}%'`],
    ['inside a double-quoted identifier', (x: string) => sql`SELECT "${x}" FROM t`],
    ['inside a backquoted identifier', (x: string) => sql`SELECT \`${x}\` FROM t`],
    ['after a line comment', (x: string) => sql`SELECT 1 -- ${x}`],
    ['after a # comment', (x: string) => sql`SELECT 1 # ${x}`],
    ['inside a block comment', (x: string) => sql`SELECT 1 /* ${x} */`],
    ['after an escaped quote inside a string', (x: string) => sql`SELECT 'it\\'s ${x}'`],
    ['after a doubled quote inside a string', (x: string) => sql`SELECT 'it''s ${x}'`],
  ])('%s', (_name, build) => {
    expect(() => build('x')).toThrow(TypeError);
  });

  it('allows values after strings, identifiers and comments that are closed', () => {
    expect(
      sql`SELECT 'a''b', \`c\` /* d */ FROM t -- e
WHERE x = ${'y'}`.text,
    ).toBe("SELECT 'a''b', `c` /* d */ FROM t -- e\nWHERE x = 'y'");
  });

  it('refuses a plain array passed as a template', () => {
    const forged = ['SELECT ', ' FROM t'] as unknown as TemplateStringsArray;
    expect(() => sql(forged, 1)).toThrow(/tagged template/);
    const withRaw = Object.assign(['SELECT ', ''], {
      raw: ['SELECT ', ''],
    }) as unknown as TemplateStringsArray;
    expect(() => sql(withRaw, 1)).toThrow(/tagged template/);
  });
});

describe('likePattern', () => {
  it('escapes LIKE wildcards and backslashes, then adds the wildcards the kind asks for', () => {
    expect(text(likePattern('contains', '50%_off'))).toBe("'%50\\\\%\\\\_off%'");
    expect(text(likePattern('prefix', 'a\\b'))).toBe("'a\\\\\\\\b%'");
    expect(text(likePattern('suffix', "o'k"))).toBe("'%o\\'k'");
    expect(text(likePattern('exact', 'plain'))).toBe("'plain'");
  });
});
