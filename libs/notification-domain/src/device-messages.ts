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

/**
 * `Device "web-01" was enrolled`. When the machine had enrolled before, the message says that its
 * previous device token stopped working: a re-enrollment an admin did not expect (a leaked code used
 * with a known machine id) cuts the real agent off, and this is where the admin sees it.
 */
export function deviceEnrolledMessage(data: EventData<'device.enrolled'>): string {
  const label = deviceLabel(data.hostname, data.device_id);
  return data.re_enrolled
    ? `${label} was enrolled again; its previous device token no longer works`
    : `${label} was enrolled`;
}

/** `Device "web-01" was disabled` */
export function deviceDisabledMessage(data: EventData<'device.disabled'>): string {
  return `${deviceLabel(data.hostname, data.device_id)} was disabled`;
}

/** `Device "web-01" blocked 7 dangerous addresses within 10 minutes` */
export function threatDetectedMessage(data: EventData<'threat.detected'>): string {
  return `${deviceLabel(data.hostname, data.device_id)} blocked ${data.dangerous_blocks} dangerous addresses within ${data.window_minutes} minutes`;
}
