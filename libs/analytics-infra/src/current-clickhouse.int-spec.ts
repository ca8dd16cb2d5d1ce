import { randomBytes } from 'node:crypto';
import {
  NO_TOTALS,
  summaryOf,
  windowRange,
  type Totals,
  type WindowRange,
} from '@sts/analytics-domain/analytics-model';
import type {
  BlockCount,
  DeviceRef,
  DeviceState,
  DeviceTimeline,
  TelemetryRow,
} from '@sts/analytics-domain/analytics-ports';
import type * as ClickHouseClientModule from '@sts/clickhouse/clickhouse-client';
import {
  createClickHouseClient,
  type ClickHouseClient,
  type ClickHouseClientOptions,
} from '@sts/clickhouse/clickhouse-client';
import { migrationProgress, runClickHouseMigrations } from '@sts/clickhouse/clickhouse-migrations';
import { identifier, sql, type SqlFragment } from '@sts/clickhouse/sql-escape';
import type { Verdict } from '@sts/events/telemetry';
import { createLogger } from '@sts/logger/create-logger';
import { startChdb, type ChdbServer } from '@sts/testing/chdb-client';
import { dropClickHouseDatabase } from '@sts/testing/clickhouse';
import { eventually } from '@sts/testing/eventually';
import { analyticsMigrations, DEVICE_TELEMETRY_TABLES } from './analytics-migrations';
import { dropExpiredPartitions, retentionOf } from './analytics-retention';
import { ClickHouseAnalyticsStore } from './clickhouse-analytics-store';

// The analytics SQL on the ClickHouse that tests and production default to (Debian's 18.16, CLICKHOUSE_URL)
// and on a current one (chDB, in this process: scripts/ensure-chdb.sh installs it), with the same data:
// schema and ledger, every store method, state changes, purges and retention must answer the same on both,
// and as computed here from the data (so that an answer wrong on both fails too).

/** The migration runner reaches chDB through `createClickHouseClient` with this URL (its own client otherwise). */
const CHDB_URL = 'chdb://in-process';
let mockChdb: ChdbServer | undefined;
jest.mock('@sts/clickhouse/clickhouse-client', () => {
  const actual = jest.requireActual<typeof ClickHouseClientModule>('@sts/clickhouse/clickhouse-client');
  return {
    ...actual,
    createClickHouseClient: (options: ClickHouseClientOptions) => {
      if (!options.url.startsWith('chdb:')) return actual.createClickHouseClient(options);
      if (!mockChdb) throw new Error('chDB is not started');
      return mockChdb.client({
        database: options.database ?? 'default',
        clickhouse_settings: { ...actual.CLICKHOUSE_SETTINGS, ...options.settings },
      });
    },
  };
});

const logger = createLogger('current-clickhouse-test', 'silent');
/**
 * A database of this file's own on the server of CLICKHOUSE_URL (18.16 here), dropped at the end. On that
 * server alone, also where the run sets CLICKHOUSE_CLUSTER: chDB has no cluster to compare a cluster with.
 * The same name on chDB, so that every statement (system.parts filters included) is the same text.
 */
const serverUrl = process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
const database = `sts_current_${randomBytes(5).toString('hex')}`;
const serverClient = createClickHouseClient({ url: serverUrl, database });

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const NOW = new Date('2026-11-25T10:20:30Z');
const at = (offsetMs: number) => new Date(NOW.getTime() + offsetMs);
const R24 = windowRange('24h', NOW);
const R30 = windowRange('30d', NOW);
const RETENTION = {
  TELEMETRY_RAW_RETENTION_DAYS: 35,
  TELEMETRY_HOURLY_RETENTION_DAYS: 60,
  TELEMETRY_DAILY_RETENTION_DAYS: 90,
};

// Organizations and devices (fixed ids). SHARED is one id in two organizations (kept apart by org_id).
const ORG_A = '0a0a0a0a-0000-4000-8000-00000000000a';
const ORG_B = '0b0b0b0b-0000-4000-8000-00000000000b';
const ORG_C = '0c0c0c0c-0000-4000-8000-00000000000c';
const ORGS = [ORG_A, ORG_B, ORG_C];
const A_ACTIVE = 'a1000000-0000-4000-8000-000000000001';
const A_DISABLED = 'a2000000-0000-4000-8000-000000000002';
const A_DELETED = 'a3000000-0000-4000-8000-000000000003';
const A_REENABLED = 'a4000000-0000-4000-8000-000000000004';
const A_UNKNOWN = 'a5000000-0000-4000-8000-000000000005';
const B_ACTIVE = 'b1000000-0000-4000-8000-000000000001';
const B_ENROLLED_TWICE = 'b2000000-0000-4000-8000-000000000002';
const C_QUIET = 'c1000000-0000-4000-8000-000000000001';
const SHARED = '5e000000-0000-4000-8000-0000000000ff';
const NO_SUCH_DEVICE = 'ffffffff-0000-4000-8000-ffffffffffff';
/** Read for its timeline only: two changes at one version (their order is the query's, by state name). */
const ORG_T = '0d0d0d0d-0000-4000-8000-00000000000d';
const T_TIED = 'd1000000-0000-4000-8000-000000000001';
/** Telemetry with classification times as agents report them (not exact in binary), read on its own. */
const ORG_R = '0e0e0e0e-0000-4000-8000-00000000000e';
const R_DEVICES = ['e1000000-0000-4000-8000-000000000001', 'e2000000-0000-4000-8000-000000000002'];
/** Hostnames come from devices: quotes, backslashes, controls and every script must come back as they went. */
const ODD_HOSTNAME = `quiet "Q" \\ 'x' \t\n é ß 中文 العربية 😀 \u2028 /slash \u0000 end`;

const DEVICES: Record<string, string[]> = {
  [ORG_A]: [A_ACTIVE, A_DISABLED, A_DELETED, A_REENABLED, A_UNKNOWN, SHARED],
  [ORG_B]: [B_ACTIVE, B_ENROLLED_TWICE, SHARED],
  [ORG_C]: [C_QUIET],
};
/** Devices that report telemetry (C_QUIET never does). */
const REPORTING: DeviceRef[] = [
  ...[A_ACTIVE, A_DISABLED, A_DELETED, A_REENABLED, A_UNKNOWN, SHARED].map((deviceId) => ({
    orgId: ORG_A,
    deviceId,
  })),
  ...[B_ACTIVE, B_ENROLLED_TWICE, SHARED].map((deviceId) => ({ orgId: ORG_B, deviceId })),
];
const refsOf = (orgId: string): DeviceRef[] => [
  ...(DEVICES[orgId] ?? []).map((deviceId) => ({ orgId, deviceId })),
  { orgId, deviceId: NO_SUCH_DEVICE },
];

interface Change {
  device: DeviceRef;
  hostname: string;
  state: DeviceState;
  version: number;
  enrolledAt: number;
}
const change = (
  orgId: string,
  deviceId: string,
  hostname: string,
  state: DeviceState,
  version: Date,
  enrolledAt?: Date,
): Change => ({
  device: { orgId, deviceId },
  hostname,
  state,
  version: version.getTime(),
  enrolledAt: enrolledAt?.getTime() ?? 0,
});

/** The lifecycle heard before any telemetry is read. */
const FIRST_CHANGES: Change[] = [
  change(ORG_A, A_ACTIVE, 'kiosk-1', 'active', at(-45 * DAY), at(-45 * DAY)),
  change(ORG_A, A_DISABLED, 'laptop-2', 'active', at(-44 * DAY), at(-44 * DAY)),
  change(ORG_A, A_DISABLED, 'laptop-2', 'disabled', at(-3 * DAY)),
  change(ORG_A, A_DELETED, 'old-pc', 'active', at(-43 * DAY), at(-43 * DAY)),
  change(ORG_A, A_DELETED, 'old-pc', 'deleted', at(-2 * DAY)),
  change(ORG_A, A_REENABLED, 'desk-4', 'active', at(-42 * DAY), at(-42 * DAY)),
  change(ORG_A, A_REENABLED, 'desk-4', 'disabled', at(-10 * DAY)),
  change(ORG_A, A_REENABLED, 'desk-4b', 'active', at(-1 * DAY)),
  change(ORG_A, SHARED, 'shared-a', 'active', at(-41 * DAY), at(-41 * DAY)),
  change(ORG_B, B_ACTIVE, 'reception', 'active', at(-40 * DAY), at(-40 * DAY)),
  // Enrolled again (a new machine under the same device): the first enrollment counts.
  change(ORG_B, B_ENROLLED_TWICE, 'tablet', 'active', at(-39 * DAY), at(-39 * DAY)),
  change(ORG_B, B_ENROLLED_TWICE, 'tablet-new', 'active', at(-5 * DAY), at(-5 * DAY)),
  change(ORG_B, SHARED, 'shared-b', 'disabled', at(-38 * DAY)),
  change(ORG_C, C_QUIET, ODD_HOSTNAME, 'active', at(-37 * DAY), at(-37 * DAY)),
  change(ORG_T, T_TIED, 'tied', 'active', at(-36 * DAY), at(-36 * DAY)),
  change(ORG_T, T_TIED, 'tied', 'disabled', at(-1 * DAY)),
  change(ORG_T, T_TIED, 'tied', 'deleted', at(-1 * DAY)),
];

/** Heard later (phase 2), one of them older than what is known (it must not win). */
const LATER_CHANGES: Change[] = [
  change(ORG_A, A_ACTIVE, 'kiosk-1', 'disabled', at(-1 * HOUR)),
  change(ORG_A, A_DISABLED, 'laptop-2-renamed', 'active', at(-30 * MINUTE)),
  change(ORG_A, A_UNKNOWN, 'late-joiner', 'active', at(-10 * MINUTE), at(-10 * MINUTE)),
  change(ORG_A, A_REENABLED, 'desk-4-stale', 'disabled', at(-20 * DAY)),
  change(ORG_B, B_ACTIVE, 'reception', 'deleted', at(-5 * MINUTE)),
];
/** Purged in phase 3: deleted from the start, and deleted in phase 2. */
const PURGED: DeviceRef[] = [
  { orgId: ORG_A, deviceId: A_DELETED },
  { orgId: ORG_B, deviceId: B_ACTIVE },
];

const DETECTIONS: (BlockCount & { detectedAt: Date })[] = [
  { orgId: ORG_A, deviceId: A_ACTIVE, blocked: 12, detectedAt: at(-2 * HOUR) },
  { orgId: ORG_A, deviceId: A_DISABLED, blocked: 30, detectedAt: at(-3 * DAY) },
  { orgId: ORG_A, deviceId: A_ACTIVE, blocked: 15, detectedAt: at(-26 * HOUR) },
  { orgId: ORG_B, deviceId: B_ACTIVE, blocked: 11, detectedAt: at(-30 * MINUTE) },
  { orgId: ORG_B, deviceId: SHARED, blocked: 20, detectedAt: at(-1 * HOUR) },
];

// Telemetry: deterministic (a seeded generator), spread over both windows, with every edge of them.

function mulberry32(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Instants every reporting device reports at: the windows' edges, future skew, and expired days. */
const EDGES: Date[] = [
  R24.from, // the oldest hourly bucket's first second
  new Date(R24.from.getTime() - SECOND), // just before the 24 h window
  NOW,
  new Date(R24.to.getTime() - SECOND), // the current hour's last second (a clock slightly ahead)
  R24.to, // the next hour: outside the 24 h window, inside today
  at(3 * HOUR), // later today
  R30.from, // the oldest daily bucket's first second
  new Date(R30.from.getTime() - SECOND), // just before the 30 d window
  new Date(R30.to.getTime() - SECOND), // today's last second
  R30.to, // tomorrow: outside both windows
  at(2 * DAY),
  at(-40 * DAY), // raw rows expired (35 d); hourly and daily kept
  at(-100 * DAY), // hourly rows expired too (60 d)
  at(-130 * DAY), // its month's daily rows expired too (90 d)
];
const EXPIRED_BEFORE = at(-RETENTION.TELEMETRY_RAW_RETENTION_DAYS * DAY);

function generateBatches(): { key: string; rows: TelemetryRow[] }[] {
  const random = mulberry32(20_261_125);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const hosts = ['example.com', 'news.example.org', 'phish.example.net', 'cdn.example.com', 'bad.example'];
  const verdict = (): Verdict => {
    const r = random();
    return r < 0.55 ? 'allowed' : r < 0.8 ? 'blocked' : 'warned';
  };
  const batches: { key: string; rows: TelemetryRow[] }[] = [];
  for (const { orgId, deviceId } of REPORTING) {
    const times = [
      ...EDGES,
      // Across the 30 days (and a day before), then more in the last 24 hours.
      ...Array.from({ length: 45 }, () => at(-Math.floor(random() * 31 * DAY))),
      ...Array.from({ length: 30 }, () => at(-Math.floor(random() * DAY))),
    ]
      .map((date) => Math.floor(date.getTime() / 1000))
      .sort((a, b) => a - b);
    const rows = times.map((observed): Omit<TelemetryRow, 'batch_key' | 'received_at'> => ({
      org_id: orgId,
      device_id: deviceId,
      observed_at: observed,
      host: pick(hosts),
      verdict: verdict(),
      // Quarter milliseconds: exact in Float32 and in every Float64 sum, whatever the order of summing.
      classification_ms: Math.floor(random() * 800) / 4,
    }));
    // Expired rows one batch each (their ledger expires with them), the rest in batches of up to 7,
    // received 5 s after the newest row (or now, for rows of a clock ahead).
    let index = 0;
    let number = 0;
    while (index < rows.length) {
      const first = rows[index]!;
      const size = first.observed_at * 1000 < EXPIRED_BEFORE.getTime() ? 1 : 1 + Math.floor(random() * 7);
      const chunk = rows.slice(index, index + size);
      index += chunk.length;
      const newest = Math.max(...chunk.map((row) => row.observed_at));
      const received = Math.min(newest, Math.floor(NOW.getTime() / 1000)) + 5;
      const key = `${deviceId}:${orgId.slice(0, 2)}-${++number}`;
      batches.push({ key, rows: chunk.map((row) => ({ ...row, batch_key: key, received_at: received })) });
    }
  }
  return batches;
}
const BATCHES = generateBatches();

// What the store must answer, computed from the data.

const bySecond = (seconds: number) => seconds * 1000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const sortBy = <T>(items: T[], key: (item: T) => string): T[] =>
  [...items].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

class Model {
  rows: TelemetryRow[] = [];
  changes: Change[] = [];
  detections: (BlockCount & { detectedAt: Date })[] = [];
  /** Ledger: batch key → the UTC days on which it was received. */
  ledger = new Map<string, Set<string>>();
  /** Raw rows and ledger before this instant were dropped (retention). */
  droppedBefore: Date | null = null;

  insert(rows: readonly TelemetryRow[]): void {
    this.rows.push(...rows);
    for (const row of rows) {
      const days = this.ledger.get(row.batch_key) ?? new Set<string>();
      days.add(utcDay(bySecond(row.received_at)));
      this.ledger.set(row.batch_key, days);
    }
  }

  purge(device: DeviceRef): void {
    this.rows = this.rows.filter((row) => row.org_id !== device.orgId || row.device_id !== device.deviceId);
  }

  /** The newest change per device of the organization (argMax over versions). */
  private newest(orgId: string, deviceId: string): Change | undefined {
    let newest: Change | undefined;
    for (const c of this.changes) {
      if (c.device.orgId !== orgId || c.device.deviceId !== deviceId) continue;
      if (!newest || c.version > newest.version) newest = c;
    }
    return newest;
  }

  private scoped(orgId: string, range: WindowRange, deviceId: string | null): TelemetryRow[] {
    return this.rows.filter((row) => {
      if (row.org_id !== orgId || (deviceId !== null && row.device_id !== deviceId)) return false;
      const start = Math.floor(bySecond(row.observed_at) / range.bucketMs) * range.bucketMs;
      if (start < range.from.getTime() || start >= range.to.getTime()) return false;
      const current = this.newest(orgId, row.device_id)?.state;
      return deviceId === null ? current === undefined || current === 'active' : current !== 'deleted';
    });
  }

  totals(orgId: string, range: WindowRange, deviceId: string | null): Totals {
    return sum(this.scoped(orgId, range, deviceId));
  }

  bucketTotals(orgId: string, range: WindowRange, deviceId: string | null): [number, Totals][] {
    const buckets = new Map<number, TelemetryRow[]>();
    for (const row of this.scoped(orgId, range, deviceId)) {
      const start = Math.floor(bySecond(row.observed_at) / range.bucketMs) * range.bucketMs;
      buckets.set(start, [...(buckets.get(start) ?? []), row]);
    }
    return [...buckets.entries()]
      .map(([start, rows]): [number, Totals] => [start, sum(rows)])
      .sort(([a], [b]) => a - b);
  }

  storedBatchKeys(keys: readonly string[], since: Date): string[] {
    const sinceDay = utcDay(since.getTime());
    const keptFrom = this.droppedBefore ? utcDay(this.droppedBefore.getTime() - DAY + 1) : '';
    return keys
      .filter((key) => [...(this.ledger.get(key) ?? [])].some((day) => day >= sinceDay && day > keptFrom))
      .sort();
  }

  deletedDevices(devices: readonly DeviceRef[]): string[] {
    return devices
      .filter((d) => this.newest(d.orgId, d.deviceId)?.state === 'deleted')
      .map((d) => d.deviceId)
      .sort();
  }

  deviceTimelines(devices: readonly DeviceRef[]): [string, DeviceTimeline][] {
    const out: [string, DeviceTimeline][] = [];
    for (const d of devices) {
      const changes = this.changes.filter(
        (c) => c.device.orgId === d.orgId && c.device.deviceId === d.deviceId,
      );
      if (changes.length === 0) continue;
      const ordered = [...changes].sort((a, b) => a.version - b.version || (a.state < b.state ? -1 : 1));
      const enrolled = changes.map((c) => c.enrolledAt).filter((ms) => ms > 0);
      out.push([
        d.deviceId,
        {
          changes: ordered.map((c) => ({ state: c.state, at: c.version })),
          enrolledAt: enrolled.length > 0 ? Math.min(...enrolled) : null,
        },
      ]);
    }
    return out.sort(([a], [b]) => (a < b ? -1 : 1));
  }

  blockedCounts(devices: readonly DeviceRef[], since: Date, until: Date): BlockCount[] {
    const counts: BlockCount[] = [];
    // Raw rows whose day ended before the cutoff were dropped.
    const kept = this.droppedBefore
      ? this.rows.filter(
          (row) => (Math.floor(row.observed_at / 86_400) + 1) * DAY > this.droppedBefore!.getTime(),
        )
      : this.rows;
    for (const d of devices) {
      const blocked = kept.filter(
        (row) =>
          row.org_id === d.orgId &&
          row.device_id === d.deviceId &&
          row.verdict === 'blocked' &&
          bySecond(row.observed_at) >= since.getTime() &&
          bySecond(row.observed_at) < until.getTime(),
      ).length;
      if (blocked > 0) counts.push({ orgId: d.orgId, deviceId: d.deviceId, blocked });
    }
    return sortBy(counts, (c) => `${c.orgId} ${c.deviceId}`);
  }

  recentlyDetected(devices: readonly DeviceRef[], since: Date): string[] {
    return devices
      .filter((d) =>
        this.detections.some(
          (x) =>
            x.orgId === d.orgId && x.deviceId === d.deviceId && x.detectedAt.getTime() >= since.getTime(),
        ),
      )
      .map((d) => d.deviceId)
      .sort();
  }

  hostnames(devices: readonly DeviceRef[]): [string, string][] {
    return devices
      .flatMap((d): [string, string][] => {
        const newest = this.newest(d.orgId, d.deviceId);
        return newest ? [[d.deviceId, newest.hostname]] : [];
      })
      .sort(([a], [b]) => (a < b ? -1 : 1));
  }
}

function sum(rows: readonly TelemetryRow[]): Totals {
  if (rows.length === 0) return NO_TOTALS;
  return {
    totalAnalyzed: rows.length,
    dangerousBlocks: rows.filter((row) => row.verdict === 'blocked').length,
    riskyWarnings: rows.filter((row) => row.verdict === 'warned').length,
    classificationMsSum: rows.reduce((total, row) => total + row.classification_ms, 0),
  };
}

/** The store's methods and the model's, answering in the same (ordered, plain) shape. */
interface Reader {
  totals(orgId: string, range: WindowRange, deviceId: string | null): Promise<Totals> | Totals;
  bucketTotals(
    orgId: string,
    range: WindowRange,
    deviceId: string | null,
  ): Promise<[number, Totals][]> | [number, Totals][];
  storedBatchKeys(keys: readonly string[], since: Date): Promise<string[]> | string[];
  deletedDevices(devices: readonly DeviceRef[]): Promise<string[]> | string[];
  deviceTimelines(
    devices: readonly DeviceRef[],
  ): Promise<[string, DeviceTimeline][]> | [string, DeviceTimeline][];
  blockedCounts(
    devices: readonly DeviceRef[],
    since: Date,
    until: Date,
  ): Promise<BlockCount[]> | BlockCount[];
  recentlyDetected(devices: readonly DeviceRef[], since: Date): Promise<string[]> | string[];
  hostnames(devices: readonly DeviceRef[]): Promise<[string, string][]> | [string, string][];
}

function readerOf(store: ClickHouseAnalyticsStore): Reader {
  return {
    totals: (orgId, range, deviceId) => store.totals(orgId, range, deviceId),
    bucketTotals: async (orgId, range, deviceId) =>
      [...(await store.bucketTotals(orgId, range, deviceId)).entries()].sort(([a], [b]) => a - b),
    storedBatchKeys: async (keys, since) => [...(await store.storedBatchKeys(keys, since))].sort(),
    deletedDevices: async (devices) => [...(await store.deletedDevices(devices))].sort(),
    deviceTimelines: async (devices) =>
      [...(await store.deviceTimelines(devices)).entries()].sort(([a], [b]) => (a < b ? -1 : 1)),
    // The order of rows is not part of the answer (GROUP BY).
    blockedCounts: async (devices, since, until) =>
      sortBy(await store.blockedCounts(devices, since, until), (c) => `${c.orgId} ${c.deviceId}`),
    recentlyDetected: async (devices, since) => [...(await store.recentlyDetected(devices, since))].sort(),
    hostnames: async (devices) =>
      [...(await store.hostnames(devices)).entries()].sort(([a], [b]) => (a < b ? -1 : 1)),
  };
}

/** Every read, with the arguments that matter, keyed by call. */
async function answers(reader: Reader): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const orgId of ORGS) {
    for (const range of [R24, R30]) {
      for (const deviceId of [null, ...(DEVICES[orgId] ?? []), NO_SUCH_DEVICE]) {
        const call = `${orgId.slice(0, 2)} ${range.granularity} ${deviceId ?? 'all'}`;
        out[`totals ${call}`] = await reader.totals(orgId, range, deviceId);
        out[`bucketTotals ${call}`] = await reader.bucketTotals(orgId, range, deviceId);
      }
    }
    const refs = refsOf(orgId);
    out[`deletedDevices ${orgId}`] = await reader.deletedDevices(refs);
    out[`deviceTimelines ${orgId}`] = await reader.deviceTimelines(refs);
    out[`hostnames ${orgId}`] = await reader.hostnames(refs);
    for (const since of [at(-1 * DAY), at(-4 * DAY)]) {
      out[`recentlyDetected ${orgId} ${since.toISOString()}`] = await reader.recentlyDetected(refs, since);
    }
  }
  out['deviceTimelines tied'] = await reader.deviceTimelines([{ orgId: ORG_T, deviceId: T_TIED }]);
  const keys = [...BATCHES.map((batch) => batch.key), 'no-such-batch:1', `${A_ACTIVE}:zz-1`];
  for (const since of [new Date(0), at(-7 * DAY), NOW, at(1 * DAY)]) {
    out[`storedBatchKeys ${since.toISOString()}`] = await reader.storedBatchKeys(keys, since);
  }
  const everyone = [...ORGS.flatMap(refsOf)];
  for (const [since, until] of [
    [R24.from, NOW],
    [at(-10 * DAY), at(1 * DAY)],
    [new Date(0), at(365 * DAY)],
  ] as const) {
    out[`blockedCounts ${since.toISOString()}..${until.toISOString()}`] = await reader.blockedCounts(
      everyone,
      since,
      until,
    );
  }
  return out;
}

interface Backend {
  name: string;
  client: ClickHouseClient;
  store: ClickHouseAnalyticsStore;
}

let chdb: ChdbServer;
let old: Backend;
let current: Backend;
const model = new Model();

async function rows<T>(client: ClickHouseClient, query: SqlFragment): Promise<T[]> {
  return (await client.query({ query: query.text, format: 'JSONEachRow' })).json<T>();
}

/** Both backends' answers to the same call. */
async function onBoth<T>(call: (backend: Backend) => Promise<T>): Promise<[T, T]> {
  return [await call(old), await call(current)];
}

/** Each device's events in every table a purge empties (rollups: their sums, as merges fold their rows). */
const deviceRowCounts = (backend: Backend) =>
  Promise.all(
    DEVICE_TELEMETRY_TABLES.map(async (table) => ({
      table,
      rows: await rows<{ org_id: string; device_id: string; n: string }>(
        backend.client,
        sql`SELECT org_id, device_id, toString(${table === 'telemetry_events' ? sql`count()` : sql`sum(total_analyzed)`}) AS n
            FROM ${identifier(table)} GROUP BY org_id, device_id ORDER BY org_id, device_id`,
      ),
    })),
  );

/** The partitions that hold rows, per table (empty parts, which versions keep differently, left out). */
const partitionsWithRows = async (backend: Backend) => ({
  telemetry_events: await rows(
    backend.client,
    sql`SELECT DISTINCT toYYYYMMDD(observed_at) AS p FROM telemetry_events ORDER BY p`,
  ),
  ingested_batches: await rows(
    backend.client,
    sql`SELECT DISTINCT toYYYYMMDD(received_day) AS p FROM ingested_batches ORDER BY p`,
  ),
  telemetry_hourly: await rows(
    backend.client,
    sql`SELECT DISTINCT toYYYYMMDD(hour) AS p FROM telemetry_hourly ORDER BY p`,
  ),
  telemetry_daily: await rows(
    backend.client,
    sql`SELECT DISTINCT toYYYYMM(day) AS p FROM telemetry_daily ORDER BY p`,
  ),
});

async function mutationsDone(backend: Backend): Promise<boolean> {
  const [row] = await rows<{ n: string | number }>(
    backend.client,
    sql`SELECT count() AS n FROM system.mutations WHERE database = ${database} AND NOT is_done`,
  );
  return Number(row?.n) === 0;
}

beforeAll(async () => {
  chdb = startChdb();
  mockChdb = chdb;
  old = {
    name: 'ClickHouse 18.16',
    client: serverClient,
    store: new ClickHouseAnalyticsStore(serverClient),
  };
  const client = chdb.client({ database });
  current = {
    name: `chDB (ClickHouse ${chdb.version})`,
    client,
    store: new ClickHouseAnalyticsStore(client),
  };
}, 60_000);

afterAll(async () => {
  // chDB first: its data directory goes whatever the server answers.
  await chdb?.close();
  await serverClient.close();
  await dropClickHouseDatabase(serverUrl, database, null);
});

describe(`the analytics SQL on ClickHouse 18.16 and on a current ClickHouse (chDB)`, () => {
  it('applies the migrations on both, recording the same ledger', async () => {
    // One server on both (a cluster tier's CLICKHOUSE_CLUSTER aside): chDB has no cluster to compare with.
    const options = { database, migrations: analyticsMigrations({ database, cluster: null }), logger };
    const first = await Promise.all([
      runClickHouseMigrations({ ...options, connection: { url: serverUrl, logger } }),
      runClickHouseMigrations({ ...options, connection: { url: CHDB_URL } }),
    ]);
    expect(first[1]).toEqual(first[0]);
    expect(first[0]).toEqual({ applied: ['001_telemetry', '002_device_state_changes'], skipped: [] });

    const again = await Promise.all([
      runClickHouseMigrations({ ...options, connection: { url: serverUrl, logger } }),
      runClickHouseMigrations({ ...options, connection: { url: CHDB_URL } }),
    ]);
    expect(again[1]).toEqual(again[0]);
    expect(again[0]).toEqual({ applied: [], skipped: ['001_telemetry', '002_device_state_changes'] });

    const progress = await onBoth(async (b) => Object.fromEntries(await migrationProgress(b.client)));
    expect(progress[1]).toEqual(progress[0]);
    expect(progress[0]).toEqual({ '001_telemetry': 9, '002_device_state_changes': 2 });
  });

  it('runs on the versions it means to compare', async () => {
    const [oldVersion, currentVersion] = await onBoth(async (b) => {
      const [row] = await rows<{ v: string }>(b.client, sql`SELECT version() AS v`);
      return row?.v ?? '';
    });
    // CLICKHOUSE_URL may point elsewhere; the comparison is with whatever serves the tests, named here.
    expect(oldVersion).toMatch(/^\d+\.\d+/);
    expect(currentVersion).toBe(chdb.version);
    expect(Number(currentVersion.split('.')[0])).toBeGreaterThanOrEqual(25);
  });

  it("takes a call's settings for that call only, and fails as the server does", async () => {
    const two = sql`SELECT toUInt64(2) AS n`.text;
    const [oldAnswer, currentAnswer] = await onBoth(async (b) => ({
      ping: (await b.client.ping({ select: true })).success,
      unquoted: await (
        await b.client.query({
          query: two,
          format: 'JSONEachRow',
          clickhouse_settings: { output_format_json_quote_64bit_integers: 0 },
        })
      ).json(),
      quotedAgain: await (await b.client.query({ query: two, format: 'JSONEachRow' })).json(),
      missingTable: await b.client
        .query({ query: 'SELECT * FROM no_such_table', format: 'JSONEachRow' })
        .then(
          () => 'answered',
          (error: Error) => /no_such_table/.test(error.message),
        ),
      unknownSetting: await b.client
        .command({ query: 'SELECT 1', clickhouse_settings: { no_such_setting_sts: 1 } })
        .then(
          () => 'answered',
          (error: Error) => /no_such_setting_sts/.test(error.message),
        ),
    }));
    expect(currentAnswer).toEqual(oldAnswer);
    expect(oldAnswer).toEqual({
      ping: true,
      unquoted: [{ n: 2 }],
      quotedAgain: [{ n: '2' }],
      missingTable: true,
      unknownSetting: true,
    });
  });

  it('creates the same tables, engines and columns', async () => {
    const [oldSchema, currentSchema] = await onBoth(async (b) => ({
      tables: await rows(
        b.client,
        sql`SELECT name, engine FROM system.tables WHERE database = ${database} ORDER BY name`,
      ),
      columns: await rows(
        b.client,
        sql`SELECT table, name, type, default_kind, default_expression FROM system.columns
            WHERE database = ${database} ORDER BY table, name`,
      ),
    }));
    expect(currentSchema).toEqual(oldSchema);
  });

  it('stores the same data and answers every read the same (and as the data says)', async () => {
    for (const c of FIRST_CHANGES) {
      for (const b of [old, current])
        await b.store.setState(c.device, c.hostname, c.state, c.version, c.enrolledAt);
      model.changes.push(c);
    }
    // Several batches per insert, as ingestion stores them.
    for (let index = 0; index < BATCHES.length; index += 9) {
      const batchRows = BATCHES.slice(index, index + 9).flatMap((batch) => batch.rows);
      for (const b of [old, current]) await b.store.insert(batchRows);
      model.insert(batchRows);
    }
    for (const detection of DETECTIONS) {
      for (const b of [old, current]) await b.store.recordDetection(detection);
      model.detections.push(detection);
    }

    const [oldAnswers, currentAnswers] = await onBoth((b) => answers(readerOf(b.store)));
    expect(currentAnswers).toEqual(oldAnswers);
    expect(oldAnswers).toEqual(await answers(model));

    // A few answers spelled out, as a reader would check them by hand.
    const oldestHour = R24.from.getTime();
    const series = new Map(oldAnswers[`bucketTotals 0a hour ${A_ACTIVE}`] as [number, Totals][]);
    expect(series.has(oldestHour)).toBe(true); // the oldest bucket's first second counts…
    expect(series.has(oldestHour - HOUR)).toBe(false); // …the second before it does not
    expect(series.has(R24.to.getTime())).toBe(false); // nor a clock ahead past the window
    expect(oldAnswers[`totals 0c hour all`]).toEqual(NO_TOTALS);
    expect(oldAnswers[`deletedDevices ${ORG_A}`]).toEqual([A_DELETED]);
    expect((oldAnswers[`totals 0a day ${A_DELETED}`] as Totals).totalAnalyzed).toBe(0);
    expect((oldAnswers[`totals 0a day ${A_DISABLED}`] as Totals).totalAnalyzed).toBeGreaterThan(0);
    expect(oldAnswers[`storedBatchKeys ${new Date(0).toISOString()}`]).toHaveLength(BATCHES.length);
    expect(oldAnswers[`hostnames ${ORG_C}`]).toEqual([[C_QUIET, ODD_HOSTNAME]]);
    expect(oldAnswers['deviceTimelines tied']).toEqual([
      [
        T_TIED,
        {
          changes: [
            { state: 'active', at: at(-36 * DAY).getTime() },
            { state: 'deleted', at: at(-1 * DAY).getTime() },
            { state: 'disabled', at: at(-1 * DAY).getTime() },
          ],
          enrolledAt: at(-36 * DAY).getTime(),
        },
      ],
    ]);
  });

  it('answers the 64-bit integers the same whether they come as JSON strings or numbers', async () => {
    // 18.16 quotes UInt64 in JSON; current versions write numbers unless output_format_json_quote_64bit_integers
    // (CLICKHOUSE_SETTINGS pins it to 1 on every client). The store Number()s them either way.
    const unpinned = chdb.client({ database, clickhouse_settings: {} });
    try {
      const count = sql`SELECT count() AS n, toUInt32(1) AS small FROM telemetry_events`;
      const [[oldRow], [pinnedRow], [unpinnedRow]] = await Promise.all([
        rows(old.client, count),
        rows(current.client, count),
        rows(unpinned, count),
      ]);
      expect(pinnedRow).toEqual(oldRow);
      expect(oldRow).toEqual({ n: String(model.rows.length), small: 1 });
      expect(unpinnedRow).toEqual({ n: model.rows.length, small: 1 });
      expect(await answers(readerOf(new ClickHouseAnalyticsStore(unpinned)))).toEqual(
        await answers(readerOf(current.store)),
      );
    } finally {
      await unpinned.close();
    }
  });

  it('sums classification times as agents report them the same, but for the last bits', async () => {
    // Float32 values parse to the same bits on both; their Float64 sums depend on the order of summing
    // (threads, parts, merges), so they agree to rounding only: the API's average (3 decimals) is the same.
    const random = mulberry32(7);
    const rows: TelemetryRow[] = Array.from({ length: 600 }, (_, index) => {
      const observed = Math.floor(at(-Math.floor(random() * 30 * DAY)).getTime() / 1000);
      return {
        org_id: ORG_R,
        device_id: R_DEVICES[index % R_DEVICES.length]!,
        batch_key: `${ORG_R}:r-${Math.floor(index / 50)}`,
        observed_at: observed,
        host: 'example.com',
        verdict: random() < 0.3 ? 'blocked' : 'allowed',
        classification_ms: index % 3 === 0 ? random() * 250 : Math.round(random() * 250_000) / 1000,
        received_at: observed + 5,
      };
    });
    for (let index = 0; index < rows.length; index += 200) {
      for (const b of [old, current]) await b.store.insert(rows.slice(index, index + 200));
    }
    const realistic = new Model();
    realistic.insert(rows.map((row) => ({ ...row, classification_ms: Math.fround(row.classification_ms) })));
    const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a));
    for (const range of [R24, R30]) {
      for (const deviceId of [null, ...R_DEVICES]) {
        const call = `${range.granularity} ${deviceId ?? 'all'}`;
        const [oldTotals, currentTotals] = await onBoth((b) => b.store.totals(ORG_R, range, deviceId));
        const expected = realistic.totals(ORG_R, range, deviceId);
        for (const totals of [oldTotals, currentTotals]) {
          expect({ call, ...totals, classificationMsSum: 0 }).toEqual({
            call,
            ...expected,
            classificationMsSum: 0,
          });
          expect({ call, close: close(totals.classificationMsSum, expected.classificationMsSum) }).toEqual({
            call,
            close: true,
          });
        }
        expect({ call, summary: summaryOf(currentTotals) }).toEqual({ call, summary: summaryOf(oldTotals) });

        const [oldBuckets, currentBuckets] = await onBoth((b) =>
          b.store.bucketTotals(ORG_R, range, deviceId),
        );
        const expectedBuckets = realistic.bucketTotals(ORG_R, range, deviceId);
        for (const buckets of [oldBuckets, currentBuckets]) {
          expect([...buckets.keys()].sort((x, y) => x - y)).toEqual(expectedBuckets.map(([start]) => start));
          for (const [start, totals] of expectedBuckets) {
            expect(close(buckets.get(start)!.classificationMsSum, totals.classificationMsSum)).toBe(true);
            expect(buckets.get(start)!.totalAnalyzed).toBe(totals.totalAnalyzed);
          }
        }
      }
    }
  });

  it('applies later state changes the same, an older one not winning', async () => {
    for (const c of LATER_CHANGES) {
      for (const b of [old, current])
        await b.store.setState(c.device, c.hostname, c.state, c.version, c.enrolledAt);
      model.changes.push(c);
    }
    const [oldAnswers, currentAnswers] = await onBoth((b) => answers(readerOf(b.store)));
    expect(currentAnswers).toEqual(oldAnswers);
    expect(oldAnswers).toEqual(await answers(model));
    expect(oldAnswers[`hostnames ${ORG_A}`]).toContainEqual([A_REENABLED, 'desk-4b']);
    expect(oldAnswers[`deletedDevices ${ORG_B}`]).toEqual([B_ACTIVE]);
  });

  it('purges deleted devices from every table the same', async () => {
    const before = await onBoth(deviceRowCounts);
    expect(before[1]).toEqual(before[0]);
    for (const device of PURGED) {
      for (const b of [old, current]) await b.store.purge(device);
      model.purge(device);
    }
    for (const b of [old, current]) await eventually(() => mutationsDone(b), 30_000);

    const after = await onBoth(deviceRowCounts);
    expect(after[1]).toEqual(after[0]);
    const purged = (row: { org_id: string; device_id: string }) =>
      PURGED.some((d) => d.orgId === row.org_id && d.deviceId === row.device_id);
    for (const [index, { table, rows: counts }] of after[0].entries()) {
      expect({ table, purged: counts.filter(purged) }).toEqual({ table, purged: [] });
      // Everyone else's rows untouched.
      expect(counts).toEqual(before[0][index]!.rows.filter((row) => !purged(row)));
    }

    const [oldAnswers, currentAnswers] = await onBoth((b) => answers(readerOf(b.store)));
    expect(currentAnswers).toEqual(oldAnswers);
    expect(oldAnswers).toEqual(await answers(model));
  }, 90_000);

  it('drops the same expired partitions, and answers the same after', async () => {
    const retention = retentionOf(RETENTION);
    const before = await onBoth(partitionsWithRows);
    expect(before[1]).toEqual(before[0]);

    const dropped = await onBoth((b) => dropExpiredPartitions(b.client, database, retention, NOW, logger));
    expect(dropped[1]).toEqual(dropped[0]);
    // Raw rows and ledger of 130, 100 and 40 days ago (3 + 3 day partitions), hourly rows of 130 and 100
    // days ago (2), daily rows of the month 130 days ago (1; the month 100 days ago ends within 90 days).
    expect(dropped[0]).toBe(9);
    model.droppedBefore = EXPIRED_BEFORE;

    const after = await onBoth(partitionsWithRows);
    expect(after[1]).toEqual(after[0]);
    expect(await onBoth((b) => dropExpiredPartitions(b.client, database, retention, NOW, logger))).toEqual([
      0, 0,
    ]);

    const [oldAnswers, currentAnswers] = await onBoth((b) => answers(readerOf(b.store)));
    expect(currentAnswers).toEqual(oldAnswers);
    expect(oldAnswers).toEqual(await answers(model));
  });
});
