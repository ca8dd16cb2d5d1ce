import { trace } from '@opentelemetry/api';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';

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

export function createLogger(
  service: string,
  level: LoggerOptions['level'] = 'info',
  /** Standard output unless a test reads the lines. */
  destination?: DestinationStream,
): Logger {
  const options: LoggerOptions = {
    name: service,
    level,
    base: { service },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: traceFields,
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * Every line written while a span is active names its trace (`trace_id`, `span_id`), so a log search
 * and a trace lead to each other. Without tracing (@sts/observability/tracing) no span is ever active.
 */
function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
