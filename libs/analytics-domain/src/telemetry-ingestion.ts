import { telemetryMessageId, type TelemetryBatchMessage } from '@sts/events/telemetry';
import type {
  BatchClaims,
  DeviceRef,
  TelemetryRow,
  TelemetryStore,
  ThreatPublisher,
} from './analytics-ports';

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
}

export interface IngestionOutcome {
  batches: number;
  stored: number;
  /** Batches already stored (a redelivery after a crash, or an agent repeating a batch id). */
  duplicates: number;
  /** Batches of devices deleted meanwhile: dropped. */
  ofDeletedDevices: number;
  threats: number;
  /** Keys of batches another copy of which another replica is storing: to be tried again later. */
  deferred: string[];
}

/**
 * Stores telemetry batches exactly once although they arrive at least once: a batch is known by its
 * device and batch id, every insert holds whole batches and records their keys atomically with the
 * rows (the store's ledger), and batches whose key is stored already are skipped; a batch is stored
 * only by the replica that claimed its key, so two copies taken by two replicas at once count once.
 * Then checks the threat rule for the devices that reported blocks.
 */
export class TelemetryIngestion {
  constructor(
    private readonly store: TelemetryStore,
    private readonly threats: ThreatPublisher,
    private readonly claims: BatchClaims,
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
      threats: 0,
      deferred: [],
    };
    const unique = new Map<string, { batch: TelemetryBatchMessage; holder: string }>();
    batches.forEach((batch, index) => {
      const key = telemetryMessageId(batch.device_id, batch.batch_id);
      if (unique.has(key)) outcome.duplicates++;
      else unique.set(key, { batch, holder: holders[index]! });
    });
    if (unique.size === 0) return outcome;

    const since = new Date(now.getTime() - this.settings.ledgerLookbackMs);
    const [stored, deleted] = await Promise.all([
      this.store.storedBatchKeys([...unique.keys()], since),
      this.store.deletedDevices(distinctDevices([...unique.values()].map(({ batch }) => batch))),
    ]);

    const unstored: [string, { batch: TelemetryBatchMessage; holder: string }][] = [];
    for (const [key, item] of unique) {
      if (stored.has(key)) outcome.duplicates++;
      else if (deleted.has(item.batch.device_id)) outcome.ofDeletedDevices++;
      else unstored.push([key, item]);
    }
    if (unstored.length === 0) return outcome;
    const claimed = await this.claims.claim(unstored.map(([key, { holder }]) => ({ key, holder })));
    const fresh: [string, TelemetryBatchMessage][] = [];
    for (const [key, { batch }] of unstored) {
      if (claimed.has(key)) fresh.push([key, batch]);
      else outcome.deferred.push(key);
    }
    await this.insert(fresh);
    outcome.stored = fresh.length;
    // A device deleted while its batches were stored: its purge may have run before these rows landed.
    const reporting = distinctDevices(fresh.map(([, batch]) => batch));
    const deletedMeanwhile = await this.store.deletedDevices(reporting);
    for (const device of reporting) if (deletedMeanwhile.has(device.deviceId)) await this.store.purge(device);

    const blocking = distinctDevices(
      fresh.map(([, batch]) => batch).filter((batch) => batch.events.some((e) => e.verdict === 'blocked')),
    );
    if (blocking.length > 0) outcome.threats = await this.detectThreats(blocking, now);
    return outcome;
  }

  /** Whole batches per insert, as many as fit in `maxRowsPerInsert`. */
  private async insert(batches: readonly [string, TelemetryBatchMessage][]): Promise<void> {
    let rows: TelemetryRow[] = [];
    for (const [key, batch] of batches) {
      if (rows.length > 0 && rows.length + batch.events.length > this.settings.maxRowsPerInsert) {
        await this.store.insert(rows);
        rows = [];
      }
      const receivedAt = Math.floor(batch.received_at / 1000);
      for (const event of batch.events) {
        rows.push({
          org_id: batch.org_id,
          device_id: batch.device_id,
          batch_key: key,
          observed_at: Math.floor(event.observed_at / 1000),
          host: event.host,
          verdict: event.verdict,
          classification_ms: event.classification_ms,
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

function distinctDevices(batches: readonly TelemetryBatchMessage[]): DeviceRef[] {
  const devices = new Map<string, DeviceRef>();
  for (const batch of batches)
    devices.set(batch.device_id, { orgId: batch.org_id, deviceId: batch.device_id });
  return [...devices.values()];
}
