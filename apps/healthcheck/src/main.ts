import { ConfigError, loadConfig } from '@sts/config/load-config';
import { dependencyHealthName, KNOWN_DEPENDENCIES, LIVENESS_HEALTH_NAME } from '@sts/grpc/dependency-health';
import { loadGrpcTls } from '@sts/grpc/grpc-tls';
import { grpcHealth } from '@sts/grpc/health-probe';
import { healthcheckEnvSchema, healthcheckTarget } from './healthcheck-config';

/**
 * The health check of every image (`node healthcheck.js [--liveness]`): exit 0 when the process in this
 * container answers healthy. A service (GRPC_PORT set) is asked over gRPC health: ready when every
 * dependency answers (a failure prints the missing ones), alive with `--liveness`. The gateway is asked
 * over `/readyz` (or `/livez`). HEALTHCHECK_URL (`grpc://host:port` or an http URL) overrides the target.
 */
const TIMEOUT_MS = 3_000;
const liveness = process.argv.includes('--liveness');

async function healthy(): Promise<boolean> {
  const config = loadConfig(healthcheckEnvSchema);
  const target = healthcheckTarget(config, liveness);
  if (!target.startsWith('grpc://')) {
    const response = await fetch(target, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    if (response.status !== 200) console.error(`not ready: ${await response.text()}`);
    return response.status === 200;
  }
  const address = target.slice('grpc://'.length);
  // With mutual TLS between the services, the probe presents this container's own certificate.
  const tls = loadGrpcTls(config);
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
  (error: unknown) => {
    // A misconfigured probe says so; an unreachable process is just not healthy.
    if (error instanceof ConfigError) console.error(error.message);
    process.exit(1);
  },
);
