import { randomBytes } from 'node:crypto';
import { AppError } from '@sts/errors/app-error';

/** An organization's HTTPS destination for alerts. */
export interface AlertEndpoint {
  id: string;
  orgId: string;
  url: string;
  description: string | null;
  createdAt: Date;
  /** Set when deliveries failed for too long (ALERT_DISABLE_AFTER_HOURS); nothing is sent until it is enabled. */
  disabledAt: Date | null;
}

/** An endpoint as the delivery worker needs it: with its signing secret, sealed. */
export interface AlertEndpointWithSecret extends AlertEndpoint {
  secretSealed: string;
  /** After a rotation, the secret before it: messages are signed with both until it expires. */
  previousSecretSealed: string | null;
  previousSecretExpiresAt: Date | null;
}

export type AlertEventType = 'alert.threat_detected' | 'alert.test';
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One message to one endpoint: its body is fixed at creation, so every attempt sends the same bytes. */
export interface AlertDelivery {
  id: string;
  orgId: string;
  endpointId: string;
  eventType: AlertEventType;
  /** The JSON body, as sent. */
  body: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date | null;
  createdAt: Date;
  lastAttemptAt: Date | null;
  lastResponseCode: number | null;
  lastError: string | null;
  lastDurationMs: number | null;
}

/** How long the previous secret still signs after a rotation: time for receivers to switch. */
export const SECRET_ROTATION_GRACE_MS = 24 * 3_600_000;

export const ALERT_LIMITS = {
  endpointsPerOrganization: 20,
  urlLength: 2_048,
  descriptionLength: 200,
  /** Test messages per endpoint (each one a request to the receiver and a row in the log). */
  testsPerEndpointPerMinute: 3,
  testsPerEndpointPerHour: 20,
} as const;

/**
 * The endpoint's host (and port), for a message that anyone in the organization may read: the path and
 * query of an endpoint URL often carry a token, and only those who may list endpoints see them.
 */
export function alertEndpointHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'an unreadable URL';
  }
}

/** Sealing context of an endpoint's secret: it opens only for this endpoint of this organization. */
export const alertSecretContext = (endpoint: { orgId: string; id: string }) =>
  `alert-endpoint:secret:${endpoint.orgId}:${endpoint.id}`;

/** A Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes. */
export function newAlertSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * The endpoint's URL as stored: `https://` only, a host, no user or password (they would travel to the
 * receiver and sit in our database), no fragment (never sent), at most 2,048 characters. Returns the
 * normalized form (lower-cased host, default port dropped), so that duplicates are recognised.
 */
export function validAlertUrl(input: string): string {
  const fail = (message: string): never => {
    throw new AppError('VALIDATION_FAILED', message, { fields: [{ path: 'url', message }] });
  };
  if (input.length > ALERT_LIMITS.urlLength) fail(`at most ${ALERT_LIMITS.urlLength} characters`);
  if (/[\u0000-\u001f\u007f\s]/.test(input)) fail('must not contain spaces or control characters');
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return fail('must be an absolute URL');
  }
  if (url.protocol !== 'https:') fail('must be an https:// URL');
  if (!url.hostname) fail('must name a host');
  if (url.username || url.password) fail('must not carry a user name or password');
  if (url.hash || input.includes('#')) fail('must not have a fragment');
  return url.href;
}

/** The optional description: trimmed, at most 200 characters, no control characters; empty means none. */
export function validAlertDescription(input: string | undefined): string | null {
  const text = (input ?? '').trim();
  const fail = (message: string): never => {
    throw new AppError('VALIDATION_FAILED', message, { fields: [{ path: 'description', message }] });
  };
  if (text.length > ALERT_LIMITS.descriptionLength)
    fail(`at most ${ALERT_LIMITS.descriptionLength} characters`);
  if (/[\u0000-\u001f\u007f]/.test(text)) fail('must not contain control characters');
  return text === '' ? null : text;
}
