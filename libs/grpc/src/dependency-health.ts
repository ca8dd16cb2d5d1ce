import type { HealthImplementation } from 'grpc-health-check';

/** The gRPC health name that answers SERVING while the process runs (liveness), whatever its dependencies do. */
export const LIVENESS_HEALTH_NAME = 'liveness';
/** The gRPC health name of one dependency (readiness detail), e.g. `dependency/postgres`. */
export const dependencyHealthName = (dependency: string) => `dependency/${dependency}`;
/**
 * The dependencies that decide a service's readiness, in the order a probe asks about them. Informational
 * checks (analytics' `device-purges`) are reported too but never make a service not ready, so a probe
 * explaining why one is not ready does not name them.
 */
export const KNOWN_DEPENDENCIES = ['postgres', 'nats', 'clickhouse'] as const;

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
 * all `checks` do (readiness), `liveness` always (a restart would not bring a database back).
 * `informational` checks are reported as `dependency/<name>` alike but leave readiness alone: what one
 * names (a purge waiting long) is for an operator, and taking every replica out of service would not help.
 */
export function watchDependencies(options: {
  health: HealthImplementation;
  services: readonly string[];
  checks: Record<string, DependencyCheck>;
  informational?: Record<string, DependencyCheck>;
  intervalMs: number;
  timeoutMs: number;
  /** Called when the checks that do not answer change. */
  onChange?: (missing: string[]) => void;
  /** Called when the informational checks that do not answer change. */
  onInformationalChange?: (failing: string[]) => void;
}): { stop(): void; checkNow(): Promise<void> } {
  const { health } = options;
  const informational = options.informational ?? {};
  for (const name of Object.keys(informational))
    if (name in options.checks) throw new Error(`dependency ${name} is checked twice`);
  health.setStatus(LIVENESS_HEALTH_NAME, 'SERVING');
  let previous = '';
  let previousInformational = '';
  const failing = async (checks: Record<string, DependencyCheck>) => {
    const names = Object.keys(checks);
    const results = await Promise.all(names.map((name) => answersWithin(checks[name]!, options.timeoutMs)));
    names.forEach((name, index) =>
      health.setStatus(dependencyHealthName(name), results[index] ? 'SERVING' : 'NOT_SERVING'),
    );
    return names.filter((_name, index) => !results[index]);
  };
  const checkNow = async () => {
    const [missing, missingInformational] = await Promise.all([
      failing(options.checks),
      failing(informational),
    ]);
    const status = missing.length === 0 ? 'SERVING' : 'NOT_SERVING';
    for (const service of ['', ...options.services]) health.setStatus(service, status);
    if (missing.join(',') !== previous) {
      previous = missing.join(',');
      options.onChange?.(missing);
    }
    if (missingInformational.join(',') !== previousInformational) {
      previousInformational = missingInformational.join(',');
      options.onInformationalChange?.(missingInformational);
    }
  };
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= checkNow().finally(() => (running = undefined));
  }, options.intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer), checkNow };
}
