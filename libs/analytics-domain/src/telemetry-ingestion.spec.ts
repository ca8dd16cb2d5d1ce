import type { TelemetryBatchMessage } from '@sts/events/telemetry';
import type {
  BatchClaims,
  BlockCount,
  DeviceEventProgress,
  DevicePurges,
  DeviceRef,
  DeviceTimeline,
  TelemetryRow,
  TelemetryStore,
} from './analytics-ports';
import {
  DEFAULT_THREAT_RULE,
  ENROLLMENT_CLOCK_MARGIN_MS,
  MAX_COUNTED_CLASSIFICATION_MS,
  TelemetryIngestion,
} from './telemetry-ingestion';

const DAY_MS = 86_400_000;

/** The store's contract in memory: rows, a ledger written with them, device states and detections. */
class MemoryStore implements TelemetryStore {
  inserts: TelemetryRow[][] = [];
  deleted = new Set<string>();
  timelines = new Map<string, DeviceTimeline>();
  detections: (BlockCount & { detectedAt: Date })[] = [];
  get rows() {
    return this.inserts.flat();
  }
  /** As the ledger keeps them: by the UTC day the batch was received, looked up from `since`'s day on. */
  async storedBatchKeys(keys: readonly string[], since: Date) {
    const sinceDay = Math.floor(since.getTime() / DAY_MS);
    const stored = new Set(
      this.rows
        .filter((row) => Math.floor((row.received_at * 1000) / DAY_MS) >= sinceDay)
        .map((row) => row.batch_key),
    );
    return new Set(keys.filter((key) => stored.has(key)));
  }
  async deletedDevices(devices: readonly DeviceRef[]) {
    return new Set(devices.map((d) => d.deviceId).filter((id) => this.deleted.has(id)));
  }
  async deviceTimelines(devices: readonly DeviceRef[]) {
    return new Map(
      devices.flatMap((device) => {
        const timeline = this.timelines.get(device.deviceId);
        return timeline ? [[device.deviceId, timeline] as const] : [];
      }),
    );
  }
  async insert(rows: readonly TelemetryRow[]) {
    this.inserts.push([...rows]);
    this.afterInsert();
  }
  /** Runs after each insert (a deletion landing meanwhile). */
  afterInsert = () => undefined;
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
  async release(claims: readonly { key: string; holder: string }[]) {
    for (const { key, holder } of claims) if (this.holders.get(key) === holder) this.holders.delete(key);
  }

  async claim(claims: readonly { key: string; holder: string }[]) {
    for (const { key, holder } of claims) if (!this.holders.has(key)) this.holders.set(key, holder);
    return new Set(
      claims.filter(({ key, holder }) => this.holders.get(key) === holder).map(({ key }) => key),
    );
  }
}

/** Parked purges, in order; `failing` makes parking fail (NATS away). */
class MemoryPurges implements DevicePurges {
  parked: DeviceRef[] = [];
  failing = false;
  async park(device: DeviceRef) {
    if (this.failing) throw new Error('NATS is away');
    this.parked.push(device);
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

const RELAY_GRACE_MS = 5_000;

/** How far the device events are applied, as the test sets it. */
class SetProgress implements DeviceEventProgress {
  until: number | null = null;
  async appliedUntil() {
    return this.until;
  }
}

function setUp(maxRowsPerInsert = 1_000) {
  const store = new MemoryStore();
  const claims = new MemoryClaims();
  const purges = new MemoryPurges();
  const progress = new SetProgress();
  // Unless a test says otherwise, every device event is applied as of now.
  progress.until = NOW.getTime();
  const published: unknown[] = [];
  let now = NOW;
  let messages = 0;
  const ingestion = new TelemetryIngestion(
    store,
    { publish: async (data) => void published.push(data) },
    claims,
    purges,
    progress,
    {
      threatRule: DEFAULT_THREAT_RULE,
      ledgerLookbackMs: 86_400_000,
      maxRowsPerInsert,
      relayGraceMs: RELAY_GRACE_MS,
    },
    { now: () => now },
  );
  /** Each batch in a message of its own (a fresh holder), unless holders are given. */
  const ingest = (batches: TelemetryBatchMessage[], holders = batches.map(() => `msg-${++messages}`)) =>
    ingestion.ingest(batches, holders);
  return {
    store,
    claims,
    purges,
    progress,
    published,
    ingest,
    advance: (ms: number) => (now = new Date(now.getTime() + ms)),
  };
}

describe('TelemetryIngestion', () => {
  it('gives up the claims of batches it failed to store, so that another process stores them; a copy held by a live process waits', async () => {
    const { store, ingest } = setUp();
    const failing = store.insert.bind(store);
    store.insert = () => Promise.reject(new Error('ClickHouse away'));
    await expect(ingest([batch('d1', 'b1', ['allowed'])], ['process-a:7'])).rejects.toThrow(
      'ClickHouse away',
    );
    store.insert = failing;
    // The same message, redelivered to another process: the claim was given up, so it is stored there.
    const elsewhere = await ingest([batch('d1', 'b1', ['allowed'])], ['process-b:7']);
    expect(elsewhere).toMatchObject({ stored: 1, deferred: [] });
    // A batch claimed by a process still storing it (its acknowledgement lost) waits in another.
    const { ingest: ingestTwice, claims } = setUp();
    await claims.claim([{ key: 'd2:b2', holder: 'process-a:9' }]);
    const meanwhile = await ingestTwice([batch('d2', 'b2', ['allowed'])], ['process-b:9']);
    expect(meanwhile).toMatchObject({ stored: 0, deferred: ['d2:b2'] });
  });

  it('refuses batches without one holder each', async () => {
    const { store, ingest } = setUp();
    await expect(ingest([batch('d1', 'a', ['allowed'])], [])).rejects.toThrow('one holder per batch');
    expect(store.rows).toEqual([]);
  });

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

  it('recognises a batch stored as long before as the ledger lookback', async () => {
    const { store, ingest, advance } = setUp();
    await ingest([batch('d1', 'a', ['allowed'])], ['m1']);
    // Redelivered 23 hours later (the lookback is 24): still in the ledger.
    advance(23 * 3_600_000);
    expect(await ingest([batch('d1', 'a', ['allowed'])], ['m1'])).toMatchObject({ stored: 0, duplicates: 1 });
    expect(store.inserts).toHaveLength(1);
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

  it('parks a purge of what it stored of a device deleted while it was storing it', async () => {
    const { store, purges, ingest } = setUp();
    store.afterInsert = () => void store.deleted.add('d1');
    await ingest([batch('d1', 'a', ['allowed']), batch('d2', 'a', ['allowed'])]);
    expect(purges.parked).toEqual([{ orgId: 'o1', deviceId: 'd1' }]);
  });

  it('parks that purge again when the batch comes back after parking it failed', async () => {
    const { store, purges, ingest } = setUp();
    store.afterInsert = () => void store.deleted.add('d1');
    purges.failing = true;
    await expect(ingest([batch('d1', 'a', ['allowed'])], ['m1'])).rejects.toThrow('NATS is away');
    // The batch's rows are stored (its key is in the ledger); its message comes back.
    purges.failing = false;
    expect(await ingest([batch('d1', 'a', ['allowed'])], ['m1'])).toMatchObject({ duplicates: 1 });
    expect(purges.parked).toEqual([{ orgId: 'o1', deviceId: 'd1' }]);
  });

  it('parks no purge for a stored batch of a device that is not deleted', async () => {
    const { purges, ingest } = setUp();
    await ingest([batch('d1', 'a', ['allowed'])], ['m1']);
    expect(await ingest([batch('d1', 'a', ['allowed'])], ['m1'])).toMatchObject({ duplicates: 1 });
    expect(purges.parked).toEqual([]);
  });

  describe("follows the device's state when the batch was received", () => {
    const DISABLED_AT = NOW.getTime() - 60_000;
    const received = (deviceId: string, batchId: string, at: number) => ({
      ...batch(deviceId, batchId, ['allowed']),
      received_at: at,
    });

    it('drops a batch received while its device was disabled, counts one received just before', async () => {
      const { store, ingest } = setUp();
      store.timelines.set('d1', {
        changes: [
          { state: 'active', at: NOW.getTime() - 3_600_000 },
          { state: 'disabled', at: DISABLED_AT },
          { state: 'active', at: DISABLED_AT + 10_000 },
        ],
        enrolledAt: NOW.getTime() - 3_600_000,
      });
      const outcome = await ingest([
        received('d1', 'before', DISABLED_AT - 1),
        received('d1', 'while', DISABLED_AT + 5_000),
        received('d1', 'after', DISABLED_AT + 10_000),
      ]);
      expect(outcome).toMatchObject({ stored: 2, ofDisabledDevices: 1, unsettled: [] });
      expect([...new Set(store.rows.map((row) => row.batch_key))]).toEqual(['d1:before', 'd1:after']);
    });

    it('lets a batch received while its device was disabled wait while the device events are not applied up to it, however long', async () => {
      const { store, progress, ingest, advance } = setUp();
      store.timelines.set('d1', {
        changes: [{ state: 'disabled', at: NOW.getTime() - 1_000 }],
        enrolledAt: null,
      });
      const late = received('d1', 'late', NOW.getTime() - 500);
      progress.until = null;
      expect(await ingest([late], ['m1'])).toMatchObject({ stored: 0, unsettled: ['d1:late'] });
      // Analytics' device-event consumer is behind (a restart, a retried write): the batch waits, whatever its age.
      progress.until = late.received_at + RELAY_GRACE_MS - 1;
      advance(3_600_000);
      expect(await ingest([late], ['m1'])).toMatchObject({
        stored: 0,
        ofDisabledDevices: 0,
        unsettled: ['d1:late'],
      });
      // Applied up to the grace after it: no enable from before it is on its way any more.
      progress.until = late.received_at + RELAY_GRACE_MS;
      expect(await ingest([late], ['m1'])).toMatchObject({ stored: 0, ofDisabledDevices: 1, unsettled: [] });
      expect(store.rows).toEqual([]);
    });

    it('counts that batch once the enable is heard of, however late', async () => {
      const { store, progress, ingest, advance } = setUp();
      store.timelines.set('d1', {
        changes: [{ state: 'disabled', at: NOW.getTime() - 1_000 }],
        enrolledAt: null,
      });
      const late = received('d1', 'late', NOW.getTime() - 500);
      progress.until = NOW.getTime() - 2_000;
      expect(await ingest([late], ['m1'])).toMatchObject({ unsettled: ['d1:late'] });
      advance(600_000);
      store.timelines.set('d1', {
        changes: [
          { state: 'disabled', at: NOW.getTime() - 1_000 },
          { state: 'active', at: NOW.getTime() - 700 },
        ],
        enrolledAt: null,
      });
      progress.until = NOW.getTime() + 600_000;
      expect(await ingest([late], ['m1'])).toMatchObject({ stored: 1, unsettled: [] });
    });

    it('counts each dropped batch by the state its timeline gives: deleted (settled or not), disabled and settled, disabled and waiting', async () => {
      const { store, ingest } = setUp();
      // Device events are applied up to NOW: a batch received a minute ago is settled, one a second ago is not.
      const SETTLED = NOW.getTime() - 60_000;
      const UNSETTLED = NOW.getTime() - 1_000;
      const changed = (state: 'disabled' | 'deleted'): DeviceTimeline => ({
        changes: [{ state, at: NOW.getTime() - 120_000 }],
        enrolledAt: null,
      });
      store.timelines.set('disabled-1', changed('disabled'));
      store.timelines.set('disabled-2', changed('disabled'));
      store.timelines.set('deleted-1', changed('deleted'));
      store.timelines.set('deleted-2', changed('deleted'));
      const outcome = await ingest([
        received('disabled-1', 'a', SETTLED),
        received('disabled-2', 'a', UNSETTLED),
        received('deleted-1', 'a', SETTLED),
        received('deleted-2', 'a', UNSETTLED),
      ]);
      expect(outcome).toMatchObject({
        stored: 0,
        ofDisabledDevices: 1,
        ofDeletedDevices: 2,
        unsettled: ['disabled-2:a'],
      });
      expect(store.rows).toEqual([]);
    });

    it('asks how far the device events are applied before it reads the timelines', async () => {
      const { store, progress, ingest } = setUp();
      const order: string[] = [];
      const appliedUntil = progress.appliedUntil.bind(progress);
      progress.appliedUntil = () => (order.push('progress'), appliedUntil());
      const timelines = store.deviceTimelines.bind(store);
      store.deviceTimelines = (devices) => (order.push('timelines'), timelines(devices));
      await ingest([received('d1', 'a', NOW.getTime())]);
      expect(order).toEqual(['progress', 'timelines']);
    });
  });

  it("drops events observed before the device's enrollment, beyond the clocks' margin", async () => {
    const { store, ingest } = setUp();
    const enrolledAt = NOW.getTime() - 3_600_000;
    store.timelines.set('d1', { changes: [{ state: 'active', at: enrolledAt }], enrolledAt });
    const backdated = batch('d1', 'a', ['allowed', 'blocked', 'allowed']);
    backdated.events[0]!.observed_at = enrolledAt - 86_400_000;
    backdated.events[1]!.observed_at = enrolledAt - ENROLLMENT_CLOCK_MARGIN_MS - 1_000;
    backdated.events[2]!.observed_at = enrolledAt - ENROLLMENT_CLOCK_MARGIN_MS + 1_000;
    expect(await ingest([backdated])).toMatchObject({ stored: 1, backdated: 2 });
    expect(store.rows.map((row) => row.observed_at)).toEqual([
      Math.floor((enrolledAt - ENROLLMENT_CLOCK_MARGIN_MS + 1_000) / 1000),
    ]);
  });

  it("keeps an event observed exactly the clocks' margin before the device's enrollment", async () => {
    const { store, ingest } = setUp();
    const enrolledAt = NOW.getTime() - 3_600_000;
    store.timelines.set('d1', { changes: [{ state: 'active', at: enrolledAt }], enrolledAt });
    const early = batch('d1', 'a', ['allowed']);
    early.events[0]!.observed_at = enrolledAt - ENROLLMENT_CLOCK_MARGIN_MS;
    expect(await ingest([early])).toMatchObject({ stored: 1, backdated: 0 });
    expect(store.rows).toHaveLength(1);
  });

  it('counts a latency above the maximum as the maximum', async () => {
    const { store, ingest } = setUp();
    const slow = batch('d1', 'a', ['allowed', 'allowed']);
    slow.events[0]!.classification_ms = 600_000;
    slow.events[1]!.classification_ms = 12.5;
    expect(await ingest([slow])).toMatchObject({ stored: 1, capped: 1 });
    expect(store.rows.map((row) => row.classification_ms)).toEqual([MAX_COUNTED_CLASSIFICATION_MS, 12.5]);
  });

  it('counts a latency of exactly the maximum as it is, not as capped', async () => {
    const { store, ingest } = setUp();
    const slow = batch('d1', 'a', ['allowed']);
    slow.events[0]!.classification_ms = MAX_COUNTED_CLASSIFICATION_MS;
    expect(await ingest([slow])).toMatchObject({ stored: 1, capped: 0 });
    expect(store.rows.map((row) => row.classification_ms)).toEqual([MAX_COUNTED_CLASSIFICATION_MS]);
  });

  it('stores times in epoch seconds, as the raw table has them', async () => {
    const { store, ingest } = setUp();
    const message = { ...batch('d1', 'a', ['allowed']), received_at: NOW.getTime() + 999 };
    message.events[0]!.observed_at = NOW.getTime() - 60_500;
    await ingest([message]);
    expect(store.rows).toEqual([
      expect.objectContaining({
        received_at: NOW.getTime() / 1000,
        observed_at: NOW.getTime() / 1000 - 61,
      }),
    ]);
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

  it('fills an insert up to exactly maxRowsPerInsert rows', async () => {
    const { store, ingest } = setUp(5);
    await ingest([
      batch('d1', 'a', ['allowed', 'allowed', 'allowed']),
      batch('d1', 'b', ['allowed', 'allowed']),
    ]);
    expect(store.inserts.map((rows) => rows.length)).toEqual([5]);
  });

  it('counts only the blocks of the window (10 minutes), not of the cooldown (60)', async () => {
    const observedAgo = (minutes: number, verdicts: 'blocked'[], batchId: string) => {
      const message = batch('d1', batchId, verdicts);
      for (const event of message.events) event.observed_at = NOW.getTime() - minutes * 60_000;
      return message;
    };
    const { ingest, published } = setUp();
    await ingest([observedAgo(20, ['blocked', 'blocked', 'blocked', 'blocked'], 'old')]);
    await ingest([observedAgo(0, ['blocked'], 'now')]);
    expect(published).toEqual([]);
    // Four inside the window and one now: a threat.
    await ingest([observedAgo(9, ['blocked', 'blocked', 'blocked', 'blocked'], 'recent')]);
    expect(published).toEqual([expect.objectContaining({ device_id: 'd1', dangerous_blocks: 5 })]);
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

  it('counts a batch with blocks among allowed events towards the threshold', async () => {
    const { ingest, published } = setUp();
    await ingest([batch('d1', 'a', ['allowed', 'blocked', 'blocked', 'blocked', 'blocked', 'blocked'])]);
    expect(published).toEqual([expect.objectContaining({ device_id: 'd1', dangerous_blocks: 5 })]);
  });

  describe('the cooldown (60 minutes) after a detection', () => {
    const FIVE_BLOCKS = Array.from({ length: 5 }, () => 'blocked' as const);
    /** Blocks observed at the clock's now (not NOW), so that they are in the window when ingested. */
    const blocksAt = (now: Date, deviceId: string, batchId: string) => {
      const message = { ...batch(deviceId, batchId, FIVE_BLOCKS), received_at: now.getTime() };
      for (const event of message.events) event.observed_at = now.getTime();
      return message;
    };

    it('keeps a device from a new detection 59 minutes after one, not 61', async () => {
      const { ingest, published, advance } = setUp();
      await ingest([blocksAt(NOW, 'd1', 'a')]);
      expect(published).toHaveLength(1);
      const at59 = advance(59 * 60_000);
      await ingest([blocksAt(at59, 'd1', 'b')]);
      expect(published).toHaveLength(1);
      const at61 = advance(2 * 60_000);
      await ingest([blocksAt(at61, 'd1', 'c')]);
      expect(published).toHaveLength(2);
      expect(published[1]).toMatchObject({ device_id: 'd1', detected_at: at61.toISOString() });
    });

    it('publishes the devices out of their cooldown only, with an empty hostname where none is known', async () => {
      const { ingest, published, advance } = setUp();
      await ingest([blocksAt(NOW, 'd1', 'a')]);
      const later = advance(5 * 60_000);
      await ingest([blocksAt(later, 'd1', 'b'), blocksAt(later, 'd2', 'a')]);
      expect(published).toEqual([
        expect.objectContaining({ device_id: 'd1', hostname: 'kiosk' }),
        expect.objectContaining({ device_id: 'd2', hostname: '' }),
      ]);
    });
  });
});
