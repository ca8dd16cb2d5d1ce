import type { EventData } from '@sts/events/event-catalogue';
import type { Verdict } from '@sts/events/telemetry';
import type { Totals, WindowRange } from './analytics-model';

/** Reads of the rollups. `deviceId` null: the organization's devices that are not disabled or deleted. */
export interface AnalyticsReader {
  totals(orgId: string, range: WindowRange, deviceId: string | null): Promise<Totals>;
  /** Totals per bucket, keyed by the bucket's start in epoch ms; buckets without telemetry absent. */
  bucketTotals(orgId: string, range: WindowRange, deviceId: string | null): Promise<Map<number, Totals>>;
}

/**
 * One analyzed address as stored: named as the raw table's columns, times in epoch seconds, so that
 * ingestion builds each row once and the store hands it to ClickHouse as it is (bench/ingestion.bench.ts).
 */
export interface TelemetryRow {
  org_id: string;
  device_id: string;
  batch_key: string;
  observed_at: number;
  host: string;
  verdict: Verdict;
  classification_ms: number;
  received_at: number;
}

export interface DeviceRef {
  orgId: string;
  deviceId: string;
}

export interface BlockCount extends DeviceRef {
  blocked: number;
}

export type DeviceState = 'active' | 'disabled' | 'deleted';

/** A device's lifecycle as analytics has heard it: enough to know its state at any moment. */
export interface DeviceTimeline {
  /** Every change heard of, oldest first: the state from `at` (event time, epoch ms) on. */
  changes: readonly { state: DeviceState; at: number }[];
  /** When it was enrolled (epoch ms); null when analytics never heard of its enrollment. */
  enrolledAt: number | null;
}

/** Writes and the reads ingestion needs. Every write may be repeated (at-least-once delivery). */
export interface TelemetryStore {
  /** Of these batch keys, those already stored (received since `since`). */
  storedBatchKeys(keys: readonly string[], since: Date): Promise<Set<string>>;
  /** Of these devices, the ids of those deleted. */
  deletedDevices(devices: readonly DeviceRef[]): Promise<Set<string>>;
  /** The timelines of these devices, by device id; a device never heard of is absent. */
  deviceTimelines(devices: readonly DeviceRef[]): Promise<Map<string, DeviceTimeline>>;
  /** Stores rows in one atomic insert: all of them or none. */
  insert(rows: readonly TelemetryRow[]): Promise<void>;
  /** Blocked events per device observed in [since, until). */
  blockedCounts(devices: readonly DeviceRef[], since: Date, until: Date): Promise<BlockCount[]>;
  /** Of these devices, the ids of those with a threat detection recorded since `since`. */
  recentlyDetected(devices: readonly DeviceRef[], since: Date): Promise<Set<string>>;
  recordDetection(detection: BlockCount & { detectedAt: Date }): Promise<void>;
  hostnames(devices: readonly DeviceRef[]): Promise<Map<string, string>>;
}

/**
 * Claims on batch keys shared by every replica: of two copies of a batch taken at once (an agent's
 * repeat the stream did not recognise, next to the original), only the claimed one is stored.
 */
export interface BatchClaims {
  /**
   * Claims each key for `holder`: this process's delivery of the message carrying it (its redelivery
   * to this process holds the claim still; to another process it waits, as the first may still be
   * storing it). Answers the keys these holders now hold; the others are being stored elsewhere.
   */
  claim(claims: readonly { key: string; holder: string }[]): Promise<Set<string>>;
  /** Gives up claims these holders hold (their insert failed): another process may take the batches now. */
  release(claims: readonly { key: string; holder: string }[]): Promise<void>;
}

/** The analytics projection of the device lifecycle. */
export interface DeviceStateStore {
  /**
   * Records a state as of `version` (event time in ms), in the device's timeline too; an older version
   * never overwrites a newer one. `enrolledAt` (epoch ms) with the state an enrollment gives.
   */
  setState(
    device: DeviceRef,
    hostname: string,
    state: DeviceState,
    version: number,
    enrolledAt?: number,
  ): Promise<void>;
  /** Removes every row of the device's telemetry, raw and rolled up. */
  purge(device: DeviceRef): Promise<void>;
}

/**
 * Purges to do, parked where no ClickHouse outage loses them and worked off until each is done. A
 * deletion parks its device's purge (with the state to record); ingestion parks another when rows of a
 * deleted device may have landed after the purge began.
 */
export interface DevicePurges {
  park(device: DeviceRef, deletion?: { hostname: string; version: number; eventId: string }): Promise<void>;
}

/**
 * How far analytics has applied the device events (its device-event consumer), so that a batch of a
 * device disabled when it was received is dropped only once no enable before it can still be on its way.
 */
export interface DeviceEventProgress {
  /**
   * The latest moment (epoch ms) at which every device event the stream held had been applied (nothing
   * pending, nothing unacknowledged); null while not known. A lower bound: may lag by a moment (cached).
   */
  appliedUntil(): Promise<number | null>;
}

export interface ThreatPublisher {
  publish(data: EventData<'threat.detected'>): Promise<void>;
}
