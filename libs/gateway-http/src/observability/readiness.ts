import { answersWithin, type DependencyCheck } from '@sts/grpc/dependency-health';

export interface ReadinessReport {
  /**
   * Every required dependency answers (the others are reported, and do not make the gateway unready),
   * and the gateway is not shutting down.
   */
  ready: boolean;
  /** Shutting down: still serving, but load balancers should send no more. */
  draining: boolean;
  /** Each dependency and whether it answered. */
  checks: Record<string, 'ok' | 'missing'>;
  /** The dependencies that did not answer, for people reading a failed probe. */
  missing: string[];
}

/**
 * The gateway's readiness. Required dependencies (NATS: telemetry intake and cache evictions) decide it;
 * the others (each service) are only reported: one service down must not take every gateway out of the
 * load balancer, and with it the routes that do not need that service. A report is reused for
 * `reuseMs`: several probes a second must not become as many rounds of health calls.
 */
export class Readiness {
  private last: { at: number; report: Promise<ReadinessReport> } | undefined;
  private isDraining = false;

  constructor(
    private readonly checks: Record<string, DependencyCheck>,
    /** The checks that decide readiness (default: all). */
    private readonly required: readonly string[] = Object.keys(checks),
    /** A check that has not answered by then counts as missing. */
    private readonly timeoutMs = 1_000,
    private readonly reuseMs = 1_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** From now on the gateway is not ready, whatever its dependencies say (SIGTERM: drain, then stop). */
  startDraining(): void {
    this.isDraining = true;
    this.last = undefined;
  }

  get draining(): boolean {
    return this.isDraining;
  }

  report(): Promise<ReadinessReport> {
    if (this.last && this.now() - this.last.at < this.reuseMs) return this.last.report;
    const report = this.run();
    this.last = { at: this.now(), report };
    return report;
  }

  private async run(): Promise<ReadinessReport> {
    const names = Object.keys(this.checks);
    const answers = await Promise.all(names.map((name) => answersWithin(this.checks[name]!, this.timeoutMs)));
    const checks = Object.fromEntries(
      names.map((name, index) => [name, answers[index] ? 'ok' : 'missing'] as const),
    );
    const missing = names.filter((_name, index) => !answers[index]);
    const draining = this.draining;
    return {
      ready: !draining && !missing.some((name) => this.required.includes(name)),
      draining,
      checks,
      missing,
    };
  }
}
