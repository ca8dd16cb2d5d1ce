/** A page of made-up devices as the enrollment service sends them, for the GC diagnostics in bench/. */
import { randomUUID } from 'node:crypto';
import { DeviceStatus, type Device } from '@sts/proto/gen/enrollment/v1/enrollment';

export function cannedDevices(count: number): Device[] {
  const now = new Date();
  return Array.from({ length: count }, (_, i) => ({
    id: randomUUID(),
    name: `ws-${String(i).padStart(5, '0')}`,
    machineId: randomUUID().replaceAll('-', ''),
    status: DeviceStatus.DEVICE_STATUS_ACTIVE,
    enrolledAt: now,
    lastSeenAt: now,
    metadataJson:
      '{"os": "linux", "arch": "x64", "os_type": "Linux", "os_release": "6.8.0", "agent_version": "0.1.0"}',
  }));
}
