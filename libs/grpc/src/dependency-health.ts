import type { HealthImplementation } from 'grpc-health-check';

/** The gRPC health name that answers SERVING while the process runs (liveness), whatever its dependencies do. */
export const LIVENESS_HEALTH_NAME = 'liveness';
/** The gRPC health name of one dependency (readiness detail), e.g. `dependency/postgres`. */
export const dependencyHealthName = (dependency: string) => `dependency/${dependency}`;
/** The dependencies a service may have, in the order a probe asks about them. */
export const KNOWN_DEPENDENCIES = ['postgres', 'nats', 'clickhouse', 'device-purges'] as const;

/** Whether one dependency answers; a check that throws or takes too long counts as not answering. */
export type DependencyCheck = () => Promise<boolean>;

/** Runs one check: false when it throws or has not answered within `timeoutMs`. */
export async function answersWithin(check: DependencyCheck, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([check().catch(() => false), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Keeps a server's health in step with its dependencies: every `intervalMs` each one is checked, and
 * `dependency/<name>` says whether it answers; the server (`''`) and its services are SERVING only while
 * all do (readiness), `liveness` always (a restart would not bring a database back).
 */
export function watchDependencies(options: {
  health: HealthImplementation;
  services: readonly string[];
  checks: Record<string, DependencyCheck>;
  intervalMs: number;
  timeoutMs: number;
  onChange?: (missing: string[]) => void;
}): { stop(): void; checkNow(): Promise<void> } {
  const { health } = options;
  health.setStatus(LIVENESS_HEALTH_NAME, 'SERVING');
  let previous = '';
  const checkNow = async () => {
    const names = Object.keys(options.checks);
    const results = await Promise.all(
      names.map((name) => answersWithin(options.checks[name]!, options.timeoutMs)),
    );
    names.forEach((name, index) =>
      health.setStatus(dependencyHealthName(name), results[index] ? 'SERVING' : 'NOT_SERVING'),
    );
    const missing = names.filter((_name, index) => !results[index]);
    const status = missing.length === 0 ? 'SERVING' : 'NOT_SERVING';
    for (const service of ['', ...options.services]) health.setStatus(service, status);
    if (missing.join(',') !== previous) {
      previous = missing.join(',');
      options.onChange?.(missing);
    }
  };
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= checkNow().finally(() => (running = undefined));
  }, options.intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer), checkNow };
}
