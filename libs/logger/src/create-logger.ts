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
  const fields = (span && logFieldsOf(span)) ?? (logger as TraceNamingLogger)[NAMED_TRACE];
  // pino merges the line's own fields into the object returned here: a copy, never the bound one.
  return fields ? { trace_id: fields.trace_id, span_id: fields.span_id } : {};
}

/**
 * Where a logger with no active span to read keeps the trace its lines name; read only when a line is
 * written, and inherited by the logger's children. A property, not a WeakMap entry: an entry per sampled
 * request costs the garbage collector ~4 % of a gateway request's instructions at 10 % sampling; nor
 * bindings: `setBindings` re-serializes them (docs/benchmarks.md).
 */
const NAMED_TRACE = Symbol('sts.namedTrace');
interface TraceNamingLogger {
  [NAMED_TRACE]?: TraceLogFields | undefined;
}

/**
 * Every later line of `logger` names this trace (the fields of `logFieldsOf`), or none. A caller that
 * names traces on many short-lived loggers calls this for each, `undefined` for an unsampled one, so
 * that all of them take one shape (a property some have and others lack would make the code that
 * touches them polymorphic).
 */
export function nameTraceInLogs(logger: object, fields: TraceLogFields | undefined): void {
  (logger as TraceNamingLogger)[NAMED_TRACE] = fields;
}

/** The log fields that name a recorded span; undefined for one that sampling left out. */
export function logFieldsOf(span: Span): TraceLogFields | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return traceFlags & TraceFlags.SAMPLED ? { trace_id: traceId, span_id: spanId } : undefined;
}
