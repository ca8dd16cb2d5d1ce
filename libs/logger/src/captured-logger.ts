import { Writable } from 'node:stream';
import { createLogger, type Logger } from './create-logger';

/** A logger whose lines a test reads back, parsed (for tests only). */
export function capturedLogger(service = 'test'): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      callback();
    },
  });
  return { logger: createLogger(service, 'info', sink), lines };
}
