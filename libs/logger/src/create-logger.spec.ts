import { Writable } from 'node:stream';
import pino from 'pino';
import { REDACTED_PATHS } from './create-logger';

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
