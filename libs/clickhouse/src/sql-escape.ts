import { AppError } from '@sts/errors/app-error';

/**
 * The one way values enter ClickHouse SQL. ClickHouse 18.16 (Debian's package) has no server-side
 * query parameters, so values are rendered as literals here, after zod validation, and nowhere else.
 * Everything rendered parses identically on 18.16 and on current ClickHouse.
 *
 *   const query = sql`SELECT count() FROM ${identifier(db, 'events')} WHERE org_id = ${orgId} AND ts >= ${since}`;
 *   await client.query({ query: query.text, format: 'JSONEachRow' });
 *
 * Interpolated values are escaped by type (see {@link sqlValue}); a {@link SqlFragment} (from `sql`,
 * `identifier` or a literal function) is embedded as is. There is deliberately no "raw" escape hatch.
 *
 * Errors: a value SQL cannot represent faithfully (a lone UTF-16 surrogate, a non-finite or subnormal
 * number, a date outside ClickHouse's DateTime range) throws `AppError('VALIDATION_FAILED')`; misuse by
 * code (an invalid identifier, an unsupported type, an empty IN list) throws a `TypeError`.
 */

const TOKEN = Symbol('SqlFragment');

/** SQL text made only of code and escaped values. Create with `sql`, never from a plain string. */
export class SqlFragment {
  readonly text: string;

  constructor(token: symbol, text: string) {
    if (token !== TOKEN)
      throw new TypeError('SqlFragment is created by sql`...` and the literal helpers only');
    this.text = text;
  }

  toString(): string {
    return this.text;
  }
}

const fragment = (text: string) => new SqlFragment(TOKEN, text);

export type SqlScalar = string | number | bigint | boolean | Date | null;
export type SqlValue = SqlScalar | SqlFragment | readonly SqlValue[];

const invalid = (detail: string): AppError => new AppError('VALIDATION_FAILED', detail);

// Escapes understood the same way by every ClickHouse version's string literal parser.
const NAMED_ESCAPES: Record<number, string> = {
  0x00: '\\0',
  0x08: '\\b',
  0x09: '\\t',
  0x0a: '\\n',
  0x0c: '\\f',
  0x0d: '\\r',
  0x27: "\\'",
  0x5c: '\\\\',
};

/**
 * `'...'` with backslash and quote escaped, NUL and the common controls as `\0 \b \t \n \f \r`, other
 * ASCII controls and DEL as `\xHH`, everything else as UTF-8. A lone UTF-16 surrogate has no UTF-8
 * form, so it is rejected rather than silently replaced.
 */
export function stringLiteral(value: string): SqlFragment {
  if (typeof value !== 'string') throw new TypeError(`stringLiteral expects a string, got ${typeof value}`);
  let out = "'";
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    const named = NAMED_ESCAPES[code];
    if (named !== undefined) {
      out += named;
    } else if (code < 0x20 || code === 0x7f) {
      out += `\\x${code.toString(16).padStart(2, '0').toUpperCase()}`;
    } else if (code >= 0xd800 && code <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) throw invalid('text contains an unpaired UTF-16 surrogate');
      out += value[i]! + value[i + 1]!;
      i++;
    } else if (code >= 0xdc00 && code <= 0xdfff) {
      throw invalid('text contains an unpaired UTF-16 surrogate');
    } else {
      out += value[i]!;
    }
  }
  return fragment(`${out}'`);
}

// Below this, doubles are subnormal; ClickHouse 18.16's SQL parser rejects their literals (`5e-324`).
const MIN_NORMAL = 2.2250738585072014e-308;
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

// A negative literal is parenthesized: `1 -${-1}` must not become `1 --1`, which is a comment.
const signed = (digits: string) => fragment(digits.startsWith('-') ? `(${digits})` : digits);

/**
 * A finite number or a bigint. Integers render as integer literals (ClickHouse picks the smallest
 * fitting integer type), other numbers as Float64 literals in shortest round-trip form.
 */
export function numberLiteral(value: number | bigint): SqlFragment {
  if (typeof value === 'bigint') {
    if (value < INT64_MIN || value > UINT64_MAX) throw invalid('integer is outside the Int64/UInt64 range');
    return signed(value.toString());
  }
  if (typeof value !== 'number') throw new TypeError(`numberLiteral expects a number, got ${typeof value}`);
  if (!Number.isFinite(value)) throw invalid('number must be finite');
  if (value !== 0 && Math.abs(value) < MIN_NORMAL)
    throw invalid('number is too close to zero to be represented');
  // Beyond 2^53, String() shortens integers (2^60 → `1152921504606847000`), which ClickHouse would read
  // as a different UInt64: write the exact digits while they fit Int64/UInt64.
  if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
    const exact = BigInt(value);
    if (exact >= INT64_MIN && exact <= UINT64_MAX) return signed(exact.toString());
  }
  // String() gives the shortest form that round-trips (`0.1`, `1.5e-7`, `1e+21`); -0 becomes `0`.
  return signed(String(value));
}

/** Like {@link numberLiteral} but only for integers (a number must be a safe integer). */
export function integerLiteral(value: number | bigint): SqlFragment {
  if (typeof value === 'number' && !Number.isSafeInteger(value))
    throw invalid('number must be a safe integer');
  return numberLiteral(value);
}

/** `1` or `0`: ClickHouse 18.16 has no `true`/`false` literals (booleans are UInt8). */
export function booleanLiteral(value: boolean): SqlFragment {
  if (typeof value !== 'boolean')
    throw new TypeError(`booleanLiteral expects a boolean, got ${typeof value}`);
  return fragment(value ? '1' : '0');
}

// ClickHouse 18.16's date tables end with 2105; beyond that it silently wraps or yields zero dates.
const DATE_TIME_MIN_MS = Date.UTC(1970, 0, 1, 0, 0, 0);
const DATE_TIME_MAX_MS = Date.UTC(2105, 11, 31, 23, 59, 59, 999);

function checkDate(value: Date, what: string): void {
  if (!(value instanceof Date)) throw new TypeError(`${what} expects a Date`);
  const ms = value.getTime();
  if (Number.isNaN(ms)) throw invalid('date is invalid');
  if (ms < DATE_TIME_MIN_MS || ms > DATE_TIME_MAX_MS) {
    throw invalid('date must be between 1970-01-01 and 2105-12-31 (UTC)');
  }
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
const utcDay = (d: Date) =>
  `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;

/**
 * `toDateTime('YYYY-MM-DD hh:mm:ss', 'UTC')`: the instant, whatever the server's time zone. DateTime
 * has whole seconds, so milliseconds are dropped (rounded down).
 */
export function dateTimeLiteral(value: Date): SqlFragment {
  checkDate(value, 'dateTimeLiteral');
  const time = `${pad(value.getUTCHours())}:${pad(value.getUTCMinutes())}:${pad(value.getUTCSeconds())}`;
  return fragment(`toDateTime('${utcDay(value)} ${time}', 'UTC')`);
}

/**
 * The same instant for a DateTime field of a JSONEachRow insert: whole seconds since the epoch, which
 * every version reads independently of time zones (18.16 rejects ISO 8601 text such as `...T03:04:05Z`
 * unless `date_time_input_format=best_effort`). Same range checks as {@link dateTimeLiteral}.
 */
export function dateTimeInputValue(value: Date): number {
  checkDate(value, 'dateTimeInputValue');
  return Math.floor(value.getTime() / 1000);
}

/** `toDate('YYYY-MM-DD')` of the UTC calendar day of the instant. */
export function dateLiteral(value: Date): SqlFragment {
  checkDate(value, 'dateLiteral');
  return fragment(`toDate('${utcDay(value)}')`);
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A backquoted identifier, or a qualified one from several parts: `identifier(db, 'events')`. */
export function identifier(...parts: string[]): SqlFragment {
  if (parts.length === 0) throw new TypeError('identifier needs at least one part');
  for (const part of parts) {
    if (typeof part !== 'string' || !IDENTIFIER.test(part)) {
      throw new TypeError(`invalid SQL identifier ${JSON.stringify(part)}: use [A-Za-z_][A-Za-z0-9_]*`);
    }
  }
  return fragment(parts.map((part) => `\`${part}\``).join('.'));
}

/** `[a, b, ...]`, each element rendered by {@link sqlValue}. `[]` has type Array(Nothing). */
export function arrayLiteral(values: readonly SqlValue[]): SqlFragment {
  return fragment(`[${renderList(values, 'arrayLiteral')}]`);
}

/**
 * `(a, b, ...)` for `x IN ${inList(ids)}`. Empty lists are a TypeError: `x IN ()` is a syntax error
 * and `has([], x)` a type error on 18.16, so the caller must handle "nothing to match" itself.
 */
export function inList(values: readonly SqlValue[]): SqlFragment {
  const rendered = renderList(values, 'inList');
  if (rendered === '') throw new TypeError('inList of no values: handle the empty case before building SQL');
  return fragment(`(${rendered})`);
}

function renderList(values: readonly SqlValue[], what: string): string {
  // Array.isArray would narrow a readonly array to any[]; keep the declared element type.
  const items: readonly SqlValue[] = values;
  if (!Array.isArray(values)) throw new TypeError(`${what} expects an array`);
  return items.map((value) => sqlValue(value).text).join(', ');
}

/**
 * Renders one value by its type: string → string literal, number/bigint → number literal, boolean →
 * 1/0, Date → DateTime literal, null → NULL, array → array literal, SqlFragment → itself.
 * Anything else (undefined, plain objects, functions, symbols) is a TypeError.
 */
export function sqlValue(value: SqlValue): SqlFragment {
  if (value instanceof SqlFragment) return value;
  if (value === null) return fragment('NULL');
  if (value instanceof Date) return dateTimeLiteral(value);
  if (Array.isArray(value)) return arrayLiteral(value as readonly SqlValue[]);
  switch (typeof value) {
    case 'string':
      return stringLiteral(value);
    case 'number':
    case 'bigint':
      return numberLiteral(value);
    case 'boolean':
      return booleanLiteral(value);
    default:
      throw new TypeError(`cannot use a value of type ${describe(value)} in SQL`);
  }
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'object') return Object.prototype.toString.call(value).slice(8, -1);
  return typeof value;
}

/**
 * Tagged template: the literal parts are code, every interpolation goes through {@link sqlValue}.
 *
 * Only a real template is accepted (a plain array would let text built at run time pass for code),
 * and a value may only stand where code goes: a hole inside a quoted string or identifier, or after
 * a comment start, is a TypeError (`'%${x}%'` must be `${likePattern('contains', x)}`).
 */
export function sql(strings: TemplateStringsArray, ...values: SqlValue[]): SqlFragment {
  // Checked through `unknown`: Array.isArray would narrow `strings` itself to any[].
  const template: unknown = strings;
  if (
    !Array.isArray(template) ||
    !Array.isArray((template as { raw?: unknown }).raw) ||
    !Object.isFrozen(template)
  ) {
    throw new TypeError('sql must be used as a tagged template: sql`...`');
  }
  const part = (index: number): string => {
    const text = strings[index];
    if (text === undefined) throw new TypeError('sql`...` template contains an invalid escape sequence');
    return text;
  };
  let state: LexState = 'code';
  let text = part(0);
  state = scan(text, state);
  values.forEach((value, index) => {
    if (state !== 'code') {
      throw new TypeError(
        `sql\`...\`: value ${index + 1} stands inside ${LEX_STATE_NAMES[state]}; put values only where code goes`,
      );
    }
    const next = part(index + 1);
    text += sqlValue(value).text + next;
    state = scan(next, state);
  });
  return fragment(text);
}

type LexState = 'code' | 'single' | 'double' | 'backtick' | 'lineComment' | 'blockComment';
const LEX_STATE_NAMES: Record<LexState, string> = {
  code: 'code',
  single: "a '...' string",
  double: 'a "..." identifier',
  backtick: 'a `...` identifier',
  lineComment: 'a -- comment',
  blockComment: 'a /* */ comment',
};

/** Where the SQL text leaves the lexer: in code, inside a quote, or inside a comment. */
function scan(text: string, start: LexState): LexState {
  let state = start;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    switch (state) {
      case 'code':
        if (c === "'") state = 'single';
        else if (c === '"') state = 'double';
        else if (c === '`') state = 'backtick';
        else if (c === '-' && text[i + 1] === '-') state = 'lineComment';
        else if (c === '#')
          state = 'lineComment'; // current ClickHouse reads `#` as a comment too
        else if (c === '/' && text[i + 1] === '*') {
          state = 'blockComment';
          i++;
        }
        break;
      case 'single':
      case 'double':
      case 'backtick': {
        const quote = state === 'single' ? "'" : state === 'double' ? '"' : '`';
        if (c === '\\') i++;
        else if (c === quote) {
          if (text[i + 1] === quote) i++;
          else state = 'code';
        }
        break;
      }
      case 'lineComment':
        if (c === '\n' || c === '\r') state = 'code';
        break;
      case 'blockComment':
        if (c === '*' && text[i + 1] === '/') {
          state = 'code';
          i++;
        }
        break;
    }
  }
  return state;
}

/**
 * A string literal to use after `LIKE`: `value` matched literally (its `%`, `_` and `\\` escaped), with
 * `%` added where the kind says. `url LIKE ${likePattern('contains', term)}`.
 */
export function likePattern(kind: 'exact' | 'prefix' | 'suffix' | 'contains', value: string): SqlFragment {
  if (typeof value !== 'string') throw new TypeError(`likePattern expects a string, got ${typeof value}`);
  const escaped = value.replace(/[\\%_]/g, (c) => `\\${c}`);
  const pattern =
    kind === 'exact'
      ? escaped
      : kind === 'prefix'
        ? `${escaped}%`
        : kind === 'suffix'
          ? `%${escaped}`
          : `%${escaped}%`;
  return stringLiteral(pattern);
}

/** Joins fragments with a separator that is itself a fragment: `joinSql(conditions, sql` AND `)`. */
export function joinSql(parts: readonly SqlFragment[], separator: SqlFragment = fragment(', ')): SqlFragment {
  for (const part of [...parts, separator]) {
    if (!(part instanceof SqlFragment)) throw new TypeError('joinSql joins SqlFragments only');
  }
  return fragment(parts.map((part) => part.text).join(separator.text));
}
