// The part of autocannon 8's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  export interface AutocannonRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    /**
     * Called (with a copy of the request and the connection's context) before each request is sent;
     * returns the request to send.
     */
    setupRequest?: (request: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest;
    /** Called with each response to this request (the body is a string). */
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
  }

  export interface AutocannonClient {
    setRequests(requests: AutocannonRequest[]): void;
  }

  export interface AutocannonOptions {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    /** Total number of requests, spread over the connections (instead of a duration). */
    amount?: number;
    pipelining?: number;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    requests?: AutocannonRequest[];
    setupClient?: (client: AutocannonClient) => void;
  }

  /** Percentiles are keyed `p50`, `p97_5`, `p99`, … */
  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    [percentile: `p${string}`]: number;
  }

  export interface AutocannonResult {
    /** Seconds (fractional). */
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    /** Milliseconds. */
    latency: Histogram;
    /** Per-second samples; `total` is the number of completed requests. */
    requests: Histogram & { sent: number };
  }

  export interface AutocannonInstance {
    stop(): void;
    /** Every response, with its response time in milliseconds (not rounded). */
    on(
      event: 'response',
      listener: (client: AutocannonClient, statusCode: number, bytes: number, responseTimeMs: number) => void,
    ): this;
  }

  function autocannon(
    options: AutocannonOptions,
    callback: (error: Error | null, result: AutocannonResult) => void,
  ): AutocannonInstance;

  export default autocannon;
}
