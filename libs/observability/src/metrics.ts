import { Counter, Gauge, Histogram, register } from 'prom-client';

/**
 * Every Prometheus metric the system exports, in one place, so that names, labels and buckets stay one
 * vocabulary (README, "Metrics", lists them). All live in prom-client's default registry, which the
 * metrics endpoint serves (metrics-server.ts). Labels are bounded: route patterns, method names, event
 * types, schema and consumer names; never ids.
 */

/** Seconds, from a cached gateway answer (~1 ms) to a slow ClickHouse query or Stripe call. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export const httpRequests = new Counter({
  name: 'sts_http_server_requests_total',
  help: 'HTTP requests the gateway answered, by method, route pattern and status code.',
  labelNames: ['method', 'route', 'status_code'],
});

export const httpRequestDuration = new Histogram({
  name: 'sts_http_server_request_duration_seconds',
  help: 'Time from a request arriving to its answer being sent, by method, route pattern and status code.',
  labelNames: ['method', 'route', 'status_code'],
  buckets: LATENCY_BUCKETS,
});

export const grpcServerHandled = new Counter({
  name: 'sts_grpc_server_handled_total',
  help: 'gRPC calls a service answered, by service, method and status code.',
  labelNames: ['grpc_service', 'grpc_method', 'grpc_code'],
});

export const grpcServerHandlingSeconds = new Histogram({
  name: 'sts_grpc_server_handling_seconds',
  help: 'Time a service took to answer a gRPC call, by service and method.',
  labelNames: ['grpc_service', 'grpc_method'],
  buckets: LATENCY_BUCKETS,
});

export const grpcClientHandled = new Counter({
  name: 'sts_grpc_client_handled_total',
  help: 'gRPC calls made to other services, by method and status code.',
  labelNames: ['grpc_method', 'grpc_code'],
});

export const grpcClientHandlingSeconds = new Histogram({
  name: 'sts_grpc_client_handling_seconds',
  help: 'Time until another service answered a gRPC call (deadline and network included), by method.',
  labelNames: ['grpc_method'],
  buckets: LATENCY_BUCKETS,
});

export const eventsHandled = new Counter({
  name: 'sts_events_handled_total',
  help: 'Events a consumer handled, by durable consumer, event type and outcome (ok, failed: retried later).',
  labelNames: ['consumer', 'event_type', 'outcome'],
});

export const consumerRedeliveries = new Counter({
  name: 'sts_consumer_redeliveries_total',
  help: 'Messages a consumer received again (a failed handler, an acknowledgement that did not arrive).',
  labelNames: ['consumer'],
});

export const consumerMessagesEnded = new Counter({
  name: 'sts_consumer_messages_terminated_total',
  help: 'Messages a consumer ended without success: undecodable, unprocessable, or out of deliveries.',
  labelNames: ['consumer', 'reason'],
});

export const outboxPublished = new Counter({
  name: 'sts_outbox_published_total',
  help: 'Outbox rows published to the events stream, by PostgreSQL schema.',
  labelNames: ['schema'],
});

export const outboxDeadLettered = new Counter({
  name: 'sts_outbox_dead_lettered_total',
  help: 'Outbox rows parked after repeated publish failures (they no longer block later events).',
  labelNames: ['schema'],
});

export const clickhouseInsertRows = new Counter({
  name: 'sts_clickhouse_insert_rows_total',
  help: 'Rows inserted into ClickHouse, by table.',
  labelNames: ['table'],
});

export const clickhouseInsertFailures = new Counter({
  name: 'sts_clickhouse_insert_failures_total',
  help: 'Inserts into ClickHouse that failed (retried by the consumer), by table.',
  labelNames: ['table'],
});

export const clickhouseInsertSeconds = new Histogram({
  name: 'sts_clickhouse_insert_duration_seconds',
  help: 'Time one insert into ClickHouse took, by table.',
  labelNames: ['table'],
  buckets: LATENCY_BUCKETS,
});

/** Values read when Prometheus scrapes (a query, an API call), one read per source for all its gauges. */
type ScrapeReading = Record<string, number>;

/**
 * Gauges whose values are read at scrape time from sources registered while the process runs (one per
 * outbox schema, one per durable consumer). A source that fails to answer reports nothing rather than
 * its last value: an absent series is honest, a frozen one is not.
 */
class ScrapedGauges {
  private readonly sources = new Map<string, () => Promise<ScrapeReading>>();
  private readings: Promise<Map<string, ScrapeReading>> | undefined;
  readonly gauges: Record<string, Gauge>;

  constructor(
    private readonly label: string,
    definitions: Record<string, { name: string; help: string }>,
  ) {
    const first = Object.keys(definitions)[0];
    const collect = (key: string) => async () => {
      const gauge = this.gauges[key];
      if (!gauge) return;
      // A scrape collects the gauges in the order they were made: the first one reads the sources.
      if (key === first || !this.readings) this.readings = this.readAll();
      gauge.reset();
      for (const [source, reading] of await this.readings) {
        const value = reading[key];
        if (value !== undefined) gauge.set({ [this.label]: source }, value);
      }
    };
    this.gauges = Object.fromEntries(
      Object.entries(definitions).map(([key, definition]) => [
        key,
        new Gauge({
          name: definition.name,
          help: definition.help,
          labelNames: [label],
          collect: collect(key),
        }),
      ]),
    );
  }

  /** Registers a source; the returned function removes it (at shutdown). */
  add(source: string, read: () => Promise<ScrapeReading>): () => void {
    this.sources.set(source, read);
    return () => {
      if (this.sources.get(source) === read) this.sources.delete(source);
    };
  }

  /** One read of every source, shared by the gauges collected in one scrape. */
  private async readAll(): Promise<Map<string, ScrapeReading>> {
    const entries = await Promise.all(
      [...this.sources].map(async ([source, read]) => {
        try {
          return [source, await withTimeout(read(), 2_000)] as const;
        } catch {
          return undefined;
        }
      }),
    );
    return new Map(entries.filter((entry) => entry !== undefined));
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** The outbox of each schema: rows waiting to be published and how long the oldest has waited. */
export const outboxBacklog = new ScrapedGauges('schema', {
  events: {
    name: 'sts_outbox_backlog_events',
    help: 'Outbox rows not yet published (parked rows excluded), by PostgreSQL schema.',
  },
  oldestAgeSeconds: {
    name: 'sts_outbox_oldest_unpublished_age_seconds',
    help: 'Age of the oldest outbox row not yet published (0 when none waits), by PostgreSQL schema.',
  },
  parked: {
    name: 'sts_outbox_parked_events',
    help: 'Outbox rows parked after repeated publish failures, waiting for an operator, by schema.',
  },
});

/** Each durable consumer's state on the server: messages not yet delivered, delivered and unacknowledged. */
export const consumerBacklog = new ScrapedGauges('consumer', {
  pending: {
    name: 'sts_consumer_pending_messages',
    help: 'Messages of the stream the durable consumer has not delivered yet.',
  },
  ackPending: {
    name: 'sts_consumer_ack_pending_messages',
    help: 'Messages delivered and not yet acknowledged (being handled, or waiting to be retried).',
  },
  redelivered: {
    name: 'sts_consumer_redelivered_messages',
    help: 'Messages delivered more than once and not yet acknowledged.',
  },
});

/** The text Prometheus scrapes, and its content type. */
export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  return { contentType: register.contentType, body: await register.metrics() };
}
