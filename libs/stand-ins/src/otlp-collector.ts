import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One span as an OTLP collector receives it, with the `service.name` of the process that sent it. */
export interface CollectedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, unknown>;
}

export interface OtlpCollector {
  /** Base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  url: string;
  spans: CollectedSpan[];
  /** Export requests received (each a batch of spans). */
  requests: number;
  /** Spans received, also those not kept. */
  spanCount: number;
  /** Request bytes received (after decompression). */
  bytes: number;
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        links?: { traceId: string; spanId: string }[];
        attributes?: OtlpAttribute[];
      }[];
    }[];
  }[];
}

const valueOf = (value: OtlpValue): unknown =>
  value.stringValue ??
  value.boolValue ??
  value.doubleValue ??
  (value.intValue === undefined ? undefined : Number(value.intValue));

const attributesOf = (attributes: OtlpAttribute[] = []) =>
  Object.fromEntries(attributes.map((attribute) => [attribute.key, valueOf(attribute.value)]));

/**
 * A local stand-in for an OpenTelemetry collector: the OTLP/HTTP traces endpoint (`POST /v1/traces`)
 * with the JSON encoding, which our exporter sends (libs/observability: worker-thread-span-exporter.ts). Keeps what it receives
 * for a test to look at; answers as a collector does (200 with an empty partial-success object).
 */
export async function startOtlpCollector(
  options: {
    /**
     * Count spans without keeping or parsing them (a benchmark's collector shares the load generator's
     * process and should cost it little).
     */
    countOnly?: boolean;
  } = {},
): Promise<OtlpCollector> {
  const collector: Omit<OtlpCollector, 'url' | 'close'> = { spans: [], requests: 0, spanCount: 0, bytes: 0 };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces') {
        response.writeHead(404).end();
        return;
      }
      if (!String(request.headers['content-type']).startsWith('application/json')) {
        response.writeHead(415, { 'content-type': 'text/plain' }).end('this stand-in speaks OTLP/JSON only');
        return;
      }
      let body = Buffer.concat(chunks);
      if (request.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      collector.requests++;
      collector.bytes += body.length;
      if (options.countOnly) {
        collector.spanCount += occurrences(body, SPAN_KIND_KEY);
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      const received = JSON.parse(body.toString('utf8')) as OtlpExport;
      for (const resourceSpans of received.resourceSpans ?? []) {
        const name = attributesOf(resourceSpans.resource?.attributes)['service.name'];
        const service = typeof name === 'string' ? name : '';
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            collector.spanCount++;
            collector.spans.push({
              service,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId || undefined,
              name: span.name,
              kind: span.kind,
              links: (span.links ?? []).map((link) => ({ traceId: link.traceId, spanId: link.spanId })),
              attributes: attributesOf(span.attributes),
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(collector, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  });
}

/** Every span has one `"kind"` key; its links, events and attributes have none. */
const SPAN_KIND_KEY = Buffer.from('"kind":');

function occurrences(haystack: Buffer, needle: Buffer): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length))
    count++;
  return count;
}
