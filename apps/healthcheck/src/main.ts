import { loadGrpcTls } from '@sts/grpc/grpc-tls';
import { probeGrpcHealth } from '@sts/grpc/health-probe';

/**
 * The container health check of every image (`node healthcheck.js`): exit 0 when the process in this
 * container answers healthy. A service (GRPC_PORT set) is asked over gRPC health; the gateway over its
 * readiness route (/readyz: NATS and every service answer). HEALTHCHECK_URL (`grpc://host:port` or an http URL) overrides both.
 */
const TIMEOUT_MS = 3_000;

async function healthy(): Promise<boolean> {
  const target =
    process.env.HEALTHCHECK_URL ??
    (process.env.GRPC_PORT
      ? `grpc://127.0.0.1:${process.env.GRPC_PORT}`
      : `http://127.0.0.1:${process.env.PORT ?? '8080'}/readyz`);
  // With mutual TLS between the services, the probe presents this container's own certificate.
  if (target.startsWith('grpc://')) {
    return probeGrpcHealth(
      target.slice('grpc://'.length),
      TIMEOUT_MS,
      loadGrpcTls({
        GRPC_TLS_CA_FILE: process.env.GRPC_TLS_CA_FILE,
        GRPC_TLS_CERT_FILE: process.env.GRPC_TLS_CERT_FILE,
        GRPC_TLS_KEY_FILE: process.env.GRPC_TLS_KEY_FILE,
      }),
    );
  }
  const response = await fetch(target, { signal: AbortSignal.timeout(TIMEOUT_MS) });
  return response.status === 200;
}

healthy().then(
  (ok) => process.exit(ok ? 0 : 1),
  () => process.exit(1),
);
