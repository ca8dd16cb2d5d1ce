import { TELEMETRY_LIMITS, telemetryMessageId, type TelemetryBatchMessage } from '@sts/events/telemetry';
import type {
  BatchClaims,
  DeviceEventProgress,
  DevicePurges,
  DeviceRef,
  DeviceState,
  DeviceTimeline,
  TelemetryRow,
  TelemetryStore,
  ThreatPublisher,
} from './analytics-ports';

/**
 * A classification latency above this counts as this much: a classification that hung for minutes is a
 * measuring error, and one such event must not outweigh thousands of real ones in the mean.
 */
export const MAX_COUNTED_CLASSIFICATION_MS = 60_000;

/**
 * Events observed more than this before their device was enrolled are dropped: a device cannot have
 * analyzed anything before it existed. The margin is the clock drift the gateway allows ahead (a
 * device's clock against the servers').
 */
export const ENROLLMENT_CLOCK_MARGIN_MS = TELEMETRY_LIMITS.futureMs;

export interface ThreatRule {
  /** Blocks from one device… */
  threshold: number;
  /** …within this many minutes emit `threat.detected`… */
  windowMinutes: number;
  /** …at most once per device in this many minutes. */
  cooldownMinutes: number;
}

export const DEFAULT_THREAT_RULE: ThreatRule = { threshold: 5, windowMinutes: 10, cooldownMinutes: 60 };

export interface IngestionSettings {
  threatRule: ThreatRule;
  /** How far back stored batch keys are looked up: at least as long as a batch may wait in the stream. */
  ledgerLookbackMs: number;
  /** Rows per insert at most (whole batches only, so that a batch is stored all at once or not at all). */
  maxRowsPerInsert: number;
  /**
   * How long after a batch was received a device event from before it may still be on its way to the
   * events stream (the outbox relay of the service that made the change). A batch received while its
   * device was disabled is dropped only once the device events are applied up to this long after it was
   * received; until then it waits for an enable that may not have reached analytics yet (the gateway
   * that served the enable takes batches at once).
   */
  relayGraceMs: number;
}

export interface IngestionOutcome {
  batches: number;
  stored: number;
  /** Batches already stored (a redelivery after a crash, or an agent repeating a batch id). */
  duplicates: number;
  /** Batches of devices deleted meanwhile: dropped. */
  ofDeletedDevices: number;
  /** Batches received while their device was disabled: dropped. */
  ofDisabledDevices: number;
  /** Events observed before their device was enrolled: dropped. */
  backdated: number;
  /** Events whose latency counts as MAX_COUNTED_CLASSIFICATION_MS. */
  capped: number;
  threats: number;
  /** Keys of batches another copy of which another replica is storing: to be tried again later. */
  deferred: string[];
  /**
   * Keys of batches received while their device was last heard disabled, before analytics has applied the
   * device events that could enable it again: to be tried again later.
   */
  unsettled: string[];
}

/**
 * Stores telemetry batches exactly once although they arrive at least once: a batch is known by its
 * device and batch id, every insert holds whole batches and records their keys atomically with the
 * rows (the store's ledger), and batches whose key is stored already are skipped; a batch is stored
 * only by the replica that claimed its key, so two copies taken by two replicas at once count once.
 * What is counted follows the device's lifecycle: batches of deleted devices, and batches received
 * while their device was disabled (its state as of the batch's `received_at`, so a batch accepted just
 * before a disable still counts; decided once the device events up to then are applied), are dropped;
 * so are events observed before the device's enrollment, and latencies count up to
 * MAX_COUNTED_CLASSIFICATION_MS. Then checks the threat rule for the devices that reported blocks.
 */
export class TelemetryIngestion {
  constructor(
    private readonly store: TelemetryStore,
    private readonly threats: ThreatPublisher,
    private readonly claims: BatchClaims,
    private readonly purges: DevicePurges,
    private readonly deviceEvents: DeviceEventProgress,
    private readonly settings: IngestionSettings,
    private readonly clock: { now(): Date },
  ) {}

  /** `holders[i]` names the message that carried `batches[i]` (its stream sequence). */
  async ingest(
    batches: readonly TelemetryBatchMessage[],
    holders: readonly string[],
  ): Promise<IngestionOutcome> {
    if (holders.length !== batches.length) throw new Error('one holder per batch');
    const now = this.clock.now();
    const outcome: IngestionOutcome = {
      batches: batches.length,
      stored: 0,
      duplicates: 0,
      ofDeletedDevices: 0,
      ofDisabledDevices: 0,
      backdated: 0,
      capped: 0,
      threats: 0,
      deferred: [],
      unsettled: [],
    };
    const unique = new Map<string, { batch: TelemetryBatchMessage; holder: string }>();
    batches.forEach((batch, index) => {
      const key = telemetryMessageId(batch.device_id, batch.batch_id);
      if (unique.has(key)) outcome.duplicates++;
      else unique.set(key, { batch, holder: holders[index]! });
    });
    if (unique.size === 0) return outcome;

    const since = new Date(now.getTime() - this.settings.ledgerLookbackMs);
    const devices = distinctDevices([...unique.values()].map(({ batch }) => batch));
    // Before the timelines are read: every device event applied by then is in them.
    const appliedUntil = await this.deviceEvents.appliedUntil();
    const [stored, deleted, timelines] = await Promise.all([
      this.store.storedBatchKeys([...unique.keys()], since),
      this.store.deletedDevices(devices),
      this.store.deviceTimelines(devices),
    ]);

    // Devices whose purge must run (again): rows of theirs may have landed after it began.
    const toPurge = new Map<string, DeviceRef>();
    const unstored: [string, { batch: TelemetryBatchMessage; holder: string }][] = [];
    for (const [key, item] of unique) {
      const { batch } = item;
      if (stored.has(key)) {
        outcome.duplicates++;
        // Stored, and its device deleted since: parking the purge may have failed after the insert.
        if (deleted.has(batch.device_id)) toPurge.set(batch.device_id, refOf(batch));
        continue;
      }
      if (deleted.has(batch.device_id)) {
        outcome.ofDeletedDevices++;
        continue;
      }
      const state = stateAt(timelines.get(batch.device_id), batch.received_at);
      if (state === 'active') unstored.push([key, item]);
      else if (state === 'disabled' && settled(batch.received_at, appliedUntil, this.settings.relayGraceMs))
        outcome.ofDisabledDevices++;
      else if (state === 'disabled') outcome.unsettled.push(key);
      else outcome.ofDeletedDevices++;
    }

    const fresh: [string, TelemetryBatchMessage][] = [];
    if (unstored.length > 0) {
      const claimed = await this.claims.claim(unstored.map(([key, { holder }]) => ({ key, holder })));
      for (const [key, { batch }] of unstored) {
        if (claimed.has(key)) fresh.push([key, batch]);
        else outcome.deferred.push(key);
      }
      try {
        await this.insert(fresh, timelines, outcome);
      } catch (error) {
        // Not stored: whichever process takes these batches next may claim them (a crash instead leaves
        // the claims to expire).
        await this.claims
          .release(fresh.map(([key]) => ({ key, holder: unique.get(key)!.holder })))
          .catch(() => undefined);
        throw error;
      }
      outcome.stored = fresh.length;
      // A device deleted while its batches were stored: its purge may have run before these rows landed.
      const reporting = distinctDevices(fresh.map(([, batch]) => batch));
      const deletedMeanwhile = await this.store.deletedDevices(reporting);
      for (const device of reporting)
        if (deletedMeanwhile.has(device.deviceId)) toPurge.set(device.deviceId, device);
    }
    for (const device of toPurge.values()) await this.purges.park(device);

    const blocking = distinctDevices(
      fresh.map(([, batch]) => batch).filter((batch) => batch.events.some((e) => e.verdict === 'blocked')),
    );
    if (blocking.length > 0) outcome.threats = await this.detectThreats(blocking, now);
    return outcome;
  }

  /**
   * Whole batches per insert, as many as fit in `maxRowsPerInsert`; events observed before their
   * device's enrollment are left out, latencies capped.
   */
  private async insert(
    batches: readonly [string, TelemetryBatchMessage][],
    timelines: ReadonlyMap<string, DeviceTimeline>,
    outcome: IngestionOutcome,
  ): Promise<void> {
    let rows: TelemetryRow[] = [];
    for (const [key, batch] of batches) {
      if (rows.length > 0 && rows.length + batch.events.length > this.settings.maxRowsPerInsert) {
        await this.store.insert(rows);
        rows = [];
      }
      const receivedAt = Math.floor(batch.received_at / 1000);
      const enrolledAt = timelines.get(batch.device_id)?.enrolledAt ?? null;
      const earliest = enrolledAt === null ? 0 : enrolledAt - ENROLLMENT_CLOCK_MARGIN_MS;
      for (const event of batch.events) {
        if (event.observed_at < earliest) {
          outcome.backdated++;
          continue;
        }
        let classificationMs = event.classification_ms;
        if (classificationMs > MAX_COUNTED_CLASSIFICATION_MS) {
          classificationMs = MAX_COUNTED_CLASSIFICATION_MS;
          outcome.capped++;
        }
        rows.push({
          org_id: batch.org_id,
          device_id: batch.device_id,
          batch_key: key,
          observed_at: Math.floor(event.observed_at / 1000),
          host: event.host,
          verdict: event.verdict,
          classification_ms: classificationMs,
          received_at: receivedAt,
        });
      }
    }
    if (rows.length > 0) await this.store.insert(rows);
  }

  /**
   * Devices with `threshold` blocks observed in the last `windowMinutes` and no detection in the last
   * `cooldownMinutes`: publish, then record. A crash between the two publishes again at the next
   * check; the publisher's message id (device and cooldown period) lets the stream drop the repeat.
   */
  private async detectThreats(devices: DeviceRef[], now: Date): Promise<number> {
    const rule = this.settings.threatRule;
    const since = new Date(now.getTime() - rule.windowMinutes * 60_000);
    // Events observed a little ahead of the server's clock still count.
    const until = new Date(now.getTime() + 5 * 60_000);
    const counts = (await this.store.blockedCounts(devices, since, until)).filter(
      (count) => count.blocked >= rule.threshold,
    );
    if (counts.length === 0) return 0;
    const cooled = await this.store.recentlyDetected(
      counts,
      new Date(now.getTime() - rule.cooldownMinutes * 60_000),
    );
    const due = counts.filter((count) => !cooled.has(count.deviceId));
    if (due.length === 0) return 0;
    const hostnames = await this.store.hostnames(due);
    for (const count of due) {
      await this.threats.publish({
        org_id: count.orgId,
        device_id: count.deviceId,
        hostname: hostnames.get(count.deviceId) ?? '',
        dangerous_blocks: count.blocked,
        window_minutes: rule.windowMinutes,
        detected_at: now.toISOString(),
      });
      await this.store.recordDetection({ ...count, detectedAt: now });
    }
    return due.length;
  }
}

/**
 * The device's state at `at` (epoch ms): the last change heard of at or before it. Active before any
 * change (a device analytics has not heard of yet, or a batch that overtook the enrollment event).
 */
export function stateAt(timeline: DeviceTimeline | undefined, at: number): DeviceState {
  let state: DeviceState = 'active';
  for (const change of timeline?.changes ?? []) {
    if (change.at > at) break;
    state = change.state;
  }
  return state;
}

/**
 * Whether the state at `receivedAt` is final: every device event from before it (published within
 * `graceMs` of it) has been applied, however late analytics' device-event consumer got to it.
 */
function settled(receivedAt: number, appliedUntil: number | null, graceMs: number): boolean {
  return appliedUntil !== null && receivedAt + graceMs <= appliedUntil;
}

function refOf(batch: TelemetryBatchMessage): DeviceRef {
  return { orgId: batch.org_id, deviceId: batch.device_id };
}

function distinctDevices(batches: readonly TelemetryBatchMessage[]): DeviceRef[] {
  const devices = new Map<string, DeviceRef>();
  for (const batch of batches)
    devices.set(batch.device_id, { orgId: batch.org_id, deviceId: batch.device_id });
  return [...devices.values()];
}
