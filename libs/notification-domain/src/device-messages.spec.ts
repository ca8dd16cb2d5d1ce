import type { EventData } from '@sts/events/event-catalogue';
import {
  deviceDisabledMessage,
  deviceEnrolledMessage,
  deviceLabel,
  HOSTNAME_MAX_LENGTH,
  threatDetectedMessage,
} from './device-messages';

const enrolled = (hostname: string, re_enrolled = false): EventData<'device.enrolled'> => ({
  org_id: 'org-1',
  device_id: '0b9f2c1e-4a5b-4c6d-8e7f-001122334455',
  machine_id: 'machine-1',
  hostname,
  enrolled_at: '2026-03-01T10:00:00.000Z',
  re_enrolled,
});

const disabled = (hostname: string): EventData<'device.disabled'> => ({
  org_id: 'org-1',
  device_id: '0b9f2c1e-4a5b-4c6d-8e7f-001122334455',
  hostname,
  at: '2026-03-01T10:00:00.000Z',
});

const threat = (hostname: string): EventData<'threat.detected'> => ({
  org_id: 'org-1',
  device_id: '0b9f2c1e-4a5b-4c6d-8e7f-001122334455',
  hostname,
  dangerous_blocks: 7,
  window_minutes: 10,
  detected_at: '2026-03-01T10:00:00.000Z',
});

describe('device feed messages', () => {
  it('name the device by its hostname', () => {
    expect(deviceEnrolledMessage(enrolled('web-01'))).toBe('Device "web-01" was enrolled');
    expect(deviceEnrolledMessage(enrolled('web-01', true))).toBe(
      'Device "web-01" was enrolled again; its previous device token no longer works',
    );
    expect(deviceDisabledMessage(disabled('web-01'))).toBe('Device "web-01" was disabled');
  });

  it('say how many dangerous addresses a device blocked, and within how many minutes', () => {
    expect(threatDetectedMessage(threat('web-01'))).toBe(
      'Device "web-01" blocked 7 dangerous addresses within 10 minutes',
    );
    expect(threatDetectedMessage(threat(''))).toBe(
      'Device without a hostname (id 0b9f2c1e-4a5b-4c6d-8e7f-001122334455) blocked 7 dangerous addresses within 10 minutes',
    );
  });

  it('keep a hostile hostname as plain text on one line, without control characters', () => {
    const message = deviceEnrolledMessage(
      enrolled('  <script>alert(1)</script>\r\n\u001b[2J\u0000evil\u202e  '),
    );
    // Plain text: markup is not escaped here (the dashboard escapes when it renders), and not executed.
    expect(message).toBe('Device "<script>alert(1)</script> [2Jevil" was enrolled');
    expect(message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
  });

  it('cap the hostname', () => {
    const message = deviceDisabledMessage(disabled('h'.repeat(10_000)));
    const name = /^Device "(.*)" was disabled$/u.exec(message)?.[1] ?? '';
    expect(Array.from(name)).toHaveLength(HOSTNAME_MAX_LENGTH);
    expect(name.endsWith('…')).toBe(true);
  });

  it('keep unicode hostnames', () => {
    expect(deviceEnrolledMessage(enrolled('büro-drucker-東京'))).toBe(
      'Device "büro-drucker-東京" was enrolled',
    );
  });

  it('fall back to the device id when nothing of the hostname is left', () => {
    expect(deviceEnrolledMessage(enrolled(' \u0000\n '))).toBe(
      'Device without a hostname (id 0b9f2c1e-4a5b-4c6d-8e7f-001122334455) was enrolled',
    );
    expect(deviceLabel('', '')).toBe('Device without a hostname (id unknown)');
  });
});
