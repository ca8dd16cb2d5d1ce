import type { DeviceStateStore } from '@sts/analytics-domain/analytics-ports';
import type { Logger } from '@sts/logger/create-logger';
import { signallingDeviceStates } from './device-states-signal';

describe('signallingDeviceStates', () => {
  const device = { orgId: 'acme', deviceId: 'd-1' };

  function setUp(fail = false) {
    const order: string[] = [];
    const store: DeviceStateStore = {
      setState: async (_device, _hostname, state) => {
        if (fail) throw new Error('ClickHouse away');
        order.push(`state ${state}`);
      },
      purge: async () => {
        if (fail) throw new Error('ClickHouse away');
        order.push('purged');
      },
    };
    const nc = { publish: jest.fn((subject: string, body: string) => order.push(`${subject} ${body}`)) };
    const logger = { warn: jest.fn() } as unknown as Logger;
    return { order, states: signallingDeviceStates(store, nc, 'test', logger), nc };
  }

  it('tells the gateways once a state is set or a purge done, not before', async () => {
    const { order, states } = setUp();
    await states.setState(device, 'alpha', 'disabled', 1);
    await states.purge(device);
    expect(order).toEqual([
      'state disabled',
      'test.signals.device-states-applied {"org_id":"acme"}',
      'purged',
      'test.signals.device-states-applied {"org_id":"acme"}',
    ]);
  });

  it('says nothing when ClickHouse did not take the change', async () => {
    const { states, nc } = setUp(true);
    await expect(states.setState(device, 'alpha', 'disabled', 1)).rejects.toThrow('ClickHouse away');
    await expect(states.purge(device)).rejects.toThrow('ClickHouse away');
    expect(nc.publish).not.toHaveBeenCalled();
  });
});
