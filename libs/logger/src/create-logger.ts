import pino, { type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths that may hold secrets. pino replaces them before a line is written, so a careless
 * `log.info({ req })` cannot leak a bearer token, an enrollment key or an invite token.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-enrollment-key"]',
  'req.headers["x-device-token"]',
  'req.headers["stripe-signature"]',
  'headers.authorization',
  '*.token',
  '*.password',
  '*.secret',
  '*.client_secret',
  '*.token_sealed',
  'token',
  'password',
  'secret',
];

export function createLogger(service: string, level: LoggerOptions['level'] = 'info'): Logger {
  return pino({
    name: service,
    level,
    base: { service },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
