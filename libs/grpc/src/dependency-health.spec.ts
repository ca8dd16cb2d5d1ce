import { HealthImplementation, type ServingStatus } from 'grpc-health-check';
import { dependencyHealthName, LIVENESS_HEALTH_NAME, watchDependencies } from './dependency-health';

/** The health a server answers with, as last set. */
class RecordedHealth extends HealthImplementation {
  readonly statuses = new Map<string, ServingStatus>();
  override setStatus(service: string, status: ServingStatus): void {
    this.statuses.set(service, status);
    super.setStatus(service, status);
  }
}

describe('watchDependencies', () => {
  const answers = (value: boolean) => () => Promise.resolve(value);
  const watchers: { stop(): void }[] = [];
  afterEach(() => watchers.splice(0).forEach((watcher) => watcher.stop()));

  function watch(checks: Record<string, () => Promise<boolean>>, informational = {}) {
    const health = new RecordedHealth();
    const changes: string[][] = [];
    const informationalChanges: string[][] = [];
    const watcher = watchDependencies({
      health,
      services: ['analytics.v1.AnalyticsService'],
      checks,
      informational,
      intervalMs: 60_000,
      timeoutMs: 1_000,
      onChange: (missing) => changes.push(missing),
      onInformationalChange: (failing) => informationalChanges.push(failing),
    });
    watchers.push(watcher);
    return { health, watcher, changes, informationalChanges };
  }

  it('is ready only while every check answers, and names the one that does not', async () => {
    const { health, watcher, changes } = watch({ nats: answers(true), clickhouse: answers(false) });
    await watcher.checkNow();
    expect(Object.fromEntries(health.statuses)).toEqual({
      [LIVENESS_HEALTH_NAME]: 'SERVING',
      [dependencyHealthName('nats')]: 'SERVING',
      [dependencyHealthName('clickhouse')]: 'NOT_SERVING',
      '': 'NOT_SERVING',
      'analytics.v1.AnalyticsService': 'NOT_SERVING',
    });
    expect(changes).toEqual([['clickhouse']]);
  });

  it('reports an informational check that fails without taking the server out of service', async () => {
    let purgesOnTime = true;
    const { health, watcher, changes, informationalChanges } = watch(
      { nats: answers(true) },
      { 'device-purges': () => Promise.resolve(purgesOnTime) },
    );
    await watcher.checkNow();
    expect(health.statuses.get(dependencyHealthName('device-purges'))).toBe('SERVING');
    purgesOnTime = false;
    await watcher.checkNow();
    expect(Object.fromEntries(health.statuses)).toEqual({
      [LIVENESS_HEALTH_NAME]: 'SERVING',
      [dependencyHealthName('nats')]: 'SERVING',
      [dependencyHealthName('device-purges')]: 'NOT_SERVING',
      '': 'SERVING',
      'analytics.v1.AnalyticsService': 'SERVING',
    });
    expect(changes).toEqual([]);
    expect(informationalChanges).toEqual([['device-purges']]);
  });

  it('refuses a dependency both deciding readiness and informational', () => {
    expect(() =>
      watchDependencies({
        health: new RecordedHealth(),
        services: [],
        checks: { clickhouse: answers(true) },
        informational: { clickhouse: answers(true) },
        intervalMs: 60_000,
        timeoutMs: 1_000,
      }),
    ).toThrow('dependency clickhouse is checked twice');
  });
});
