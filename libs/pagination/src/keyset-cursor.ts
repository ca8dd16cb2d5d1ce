import { AppError } from '@sts/errors/app-error';
import { isUuid } from '@sts/vocabulary/identifiers';

/**
 * Lists are paged by keyset (position after the last row seen), not by offset, so pages stay
 * stable while rows are added. A cursor is an opaque token wrapping that position.
 */
export interface KeysetPosition {
  /** ISO timestamp of the last row's sort column. */
  at: string;
  id: string;
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

export interface PageRequest {
  limit: number;
  after: KeysetPosition | null;
}

export function encodeCursor(position: KeysetPosition): string {
  return Buffer.from(JSON.stringify([position.at, position.id]), 'utf8').toString('base64url');
}

/**
 * The timestamps our cursors carry (`Date#toISOString`, years 0001–9999): PostgreSQL reads every one
 * of them. `Date.parse` alone would let a bare number or a year beyond PostgreSQL's range through.
 */
const CURSOR_TIME = /^(\d{4})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

function isCursorTime(value: string): boolean {
  const match = CURSOR_TIME.exec(value);
  return match !== null && match[1] !== '0000' && !Number.isNaN(Date.parse(value));
}

/** A cursor we made: `[iso time, uuid]`. Anything else (tampered, truncated, forged) is 400. */
export function decodeCursor(cursor: string): KeysetPosition {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(parsed) &&
      parsed.length === 2 &&
      typeof parsed[0] === 'string' &&
      typeof parsed[1] === 'string' &&
      isCursorTime(parsed[0]) &&
      isUuid(parsed[1])
    ) {
      return { at: parsed[0], id: parsed[1] };
    }
  } catch {
    // fall through
  }
  throw new AppError('VALIDATION_FAILED', 'cursor is not valid', {
    fields: [{ path: 'cursor', message: 'invalid cursor' }],
  });
}

/** Normalises a page request arriving over gRPC (0 = default). */
export function toPageRequest(limit: number | undefined, cursor: string | undefined): PageRequest {
  const size = !limit ? DEFAULT_PAGE_SIZE : limit;
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) {
    throw new AppError('VALIDATION_FAILED', `limit must be between 1 and ${MAX_PAGE_SIZE}`, {
      fields: [{ path: 'limit', message: `between 1 and ${MAX_PAGE_SIZE}` }],
    });
  }
  return { limit: size, after: cursor ? decodeCursor(cursor) : null };
}

/**
 * Given up to limit+1 rows fetched, returns the page and the cursor of the next one (empty when
 * this is the last page).
 */
export function toPage<Row>(
  rows: Row[],
  limit: number,
  positionOf: (row: Row) => KeysetPosition,
): { items: Row[]; nextCursor: string } {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items, nextCursor: rows.length > limit && last ? encodeCursor(positionOf(last)) : '' };
}
