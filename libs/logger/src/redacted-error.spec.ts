import { ClickHouseError } from '@clickhouse/client';
import { redactedError } from './redacted-error';

describe('redactedError', () => {
  it('keeps the name, code and type, never the message that echoes the query and its values', () => {
    const error = new ClickHouseError({
      message: "Syntax error: failed at position 40 ('https://private.example/path?token=secret')",
      code: '62',
      type: 'SYNTAX_ERROR',
    });
    const described = redactedError(error);
    expect(described).toEqual({ name: error.name, code: '62', type: 'SYNTAX_ERROR' });
    expect(JSON.stringify(described)).not.toContain('secret');
    expect(redactedError('boom')).toEqual({ name: 'string' });
  });
});
