import { AppError } from '@sts/errors/app-error';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { DeviceCredentials } from './device-credentials';
import { FakeUpstream } from '../test/fake-upstream';

/** A value shaped like a device token (`sts_dt_` and 43 base64url characters), named for the test. */
const token = (name: string) => `sts_dt_${name.padEnd(43, '_')}`;

describe('DeviceCredentials', () => {
  function setUp(ttlMs = 60_000) {
    const upstream = new FakeUpstream();
    let status = DeviceStatus.DEVICE_STATUS_ACTIVE;
    let valid = true;
    const calls: string[] = [];
    upstream.enrollment.authenticateDevice = async ({ deviceToken }) => {
      calls.push(deviceToken);
      if (deviceToken !== token('1') || !valid) throw new AppError('DEVICE_TOKEN_INVALID');
      return { deviceId: 'dev-1', orgId: 'org-1', status };
    };
    const credentials = new DeviceCredentials(upstream.clients(), ttlMs);
    return {
      credentials,
      calls,
      setStatus: (next: DeviceStatus) => (status = next),
      revoke: () => (valid = false),
    };
  }

  it('asks the enrollment service once per token while cached; a device event evicts it', async () => {
    const { credentials, calls, setStatus } = setUp();
    expect(await credentials.authenticate(token('1'), { requestId: 'r1' })).toEqual({
      deviceId: 'dev-1',
      orgId: 'org-1',
    });
    await credentials.authenticate(token('1'), { requestId: 'r2' });
    expect(calls).toHaveLength(1);
    setStatus(DeviceStatus.DEVICE_STATUS_DISABLED);
    await credentials.authenticate(token('1'), { requestId: 'r3' });
    credentials.deviceChanged('dev-1');
    await expect(credentials.authenticate(token('1'), { requestId: 'r4' })).rejects.toMatchObject({
      code: 'DEVICE_DISABLED',
    });
    expect(calls).toHaveLength(2);
  });

  it('does not remember unknown tokens', async () => {
    const { credentials, calls } = setUp();
    await expect(credentials.authenticate(token('x'), { requestId: 'r1' })).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    await expect(credentials.authenticate(token('x'), { requestId: 'r2' })).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    await expect(credentials.authenticate(undefined, { requestId: 'r3' })).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    expect(calls).toEqual([token('x'), token('x')]);
  });

  it('refuses values not shaped like a device token without a call', async () => {
    const { credentials, calls } = setUp();
    for (const value of [
      '',
      'sts_dt_1',
      `sts_ek_${'a'.repeat(43)}`,
      `${token('1')}=`,
      `Bearer ${token('1')}`,
    ]) {
      await expect(credentials.authenticate(value, { requestId: 'r' })).rejects.toMatchObject({
        code: 'DEVICE_TOKEN_INVALID',
      });
    }
    expect(calls).toEqual([]);
  });

  it('recognises tokens the service vouched for, also with the cache off, until the service says otherwise', async () => {
    const { credentials, calls, setStatus, revoke } = setUp(0);
    expect(credentials.recognises(token('1'))).toBe(false);
    await credentials.authenticate(token('1'), { requestId: 'r1' });
    expect(credentials.recognises(token('1'))).toBe(true);
    // Disabled is still the device's own token.
    setStatus(DeviceStatus.DEVICE_STATUS_DISABLED);
    await expect(credentials.authenticate(token('1'), { requestId: 'r2' })).rejects.toMatchObject({
      code: 'DEVICE_DISABLED',
    });
    expect(credentials.recognises(token('1'))).toBe(true);
    expect([credentials.recognises(token('2')), credentials.recognises(undefined)]).toEqual([false, false]);
    revoke();
    await expect(credentials.authenticate(token('1'), { requestId: 'r3' })).rejects.toMatchObject({
      code: 'DEVICE_TOKEN_INVALID',
    });
    expect(credentials.recognises(token('1'))).toBe(false);
    expect(calls).toHaveLength(3);
  });
});
