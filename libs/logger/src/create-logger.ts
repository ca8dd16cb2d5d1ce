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

/** What a log line says of its trace. */
export interface TraceLogFields {
  trace_id: string;
  span_id: string;
}

/**
 * Every line written while a recorded span is active names its trace (`trace_id`, `span_id`), so a log
 * search and a trace lead to each other. Without tracing (@sts/observability/tracing) no span is ever
 * active; a span left out by sampling is not named (no trace would be found). The gateway, which keeps
 * no active span, names a sampled request's trace on that request's logger (`nameTraceInLogs`).
 */
function traceFields(_line: object, _level: number, logger: object): Partial<TraceLogFields> {
  const span = trace.getActiveSpan();
  const fields = (span && logFieldsOf(span)) ?? tracesNamedByLogger.get(logger);
  // pino merges the line's own fields into the object returned here: a copy, never the bound one.
  return fields ? { trace_id: fields.trace_id, span_id: fields.span_id } : {};
}

/**
 * The trace fields of loggers that have no active span to read them from. Looked up only when a line
 * is written: binding them into the logger (`setBindings`) re-serializes its bindings, about 2 µs per
 * request at 10 % sampling in the gateway (docs/benchmarks.md).
 */
const tracesNamedByLogger = new WeakMap<object, TraceLogFields>();

/** Every later line of `logger` names this trace (the fields of `logFieldsOf`). */
export function nameTraceInLogs(logger: object, fields: TraceLogFields): void {
  tracesNamedByLogger.set(logger, fields);
}

/** The log fields that name a recorded span; undefined for one that sampling left out. */
export function logFieldsOf(span: Span): TraceLogFields | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return traceFlags & TraceFlags.SAMPLED ? { trace_id: traceId, span_id: spanId } : undefined;
}
