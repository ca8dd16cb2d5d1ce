import { AppError } from '@sts/errors/app-error';
import { decodeCursor, encodeCursor, toPage, toPageRequest } from './keyset-cursor';

describe('keyset cursors', () => {
  it('round-trips a position', () => {
    const position = { at: '2026-01-01T00:00:00.000Z', id: 'abc' };
    expect(decodeCursor(encodeCursor(position))).toEqual(position);
  });

  it('rejects garbage cursors with a validation error', () => {
    for (const bad of ['', 'x', Buffer.from('[1,2]').toString('base64url'), Buffer.from('["no-date","x"]').toString('base64url')]) {
      expect(() => decodeCursor(bad)).toThrow(AppError);
    }
  });

  it('validates limits', () => {
    expect(toPageRequest(0, '').limit).toBe(50);
    expect(() => toPageRequest(201, '')).toThrow(AppError);
    expect(() => toPageRequest(-1, '')).toThrow(AppError);
  });

  it('cuts pages and emits a next cursor only when more rows exist', () => {
    const rows = [1, 2, 3].map((n) => ({ at: `2026-01-0${n}T00:00:00.000Z`, id: String(n) }));
    expect(toPage(rows, 2, (r) => r).items).toHaveLength(2);
    expect(decodeCursor(toPage(rows, 2, (r) => r).nextCursor)).toEqual(rows[1]);
    expect(toPage(rows, 3, (r) => r).nextCursor).toBe('');
  });
});
