import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics } from 'prom-client';
import type { Logger } from '@sts/logger/create-logger';
import { renderMetrics } from './metrics';

export interface RunningMetricsServer {
  port: number;
  close(): Promise<void>;
}

let runtimeMetricsOn = false;

/**
 * Serves `GET /metrics` (Prometheus text format) on a port of its own, never on the public API:
 * metrics name routes, methods and volumes an outsider has no business seeing. Node's runtime metrics
 * (event loop lag, heap, GC, handles) are collected from the first start on.
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  logger: Logger;
}): Promise<RunningMetricsServer> {
  if (!runtimeMetricsOn) {
    collectDefaultMetrics({ prefix: 'sts_' });
    runtimeMetricsOn = true;
  }
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: GET /metrics\n');
      return;
    }
    renderMetrics().then(
      ({ contentType, body }) => response.writeHead(200, { 'content-type': contentType }).end(body),
      (error: unknown) => {
        options.logger.warn({ err: error }, 'metrics could not be collected');
        response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics could not be collected\n');
      },
    );
  });
  // A scrape is one short request; idle keep-alive connections should not hold a shutdown up.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  options.logger.info({ port }, 'metrics at GET /metrics');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
