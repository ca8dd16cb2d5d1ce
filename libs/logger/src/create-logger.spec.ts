import { Writable } from 'node:stream';
import pino from 'pino';
import { capturedLogger } from './captured-logger';
import { nameTraceInLogs, REDACTED_PATHS } from './create-logger';

describe('logger redaction', () => {
  it('never writes bearer tokens or secrets', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        lines.push(chunk.toString());
        callback();
      },
    });
    const log = pino({ redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, sink);
    log.info(
      { req: { headers: { authorization: 'Bearer abc.def.ghi' } }, invite: { token: 'inv_secret' } },
      'x',
    );
    expect(lines.join('')).not.toContain('abc.def.ghi');
    expect(lines.join('')).not.toContain('inv_secret');
    expect(lines.join('')).toContain('[redacted]');
  });
});

describe('trace fields named on a logger (the gateway: no active span)', () => {
  it("names the trace in that logger's lines only, and a line's own fields never change it", () => {
    const { logger, lines } = capturedLogger('gateway');
    const request = logger.child({ reqId: 'req-1' });
    const other = logger.child({ reqId: 'req-2' });
    const fields = { trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) };
    nameTraceInLogs(request, fields);
    nameTraceInLogs(other, undefined);

    request.warn({ trace_id: 'from the line' }, 'first');
    request.warn('second');
    other.warn('unsampled');
    request.child({ step: 'inner' }).warn('from a child');
    logger.warn('the parent');

    expect(lines[0]).toMatchObject({ reqId: 'req-1', msg: 'first', trace_id: 'from the line' });
    expect(lines[1]).toMatchObject({ msg: 'second', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
    expect(lines[2]).not.toHaveProperty('trace_id');
    expect(lines[3]).toMatchObject({ step: 'inner', msg: 'from a child', trace_id: 'a'.repeat(32) });
    expect(lines[4]).not.toHaveProperty('trace_id');
    expect(fields).toEqual({ trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
  });
});
