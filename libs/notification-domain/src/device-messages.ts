import type { EventData } from '@sts/events/event-catalogue';
import { plainTextLine } from '@sts/vocabulary/plain-text';

/** Longest hostname shown in a feed message, in code points (a DNS name is at most 253 characters). */
export const HOSTNAME_MAX_LENGTH = 255;
const DEVICE_ID_MAX_LENGTH = 64;

/**
 * How a feed message names a device: its hostname in double quotes. The hostname is reported by the
 * agent, so it is untrusted: it becomes one line of plain text without control or invisible
 * characters, capped in length (see `plainTextLine`). A hostname with nothing left falls back to the
 * device id.
 */
export function deviceLabel(hostname: string, deviceId: string): string {
  const name = plainTextLine(hostname, HOSTNAME_MAX_LENGTH);
  if (name) return `Device "${name}"`;
  return `Device without a hostname (id ${plainTextLine(deviceId, DEVICE_ID_MAX_LENGTH) || 'unknown'})`;
}

/** `Device "web-01" was enrolled`, or `… was enrolled again` when the machine enrolled before. */
export function deviceEnrolledMessage(data: EventData<'device.enrolled'>): string {
  return `${deviceLabel(data.hostname, data.device_id)} was enrolled${data.re_enrolled ? ' again' : ''}`;
}

/** `Device "web-01" was disabled` */
export function deviceDisabledMessage(data: EventData<'device.disabled'>): string {
  return `${deviceLabel(data.hostname, data.device_id)} was disabled`;
}
