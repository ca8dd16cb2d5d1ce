import { headers as natsHeaders, type MsgHdrs } from '@nats-io/nats-core';
import type { TextMapGetter } from '@opentelemetry/api';
import { currentTraceHeaders, type Context } from '@sts/observability/trace-context';

/**
 * A W3C trace context (`from`, or the active span's) as NATS message headers, added to `into` when
 * given; undefined while nothing is traced.
 */
export function traceHeaders(into?: MsgHdrs, from?: Context): MsgHdrs | undefined {
  const trace = currentTraceHeaders(from);
  if (!trace) return into;
  const headers = into ?? natsHeaders();
  for (const [key, value] of Object.entries(trace)) headers.set(key, value);
  return headers;
}

/** Reads W3C trace context (`traceparent`, `tracestate`) from a NATS message's headers. */
export const natsHeaderGetter: TextMapGetter<MsgHdrs | undefined> = {
  // MsgHdrs.get answers '' for an absent header.
  get: (headers, key) => headers?.get(key) || undefined,
  keys: (headers) => headers?.keys() ?? [],
};
