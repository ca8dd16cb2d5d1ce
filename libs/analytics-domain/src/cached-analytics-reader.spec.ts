import { windowRange, type Totals, type WindowRange } from './analytics-model';
import type { AnalyticsReader } from './analytics-ports';
import { CachedAnalyticsReader } from './cached-analytics-reader';

const totals = (totalAnalyzed: number): Totals => ({
  totalAnalyzed,
  dangerousBlocks: 0,
  riskyWarnings: 0,
  classificationMsSum: 0,
});

/** A reader whose answers the test releases one by one, counting the queries. */
class ScriptedReader implements AnalyticsReader {
  queries: {
    orgId: string;
    deviceId: string | null;
    release: (value: number) => void;
    fail: (e: Error) => void;
  }[] = [];

  totals(orgId: string, _range: WindowRange, deviceId: string | null): Promise<Totals> {
    return new Promise((resolve, reject) =>
      this.queries.push({ orgId, deviceId, release: (value) => resolve(totals(value)), fail: reject }),
    );
  }

  bucketTotals(): Promise<Map<number, Totals>> {
    return Promise.resolve(new Map([[0, totals(1)]]));
  }

  releaseLast(value: number): void {
    this.queries.at(-1)?.release(value);
  }
}

describe('CachedAnalyticsReader', () => {
  const range = windowRange('24h', new Date('2026-11-25T10:30:00Z'));
  let now = 0;
  let source: ScriptedReader;
  let reader: CachedAnalyticsReader;

  beforeEach(() => {
    now = 0;
    source = new ScriptedReader();
    reader = new CachedAnalyticsReader(source, { freshMs: 1_000 }, { nowMs: () => now });
  });

  it('asks once for concurrent readers of one question, and reuses the answer while fresh', async () => {
    const first = reader.totals('org-1', range, null);
    const second = reader.totals('org-1', range, null);
    expect(source.queries).toHaveLength(1);
    source.releaseLast(7);
    expect(await first).toEqual(totals(7));
    expect(await second).toEqual(totals(7));

    now = 999;
    expect(await reader.totals('org-1', range, null)).toEqual(totals(7));
    expect(source.queries).toHaveLength(1);
  });

  it('keeps organizations, devices and windows apart', async () => {
    void reader.totals('org-1', range, null);
    void reader.totals('org-2', range, null);
    void reader.totals('org-1', range, 'device-1');
    void reader.totals('org-1', windowRange('30d', new Date('2026-11-25T10:30:00Z')), null);
    expect(source.queries.map((query) => [query.orgId, query.deviceId])).toEqual([
      ['org-1', null],
      ['org-2', null],
      ['org-1', 'device-1'],
      ['org-1', null],
    ]);
  });

  it('serves a stale answer once while one refresh runs, then the refreshed one', async () => {
    const first = reader.totals('org-1', range, null);
    source.releaseLast(1);
    await first;

    now = 1_500;
    expect(await reader.totals('org-1', range, null)).toEqual(totals(1));
    expect(await reader.totals('org-1', range, null)).toEqual(totals(1));
    expect(source.queries).toHaveLength(2); // one refresh for both
    source.releaseLast(2);
    await Promise.resolve();
    await Promise.resolve();
    expect(await reader.totals('org-1', range, null)).toEqual(totals(2));
  });

  it('makes readers wait for ClickHouse when the answer is older than twice the freshness', async () => {
    const first = reader.totals('org-1', range, null);
    source.releaseLast(1);
    await first;

    now = 2_000;
    const late = reader.totals('org-1', range, null);
    source.releaseLast(5);
    expect(await late).toEqual(totals(5));
  });

  it('forgets an organization at once (a device was disabled), and only that one', async () => {
    const a = reader.totals('org-1', range, null);
    const b = reader.totals('org-2', range, null);
    source.queries[0]?.release(1);
    source.queries[1]?.release(1);
    await Promise.all([a, b]);

    reader.forget('org-1');
    const after = reader.totals('org-1', range, null);
    expect(source.queries).toHaveLength(3);
    source.releaseLast(9);
    expect(await after).toEqual(totals(9));
    expect(await reader.totals('org-2', range, null)).toEqual(totals(1));
    expect(source.queries).toHaveLength(3);
  });

  it('does not remember a failure: the next reader asks again', async () => {
    const failed = reader.totals('org-1', range, null);
    source.queries[0]?.fail(new Error('ClickHouse is down'));
    await expect(failed).rejects.toThrow('ClickHouse is down');

    void reader.totals('org-1', range, null);
    expect(source.queries).toHaveLength(2);
  });

  it('asks every time when the freshness is 0', async () => {
    const uncached = new CachedAnalyticsReader(source, { freshMs: 0 }, { nowMs: () => now });
    void uncached.totals('org-1', range, null);
    void uncached.totals('org-1', range, null);
    expect(source.queries).toHaveLength(2);
  });
});
