import { randomUUID } from 'node:crypto';
import { openSealedSecret, sealSecret } from '@sts/crypto/secrets';
import { AppError } from '@sts/errors/app-error';
import { plainTextLine } from '@sts/vocabulary/plain-text';
import type { DomainEvent } from '@sts/events/event-catalogue';
import {
  ALERT_LIMITS,
  SECRET_ROTATION_GRACE_MS,
  alertEndpointHost,
  alertSecretContext,
  newAlertSecret,
  type AlertDelivery,
  type AlertEndpoint,
  type AlertEndpointWithSecret,
  type AlertEventType,
} from './alert-model';
import { judgeAttempt, nextAttemptAt, signedHeaders } from './alert-delivery-policy';
import type {
  AlertDeliveryQueue,
  AlertSender,
  AttemptRecord,
  ClaimedDelivery,
  Clock,
  NotificationRepositories,
  NotificationStore,
} from './notification-ports';

export interface AlertSettings {
  /** Seals and opens endpoint secrets (SECRET_SEALING_KEY). */
  sealingKey: Buffer;
  /** Base address of the dashboard, for the link in an alert. */
  publicAppUrl: string;
}

function withoutSecret(endpoint: AlertEndpointWithSecret): AlertEndpoint {
  return {
    id: endpoint.id,
    orgId: endpoint.orgId,
    url: endpoint.url,
    description: endpoint.description,
    createdAt: endpoint.createdAt,
    disabledAt: endpoint.disabledAt,
  };
}

/** A new delivery of `body` to an endpoint, due at once. */
function newDelivery(
  orgId: string,
  endpointId: string,
  eventType: AlertEventType,
  body: string,
  now: Date,
): AlertDelivery {
  return {
    id: randomUUID(),
    orgId,
    endpointId,
    eventType,
    body,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: now,
    createdAt: now,
    lastAttemptAt: null,
    lastResponseCode: null,
    lastError: null,
    lastDurationMs: null,
  };
}

/**
 * The messages a threat detection becomes: one per endpoint of its organization, each with the same
 * body (`{id, type, created_at, data}`; `id` is the event's, so a receiver can tell two endpoints'
 * copies of one alert apart from two alerts).
 */
export function threatDeliveries(
  event: DomainEvent<'threat.detected'>,
  endpoints: readonly AlertEndpoint[],
  settings: Pick<AlertSettings, 'publicAppUrl'>,
  now: Date,
): AlertDelivery[] {
  const { data } = event;
  const body = JSON.stringify({
    id: event.id,
    type: 'alert.threat_detected',
    created_at: data.detected_at,
    data: {
      org_id: data.org_id,
      device_id: data.device_id,
      hostname: data.hostname,
      dangerous_blocks: data.dangerous_blocks,
      window_minutes: data.window_minutes,
      detected_at: data.detected_at,
      dashboard_url: `${settings.publicAppUrl.replace(/\/+$/, '')}/devices/${encodeURIComponent(data.device_id)}`,
    },
  });
  return endpoints
    .filter((endpoint) => endpoint.disabledAt === null)
    .map((endpoint) => newDelivery(data.org_id, endpoint.id, 'alert.threat_detected', body, now));
}

/** The organization's endpoint, locked for the transaction; another organization's is not found. */
async function requireEndpoint(
  repos: NotificationRepositories,
  orgId: string,
  endpointId: string,
): Promise<AlertEndpointWithSecret> {
  const endpoint = await repos.findAlertEndpoint(orgId, endpointId);
  if (!endpoint) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
  return endpoint;
}

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

/** Throws RATE_LIMITED when the endpoint had its test messages of the last minute or hour. */
async function requireTestAllowance(
  repos: NotificationRepositories,
  orgId: string,
  endpointId: string,
  now: Date,
): Promise<void> {
  const sent = await repos.testSendTimes(orgId, endpointId, new Date(now.getTime() - HOUR_MS));
  for (const [windowMs, limit, name] of [
    [MINUTE_MS, ALERT_LIMITS.testsPerEndpointPerMinute, 'minute'],
    [HOUR_MS, ALERT_LIMITS.testsPerEndpointPerHour, 'hour'],
  ] as const) {
    const inWindow = sent
      .map((at) => at.getTime())
      .filter((at) => at > now.getTime() - windowMs)
      .sort((a, b) => a - b);
    if (inWindow.length < limit) continue;
    // The next test is allowed once enough of these have left the window.
    const freeAt = inWindow[inWindow.length - limit]! + windowMs;
    const seconds = Math.max(1, Math.ceil((freeAt - now.getTime()) / 1000));
    throw new AppError(
      'RATE_LIMITED',
      `At most ${limit} test messages per endpoint per ${name}; try again in ${seconds} s`,
    );
  }
}

/** The organization's alert endpoints: register, list, delete, send a test, read the deliveries. */
export class AlertService {
  constructor(
    private readonly store: NotificationStore,
    private readonly clock: Clock,
    private readonly settings: AlertSettings,
    /** Called after a commit that scheduled deliveries, so the worker starts at once. */
    private readonly wakeDeliveries: () => void = () => undefined,
  ) {}

  async list(orgId: string): Promise<AlertEndpoint[]> {
    const endpoints = await this.store.read((repos) => repos.listAlertEndpoints(orgId));
    return endpoints.map(withoutSecret);
  }

  /** `url` and `description` already valid (validAlertUrl, validAlertDescription). */
  create(
    orgId: string,
    url: string,
    description: string | null,
  ): Promise<{ endpoint: AlertEndpoint; secret: string }> {
    return this.store.transaction(async (repos) => {
      const existing = await repos.listAlertEndpoints(orgId);
      if (existing.some((endpoint) => endpoint.url === url)) throw new AppError('ALERT_ENDPOINT_DUPLICATE');
      if (existing.length >= ALERT_LIMITS.endpointsPerOrganization) {
        throw new AppError(
          'ALERT_ENDPOINT_LIMIT',
          `An organization may have at most ${ALERT_LIMITS.endpointsPerOrganization} alert endpoints`,
        );
      }
      const secret = newAlertSecret();
      const endpoint = {
        id: randomUUID(),
        orgId,
        url,
        description,
        createdAt: this.clock.now(),
        disabledAt: null,
      };
      const stored = await repos.insertAlertEndpoint({
        ...endpoint,
        secretSealed: sealSecret(secret, this.settings.sealingKey, alertSecretContext(endpoint)),
        previousSecretSealed: null,
        previousSecretExpiresAt: null,
      });
      // A concurrent create of the same URL won the race.
      if (!stored) throw new AppError('ALERT_ENDPOINT_DUPLICATE');
      return { endpoint, secret };
    });
  }

  /**
   * A new secret, returned once; the previous one keeps signing (a second signature in
   * `webhook-signature`) for SECRET_ROTATION_GRACE_MS, so receivers can switch without losing a message.
   */
  rotateSecret(
    orgId: string,
    endpointId: string,
  ): Promise<{ endpoint: AlertEndpoint; secret: string; previousSecretExpiresAt: Date }> {
    return this.store.transaction(async (repos) => {
      const endpoint = await requireEndpoint(repos, orgId, endpointId);
      const secret = newAlertSecret();
      const previousSecretExpiresAt = new Date(this.clock.now().getTime() + SECRET_ROTATION_GRACE_MS);
      await repos.rotateAlertSecret(orgId, endpointId, {
        secretSealed: sealSecret(secret, this.settings.sealingKey, alertSecretContext(endpoint)),
        previousSecretSealed: endpoint.secretSealed,
        previousSecretExpiresAt,
      });
      return { endpoint: withoutSecret(endpoint), secret, previousSecretExpiresAt };
    });
  }

  /** Switches a disabled endpoint back on: new alerts go to it again (earlier ones stay failed). */
  async enable(orgId: string, endpointId: string): Promise<AlertEndpoint> {
    return this.store.transaction(async (repos) => {
      const endpoint = await requireEndpoint(repos, orgId, endpointId);
      await repos.enableAlertEndpoint(orgId, endpointId);
      return { ...withoutSecret(endpoint), disabledAt: null };
    });
  }

  async delete(orgId: string, endpointId: string): Promise<void> {
    const deleted = await this.store.transaction((repos) => repos.deleteAlertEndpoint(orgId, endpointId));
    if (!deleted) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
  }

  /**
   * Schedules a test message (`alert.test`) to one endpoint; it goes the way every alert goes. At most
   * ALERT_LIMITS.testsPerEndpointPerMinute and …PerHour per endpoint (RATE_LIMITED beyond), counted
   * while the endpoint is locked, so concurrent requests cannot pass together.
   */
  async sendTest(orgId: string, endpointId: string): Promise<AlertDelivery> {
    const delivery = await this.store.transaction(async (repos) => {
      await requireEndpoint(repos, orgId, endpointId);
      const now = this.clock.now();
      await requireTestAllowance(repos, orgId, endpointId, now);
      const id = randomUUID();
      const body = JSON.stringify({
        id,
        type: 'alert.test',
        created_at: now.toISOString(),
        data: {
          org_id: orgId,
          endpoint_id: endpointId,
          message: 'A test alert: this endpoint receives alerts.',
        },
      });
      const test = { ...newDelivery(orgId, endpointId, 'alert.test', body, now), id };
      await repos.insertAlertDeliveries([test]);
      return test;
    });
    this.wakeDeliveries();
    return delivery;
  }

  async deliveries(orgId: string, endpointId: string, limit: number): Promise<AlertDelivery[]> {
    const deliveries = await this.store.read((repos) => repos.listAlertDeliveries(orgId, endpointId, limit));
    if (!deliveries) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
    return deliveries;
  }
}

/**
 * One attempt of a claimed delivery: sign (the secret opened for this endpoint only), send, judge the
 * answer, record it with the next attempt's time, if any.
 */
export async function attemptDelivery(
  claimed: ClaimedDelivery,
  sender: AlertSender,
  queue: AlertDeliveryQueue,
  sealingKey: Buffer,
  clock: Clock,
  /** An endpoint failing this long is disabled (and the organization told in its feed). */
  disableAfterMs = Infinity,
): Promise<AttemptRecord & { endpointDisabled: boolean; recorded: boolean }> {
  const { delivery, endpoint } = claimed;
  const started = clock.now();
  let secrets: string[];
  try {
    secrets = [openSealedSecret(endpoint.secretSealed, sealingKey, alertSecretContext(endpoint))];
    if (
      endpoint.previousSecretSealed &&
      endpoint.previousSecretExpiresAt &&
      endpoint.previousSecretExpiresAt > started
    ) {
      secrets.push(openSealedSecret(endpoint.previousSecretSealed, sealingKey, alertSecretContext(endpoint)));
    }
  } catch {
    // No retry can fix it (a SECRET_SEALING_KEY unlike the one that sealed it): recorded, not claimed forever.
    const record: AttemptRecord = {
      status: 'failed',
      nextAttemptAt: null,
      at: started,
      responseCode: null,
      error: 'the endpoint secret cannot be opened (SECRET_SEALING_KEY changed?); rotate the secret',
      durationMs: 0,
    };
    const { recorded } = await queue.recordAttempt(claimed, record);
    return { ...record, endpointDisabled: false, recorded };
  }
  const result = await sender.send({
    url: endpoint.url,
    headers: signedHeaders(delivery.id, delivery.body, secrets, started),
    body: delivery.body,
  });
  const at = clock.now();
  const verdict = judgeAttempt(result, at);
  const attempts = delivery.attempts + 1;
  const base = {
    at,
    responseCode: result.kind === 'answered' ? result.status : null,
    durationMs: result.durationMs,
  };
  let record: AttemptRecord;
  if (verdict.outcome === 'delivered') {
    record = { ...base, status: 'delivered', nextAttemptAt: null, error: null };
  } else if (verdict.outcome === 'stop') {
    record = { ...base, status: 'failed', nextAttemptAt: null, error: verdict.error };
  } else {
    const next = nextAttemptAt(attempts, verdict, at);
    record = { ...base, status: next ? 'pending' : 'failed', nextAttemptAt: next, error: verdict.error };
  }
  const { recorded, failingSince } = await queue.recordAttempt(claimed, record);
  let endpointDisabled = false;
  if (
    recorded &&
    record.status !== 'delivered' &&
    failingSince &&
    at.getTime() - failingSince.getTime() >= disableAfterMs
  ) {
    endpointDisabled = await queue.disableEndpoint(endpoint, at, {
      id: randomUUID(),
      orgId: endpoint.orgId,
      type: 'alert_endpoint.disabled',
      // Every member reads the feed: the host and the id name the endpoint, never its path or query.
      message: plainTextLine(
        `Alert endpoint ${endpoint.id} (${alertEndpointHost(endpoint.url)}) was disabled: deliveries have ` +
          `failed since ${failingSince.toISOString()} (last: ${record.error ?? 'no answer'}). ` +
          'Enable it again once it receives alerts.',
        500,
      ),
      createdAt: at,
    });
  }
  return { ...record, endpointDisabled, recorded };
}
