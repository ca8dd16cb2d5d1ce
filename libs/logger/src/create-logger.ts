import { trace, TraceFlags, type Span } from '@opentelemetry/api';
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
 * Every line written while a recorded span is active names its trace (`trace_id`, `span_id`), so a log
 * search and a trace lead to each other. Without tracing (@sts/observability/tracing) no span is ever
 * active; a span left out by sampling is not named (no trace would be found). The gateway, which keeps
 * no active span, binds the same fields to each request's logger.
 */
function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  return (span && logFieldsOf(span)) ?? {};
}

/** The log fields that name a recorded span; undefined for one that sampling left out. */
export function logFieldsOf(span: Span): Record<string, string> | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return traceFlags & TraceFlags.SAMPLED ? { trace_id: traceId, span_id: spanId } : undefined;
}
