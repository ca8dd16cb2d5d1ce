import { AppError } from '@sts/errors/app-error';
import { decodeCursor, encodeCursor, toPage, toPageRequest } from './keyset-cursor';

const ID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('keyset cursors', () => {
  it('round-trips a position', () => {
    const position = { at: '2026-01-01T00:00:00.000Z', id: ID(1) };
    expect(decodeCursor(encodeCursor(position))).toEqual(position);
  });

  it('rejects garbage cursors with a validation error', () => {
    for (const bad of [
      '',
      'x',
      Buffer.from('[1,2]').toString('base64url'),
      Buffer.from('["no-date","x"]').toString('base64url'),
    ]) {
      expect(() => decodeCursor(bad)).toThrow(AppError);
    }
  });

  it('rejects tampered positions PostgreSQL could not read: bare numbers, years out of range, ids that are not ours', () => {
    for (const at of [
      '5',
      '20260101',
      '+275760-09-13T00:00:00.000Z',
      '0000-01-01T00:00:00.000Z',
      '2026-13-01T00:00:00.000Z',
      '2026-01-01 00:00:00',
      '2026-01-01T00:00:00.000+01:00',
    ]) {
      expect(() => decodeCursor(cursorOf([at, ID(1)]))).toThrow(AppError);
    }
    expect(() => decodeCursor(cursorOf(['2026-01-01T00:00:00.000Z', "x' or 1=1 --"]))).toThrow(AppError);
    expect(decodeCursor(cursorOf(['9999-12-31T23:59:59.999Z', ID(2)]))).toEqual({
      at: '9999-12-31T23:59:59.999Z',
      id: ID(2),
    });
  });

  it('validates limits', () => {
    expect(toPageRequest(0, '').limit).toBe(50);
    expect(() => toPageRequest(201, '')).toThrow(AppError);
    expect(() => toPageRequest(-1, '')).toThrow(AppError);
  });

  it('cuts pages and emits a next cursor only when more rows exist', () => {
    const rows = [1, 2, 3].map((n) => ({ at: `2026-01-0${n}T00:00:00.000Z`, id: ID(n) }));
    expect(toPage(rows, 2, (r) => r).items).toHaveLength(2);
    expect(decodeCursor(toPage(rows, 2, (r) => r).nextCursor)).toEqual(rows[1]);
    expect(toPage(rows, 3, (r) => r).nextCursor).toBe('');
  });
});
