import type { TelemetryBatchMessage } from '@sts/events/telemetry';
import type { BatchClaims, BlockCount, DeviceRef, TelemetryRow, TelemetryStore } from './analytics-ports';
import { DEFAULT_THREAT_RULE, TelemetryIngestion } from './telemetry-ingestion';

/** The store's contract in memory: rows, a ledger written with them, device states and detections. */
class MemoryStore implements TelemetryStore {
  inserts: TelemetryRow[][] = [];
  deleted = new Set<string>();
  detections: (BlockCount & { detectedAt: Date })[] = [];
  get rows() {
    return this.inserts.flat();
  }
  async storedBatchKeys(keys: readonly string[]) {
    const stored = new Set(this.rows.map((row) => row.batch_key));
    return new Set(keys.filter((key) => stored.has(key)));
  }
  async deletedDevices(devices: readonly DeviceRef[]) {
    return new Set(devices.map((d) => d.deviceId).filter((id) => this.deleted.has(id)));
  }
  async insert(rows: readonly TelemetryRow[]) {
    this.inserts.push([...rows]);
    this.afterInsert();
  }
  /** Runs after each insert (a deletion landing meanwhile). */
  afterInsert = () => undefined;
  async purge(device: DeviceRef) {
    this.inserts = this.inserts.map((rows) => rows.filter((row) => row.device_id !== device.deviceId));
  }
  async blockedCounts(devices: readonly DeviceRef[], since: Date, until: Date) {
    return devices
      .map((device) => ({
        ...device,
        blocked: this.rows.filter(
          (row) =>
            row.device_id === device.deviceId &&
            row.verdict === 'blocked' &&
            row.observed_at * 1000 >= since.getTime() &&
            row.observed_at * 1000 < until.getTime(),
        ).length,
      }))
      .filter((count) => count.blocked > 0);
  }
  async recentlyDetected(devices: readonly DeviceRef[], since: Date) {
    return new Set(
      this.detections
        .filter((d) => d.detectedAt >= since && devices.some((x) => x.deviceId === d.deviceId))
        .map((d) => d.deviceId),
    );
  }
  async recordDetection(detection: BlockCount & { detectedAt: Date }) {
    this.detections.push(detection);
  }
  async hostnames() {
    return new Map([['d1', 'kiosk']]);
  }
}

/** Claims shared by every replica, as the NATS bucket keeps them: the first holder of a key keeps it. */
class MemoryClaims implements BatchClaims {
  holders = new Map<string, string>();
  async claim(claims: readonly { key: string; holder: string }[]) {
    for (const { key, holder } of claims) if (!this.holders.has(key)) this.holders.set(key, holder);
    return new Set(
      claims.filter(({ key, holder }) => this.holders.get(key) === holder).map(({ key }) => key),
    );
  }
}

const NOW = new Date('2026-11-25T10:00:00Z');

function batch(
  deviceId: string,
  batchId: string,
  verdicts: ('allowed' | 'blocked')[],
): TelemetryBatchMessage {
  return {
    org_id: 'o1',
    device_id: deviceId,
    batch_id: batchId,
    received_at: NOW.getTime(),
    events: verdicts.map((verdict) => ({
      observed_at: NOW.getTime() - 60_000,
      host: 'a.example',
      verdict,
      classification_ms: 5,
    })),
  };
}

function setUp(maxRowsPerInsert = 1_000) {
  const store = new MemoryStore();
  const claims = new MemoryClaims();
  const published: unknown[] = [];
  let now = NOW;
  let messages = 0;
  const ingestion = new TelemetryIngestion(
    store,
    { publish: async (data) => void published.push(data) },
    claims,
    { threatRule: DEFAULT_THREAT_RULE, ledgerLookbackMs: 86_400_000, maxRowsPerInsert },
    { now: () => now },
  );
  /** Each batch in a message of its own (a fresh holder), unless holders are given. */
  const ingest = (batches: TelemetryBatchMessage[], holders = batches.map(() => `msg-${++messages}`)) =>
    ingestion.ingest(batches, holders);
  return { store, claims, published, ingest, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
}

describe('TelemetryIngestion', () => {
  it('stores each batch once: repeats in one pull and batches already in the ledger are skipped', async () => {
    const { store, ingest } = setUp();
    const first = await ingest([
      batch('d1', 'a', ['allowed']),
      batch('d1', 'a', ['allowed']),
      batch('d2', 'a', ['allowed']),
    ]);
    expect(first).toMatchObject({ batches: 3, stored: 2, duplicates: 1 });
    const again = await ingest([batch('d1', 'a', ['allowed']), batch('d1', 'b', ['allowed'])]);
    expect(again).toMatchObject({ stored: 1, duplicates: 1 });
    expect(store.rows.map((row) => row.batch_key).sort()).toEqual(['d1:a', 'd1:b', 'd2:a']);
  });

  it('stores a batch another copy of which another replica claimed nowhere, and says so; its own message keeps its claim', async () => {
    const { store, claims, ingest } = setUp();
    claims.holders.set('d1:a', 'elsewhere');
    const deferred = await ingest(
      [batch('d1', 'a', ['allowed']), batch('d1', 'b', ['allowed'])],
      ['m1', 'm2'],
    );
    expect(deferred).toMatchObject({ stored: 1, deferred: ['d1:a'] });
    expect(store.rows.map((row) => row.batch_key)).toEqual(['d1:b']);
    // m2 comes back (its insert, say, failed afterwards): it holds its claim still.
    store.inserts = [];
    expect(await ingest([batch('d1', 'b', ['allowed'])], ['m2'])).toMatchObject({ stored: 1, deferred: [] });
  });

  it('drops batches of deleted devices', async () => {
    const { store, ingest } = setUp();
    store.deleted.add('gone');
    const outcome = await ingest([batch('gone', 'x', ['allowed']), batch('d1', 'y', ['allowed'])]);
    expect(outcome).toMatchObject({ stored: 1, ofDeletedDevices: 1 });
    expect(store.rows.every((row) => row.device_id === 'd1')).toBe(true);
  });

  it('purges what it stored of a device deleted while it was storing it', async () => {
    const { store, ingest } = setUp();
    store.afterInsert = () => void store.deleted.add('d1');
    await ingest([batch('d1', 'a', ['allowed']), batch('d2', 'a', ['allowed'])]);
    expect(store.rows.map((row) => row.device_id)).toEqual(['d2']);
  });

  it('never splits a batch across inserts', async () => {
    const { store, ingest } = setUp(5);
    await ingest([
      batch('d1', 'a', ['allowed', 'allowed', 'allowed']),
      batch('d1', 'b', ['allowed', 'allowed', 'allowed']),
      batch('d1', 'c', ['allowed']),
    ]);
    expect(store.inserts.map((rows) => [...new Set(rows.map((row) => row.batch_key))])).toEqual([
      ['d1:a'],
      ['d1:b', 'd1:c'],
    ]);
  });

  it('publishes a threat at the threshold, once per cooldown', async () => {
    const { ingest, published, advance } = setUp();
    await ingest([batch('d1', 'a', ['blocked', 'blocked', 'blocked', 'blocked'])]);
    expect(published).toEqual([]);
    await ingest([batch('d1', 'b', ['blocked'])]);
    expect(published).toEqual([
      expect.objectContaining({
        device_id: 'd1',
        hostname: 'kiosk',
        dangerous_blocks: 5,
        window_minutes: 10,
      }),
    ]);
    advance(30 * 60_000);
    await ingest([
      batch(
        'd1',
        'c',
        Array.from({ length: 6 }, () => 'blocked' as const),
      ),
    ]);
    expect(published).toHaveLength(1);
  });
});
