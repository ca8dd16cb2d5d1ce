import { AppError } from '@sts/errors/app-error';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { DeviceCredentials } from './device-credentials';
import { FakeUpstream } from './test/fake-upstream';

describe('DeviceCredentials', () => {
  function setUp() {
    const upstream = new FakeUpstream();
    let status = DeviceStatus.DEVICE_STATUS_ACTIVE;
    const calls: string[] = [];
    upstream.enrollment.authenticateDevice = async ({ deviceToken }) => {
      calls.push(deviceToken);
      if (deviceToken !== 'sts_dt_1') throw new AppError('DEVICE_TOKEN_INVALID');
      return { deviceId: 'dev-1', orgId: 'org-1', status };
    };
    const credentials = new DeviceCredentials(upstream.clients(), 60_000);
    return { credentials, calls, setStatus: (next: DeviceStatus) => (status = next) };
  }

  it('asks the enrollment service once per token while cached; a device event evicts it', async () => {
    const { credentials, calls, setStatus } = setUp();
    expect(await credentials.authenticate('sts_dt_1', { requestId: 'r1' })).toEqual({
      deviceId: 'dev-1',
      orgId: 'org-1',
    });
    await credentials.authenticate('sts_dt_1', { requestId: 'r2' });
    expect(calls).toHaveLength(1);
    setStatus(DeviceStatus.DEVICE_STATUS_DISABLED);
    await credentials.authenticate('sts_dt_1', { requestId: 'r3' });
    credentials.deviceChanged('dev-1');
    await expect(credentials.authenticate('sts_dt_1', { requestId: 'r4' })).rejects.toMatchObject({
      code: 'DEVICE_DISABLED',
    });
    expect(calls).toHaveLength(2);
  });

  it('does not remember unknown tokens', async () => {
    const { credentials, calls } = setUp();
    await expect(credentials.authenticate('sts_dt_x', { requestId: 'r1' })).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    await expect(credentials.authenticate('sts_dt_x', { requestId: 'r2' })).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    await expect(credentials.authenticate(undefined, { requestId: 'r3' })).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    expect(calls).toEqual(['sts_dt_x', 'sts_dt_x']);
  });
});
