import { dependencyHealthName, KNOWN_DEPENDENCIES, LIVENESS_HEALTH_NAME } from '@sts/grpc/dependency-health';
import { loadGrpcTls } from '@sts/grpc/grpc-tls';
import { grpcHealth } from '@sts/grpc/health-probe';

/**
 * The health check of every image (`node healthcheck.js [--liveness]`): exit 0 when the process in this
 * container answers healthy. A service (GRPC_PORT set) is asked over gRPC health: ready when every
 * dependency answers (a failure prints the missing ones), alive with `--liveness`. The gateway is asked
 * over `/readyz` (or `/livez`). HEALTHCHECK_URL (`grpc://host:port` or an http URL) overrides the target.
 */
const TIMEOUT_MS = 3_000;
const liveness = process.argv.includes('--liveness');

async function healthy(): Promise<boolean> {
  const target =
    process.env.HEALTHCHECK_URL ??
    (process.env.GRPC_PORT
      ? `grpc://127.0.0.1:${process.env.GRPC_PORT}`
      : `http://127.0.0.1:${process.env.PORT ?? '8080'}/${liveness ? 'livez' : 'readyz'}`);
  if (!target.startsWith('grpc://')) {
    const response = await fetch(target, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    if (response.status !== 200) console.error(`not ready: ${await response.text()}`);
    return response.status === 200;
  }
  const address = target.slice('grpc://'.length);
  // With mutual TLS between the services, the probe presents this container's own certificate.
  const tls = loadGrpcTls({
    GRPC_TLS_CA_FILE: process.env.GRPC_TLS_CA_FILE,
    GRPC_TLS_CERT_FILE: process.env.GRPC_TLS_CERT_FILE,
    GRPC_TLS_KEY_FILE: process.env.GRPC_TLS_KEY_FILE,
  });
  const answer = await grpcHealth(address, TIMEOUT_MS, tls, liveness ? LIVENESS_HEALTH_NAME : '');
  if (answer === 'not-serving') {
    const states = await Promise.all(
      KNOWN_DEPENDENCIES.map((dependency) =>
        grpcHealth(address, TIMEOUT_MS, tls, dependencyHealthName(dependency)),
      ),
    );
    const missing = KNOWN_DEPENDENCIES.filter((_dependency, index) => states[index] === 'not-serving');
    console.error(`not ready: ${missing.join(', ') || 'unknown'} do(es) not answer`);
  }
  return answer === 'serving';
}

healthy().then(
  (ok) => process.exit(ok ? 0 : 1),
  () => process.exit(1),
);
