import { AppError } from '@sts/errors/app-error';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { openLimitsBucket } from '@sts/nats/kv-buckets';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { startTcpProxy, type TcpProxy } from '@sts/testing/tcp-proxy';
import { KvWindowCounter } from './kv-window-counter';
import { ORG_ID, OTHER_ORG_ID } from '../test/fake-upstream';
import { startTestGateway, type TestGateway } from '../test/test-gateway';

/**
 * Two gateway replicas behind one load balancer, each with its own NATS connection and counter over the
 * namespace's limits bucket on the real NATS server: every limit holds at its configured total, not
 * once per replica. Requests alternate between the replicas.
 */
describe('rate limits shared by two gateways (NATS KV)', () => {
  const logger = createLogger('shared-limits-int', 'silent');
  const namespace = uniqueNatsNamespace();
  const natsUrl = new URL(process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
  const connections: JetStreamConnection[] = [];
  const gateways: TestGateway[] = [];
  let proxy: TcpProxy;

  const limits = {
    ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: 4,
    ENROLL_FAILURES_PER_MINUTE: 3,
    ENROLL_KEY_FAILURES_PER_MINUTE: 3,
    TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE: 3,
    RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: 2,
    DEVICE_AUTH_FAILURES_PER_MINUTE: 3,
    TELEMETRY_ORG_BYTES_PER_MINUTE: 8 * 1024,
  };

  /** A value shaped like a device token, named after its device. */
  const token = (device: string) => `sts_dt_${device.padEnd(43, '_')}`;

  /** A replica connected to NATS at `url`; its upstream enrolls code GOOD and refuses other codes. */
  async function replica(url = natsUrl.toString()): Promise<TestGateway> {
    const connection = await connectJetStream({
      url,
      name: 'shared-limits-int',
      logger,
      reconnectTimeWaitMs: 100,
    });
    connections.push(connection);
    const bucket = await openLimitsBucket(connection.nc, namespace, { timeoutMs: 500 });
    const gateway = await startTestGateway(
      limits,
      {},
      {
        limits: ({ now, logger: gatewayLogger }) =>
          new KvWindowCounter(bucket, { logger: gatewayLogger, now, retryAfterMs: 200 }),
      },
    );
    gateways.push(gateway);
    gateway.upstream.enrollment.enrollDevice = async (request) => {
      gateway.upstream.calls.push({ method: 'enrollDevice', request, requestId: undefined });
      if (request.code !== 'GOOD') throw new AppError('ENROLLMENT_CODE_INVALID');
      return { deviceId: 'd-1', orgId: ORG_ID, deviceToken: 'sts_dev_x', reEnrolled: false };
    };
    // Devices named bogus-… are unknown; budget-… belong to an organization of their own.
    gateway.upstream.enrollment.authenticateDevice = async ({ deviceToken }) => {
      const device = deviceToken.slice('sts_dt_'.length).replace(/_+$/, '');
      gateway.upstream.calls.push({ method: 'authenticateDevice', request: device, requestId: undefined });
      if (device.startsWith('bogus')) throw new AppError('DEVICE_TOKEN_INVALID');
      return {
        deviceId: `dev-${device}`,
        orgId: device.startsWith('budget') ? OTHER_ORG_ID : ORG_ID,
        status: DeviceStatus.DEVICE_STATUS_ACTIVE,
      };
    };
    return gateway;
  }

  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    proxy = await startTcpProxy({ host: natsUrl.hostname, port: Number(natsUrl.port || 4222) });
    a = await replica();
    b = await replica();
  });

  afterAll(async () => {
    for (const gateway of gateways) await gateway.app.close();
    if (connections[0]) await deleteNamespaceStreams(connections[0].jsm, namespace);
    for (const connection of connections) await connection.close();
    await proxy?.close();
  });

  const enroll = (gateway: TestGateway, address: string, key: string, code: string) =>
    gateway.app.inject({
      method: 'POST',
      url: '/api/device/enroll',
      remoteAddress: address,
      headers: { 'x-enrollment-key': key },
      payload: { code, machine_id: 'm-1', hostname: 'alpha' },
    });
  const report = (
    gateway: TestGateway,
    device: string,
    batchId: string,
    options: { address?: string; path?: string } = {},
  ) =>
    gateway.app.inject({
      method: 'POST',
      url: '/api/device/telemetry',
      headers: { 'x-device-token': token(device), 'content-type': 'application/json' },
      ...(options.address ? { remoteAddress: options.address } : {}),
      payload: JSON.stringify({
        batch_id: batchId,
        events: [
          {
            observed_at: new Date(gateway.clock.nowMs - 60_000).toISOString(),
            url: `https://example.com/${options.path ?? ''}`,
            verdict: 'allowed',
            classification_ms: 1,
          },
        ],
      }),
    });
  const problem = (response: {
    statusCode: number;
    headers: Record<string, unknown>;
    json: () => unknown;
  }) => ({
    status: response.statusCode,
    type: String(response.headers['content-type']).split(';')[0],
    code: (response.json() as { code?: string }).code,
    retryAfter: response.headers['retry-after'],
  });
  const callsOf = (method: string) => a.upstream.callsOf(method).length + b.upstream.callsOf(method).length;

  it('caps enrollment requests per address at ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE across both', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++)
      statuses.push((await enroll(i % 2 ? b : a, '198.51.100.1', 'sts_ek_rate', 'GOOD')).statusCode);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429, 429, 429]);
    const limited = await enroll(a, '198.51.100.1', 'sts_ek_rate', 'GOOD');
    expect(problem(limited)).toEqual({
      status: 429,
      type: 'application/problem+json',
      code: 'RATE_LIMITED',
      retryAfter: '30',
    });
    // Another address has its own allowance.
    expect((await enroll(b, '198.51.100.2', 'sts_ek_rate', 'GOOD')).statusCode).toBe(200);
  });

  it('holds a key past ENROLL_KEY_FAILURES_PER_MINUTE across both for the networks that failed, not for others', async () => {
    const before = callsOf('enrollDevice');
    const guesses: number[] = [];
    for (let i = 0; i < 3; i++)
      guesses.push((await enroll(i % 2 ? b : a, `10.20.${i}.10`, 'sts_ek_guessed', `GUESS-${i}`)).statusCode);
    expect(guesses).toEqual([400, 400, 400]);
    // The guessing networks wait on either replica, even with the right code, from any address of their /24...
    for (const gateway of [a, b]) {
      expect(problem(await enroll(gateway, '10.20.1.99', 'sts_ek_guessed', 'GOOD'))).toEqual({
        status: 429,
        type: 'application/problem+json',
        code: 'RATE_LIMITED',
        retryAfter: '30',
      });
    }
    // ...while an agent elsewhere enrolls with the key through either (the key is not locked for everyone).
    expect((await enroll(a, '198.51.100.20', 'sts_ek_guessed', 'GOOD')).statusCode).toBe(200);
    expect((await enroll(b, '198.51.100.21', 'sts_ek_guessed', 'GOOD')).statusCode).toBe(200);
    expect(callsOf('enrollDevice') - before).toBe(5);
  });

  it('bounds a key at twice ENROLL_KEY_FAILURES_PER_MINUTE across both, however many /64s and networks guess (issue 26 review)', async () => {
    const before = callsOf('enrollDevice');
    // Good codes never count: two enrollments first, and the key still takes three failures to its ceiling.
    expect((await enroll(a, '10.30.0.1', 'sts_ek_hard', 'GOOD')).statusCode).toBe(200);
    expect((await enroll(b, '10.30.0.2', 'sts_ek_hard', 'GOOD')).statusCode).toBe(200);
    const sameSite: number[] = [];
    for (let i = 0; i < 6; i++)
      sameSite.push((await enroll(i % 2 ? b : a, `2001:db8:a:${i}::1`, 'sts_ek_hard', 'GUESS')).statusCode);
    // Three /64s of one /48 reach the ceiling; the /48's other /64s then wait (by /64 each got a try).
    expect(sameSite).toEqual([400, 400, 400, 429, 429, 429]);
    // Fresh networks, an IPv6 /48 or an IPv4 /24 each, get one failure each up to twice the ceiling...
    const fresh: number[] = [];
    for (const address of ['2001:db8:b::1', '10.30.1.1', '2001:db8:c::1', '10.30.2.1', '2001:db8:d::1'])
      fresh.push((await enroll(fresh.length % 2 ? b : a, address, 'sts_ek_hard', 'GUESS')).statusCode);
    expect(fresh).toEqual([400, 400, 400, 429, 429]);
    // ...and then none is answered with the key on either replica, not even one that never failed.
    for (const gateway of [a, b])
      expect(problem(await enroll(gateway, '192.0.2.1', 'sts_ek_hard', 'GOOD'))).toEqual({
        status: 429,
        type: 'application/problem+json',
        code: 'RATE_LIMITED',
        retryAfter: '30',
      });
    expect(callsOf('enrollDevice') - before).toBe(2 + 3 + 3);
    // Other keys are not concerned.
    expect((await enroll(b, '192.0.2.1', 'sts_ek_other_org', 'GOOD')).statusCode).toBe(200);
  });

  it('blocks an address after ENROLL_FAILURES_PER_MINUTE failures across both, with any key', async () => {
    for (let i = 0; i < 3; i++)
      expect((await enroll(i % 2 ? b : a, '198.51.100.30', `sts_ek_${i}`, 'WRONG')).statusCode).toBe(400);
    expect((await enroll(b, '198.51.100.30', 'sts_ek_other', 'GOOD')).statusCode).toBe(429);
    expect((await enroll(a, '198.51.100.30', 'sts_ek_other', 'GOOD')).statusCode).toBe(429);
  });

  it('takes TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE batches per device across both', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await report(i % 2 ? b : a, 'shared', `b-${i}`)).statusCode);
    expect(statuses).toEqual([202, 202, 202, 429, 429, 429]);
    expect(problem(await report(b, 'shared', 'b-6'))).toEqual({
      status: 429,
      type: 'application/problem+json',
      code: 'RATE_LIMITED',
      retryAfter: '30',
    });
    expect(a.published.length + b.published.length).toBe(3);
    // Another device is not limited by this one.
    expect((await report(b, 'another', 'b-0')).statusCode).toBe(202);
  });

  it('holds exactly at the limit when both take a burst at once', async () => {
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, i) => report(i % 2 ? b : a, 'burst', `burst-${i}`)),
    );
    const statuses = responses.map((response) => response.statusCode).sort();
    expect(statuses).toEqual([202, 202, 202, ...Array<number>(9).fill(429)]);
  });

  it('limits failed device authentications per address at DEVICE_AUTH_FAILURES_PER_MINUTE across both', async () => {
    const address = '198.51.100.70';
    // Devices the replicas have seen valid from this address before.
    expect((await report(a, 'nat-a', 'k-0', { address })).statusCode).toBe(202);
    expect((await report(b, 'nat-b', 'k-0', { address })).statusCode).toBe(202);
    const before = callsOf('authenticateDevice');
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++)
      statuses.push((await report(i % 2 ? b : a, `bogus-${i}`, 'x', { address })).statusCode);
    expect(statuses).toEqual([401, 401, 401, 429, 429, 429]);
    expect(callsOf('authenticateDevice') - before).toBe(3);
    expect(problem(await report(b, 'bogus-7', 'x', { address }))).toEqual({
      status: 429,
      type: 'application/problem+json',
      code: 'RATE_LIMITED',
      retryAfter: '30',
    });
    // Known devices go on; another address is not held up.
    expect((await report(a, 'nat-a', 'k-1', { address })).statusCode).toBe(202);
    expect((await report(b, 'nat-b', 'k-1', { address })).statusCode).toBe(202);
    expect((await report(a, 'bogus-8', 'x', { address: '198.51.100.71' })).statusCode).toBe(401);
  });

  it('takes TELEMETRY_ORG_BYTES_PER_MINUTE bytes per organization across both, from any of its devices', async () => {
    const statuses: number[] = [];
    // 993 bytes per batch, charged before the body is read: 8 fit in the 8 KiB budget, whichever replica and
    // device sent them.
    for (let i = 0; i < 10; i++)
      statuses.push(
        (await report(i % 2 ? b : a, `budget-${i % 3}`, `o-${i}`, { path: 'p'.repeat(850) })).statusCode,
      );
    expect(statuses).toEqual([...Array<number>(8).fill(202), 429, 429]);
    expect(problem(await report(b, 'budget-9', 'o-x'))).toEqual({
      status: 429,
      type: 'application/problem+json',
      code: 'RATE_LIMITED',
      retryAfter: '30',
    });
    // Other organizations have their own.
    expect((await report(a, 'unbudgeted', 'o-0')).statusCode).toBe(202);
  });

  it('caps invite acceptance per address at RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE across both', async () => {
    const accept = (gateway: TestGateway) =>
      gateway.app.inject({
        method: 'POST',
        url: '/api/invites/accept',
        payload: { token: 'sts_inv_abc' },
        remoteAddress: '198.51.100.40',
      });
    const statuses = [
      (await accept(a)).statusCode,
      (await accept(b)).statusCode,
      (await accept(a)).statusCode,
    ];
    expect(statuses).toEqual([200, 200, 429]);
    // Counted apart from enrollment at the same address.
    expect((await enroll(b, '198.51.100.40', 'sts_ek_apart', 'GOOD')).statusCode).toBe(200);
  });

  it('goes on enrolling when NATS KV does not answer, each replica holding the limits alone, and shares again after', async () => {
    const through = new URL(natsUrl);
    through.host = `127.0.0.1:${proxy.port}`;
    const cutOff = await replica(through.toString());
    proxy.cut();

    // Enrollment stays available, and the failure limit holds on this replica by itself.
    expect((await enroll(cutOff, '198.51.100.50', 'sts_ek_outage', 'GOOD')).statusCode).toBe(200);
    for (let i = 0; i < 3; i++)
      expect((await enroll(cutOff, `198.51.100.5${i + 1}`, 'sts_ek_outage', `GUESS-${i}`)).statusCode).toBe(
        400,
      );
    expect((await enroll(cutOff, '198.51.100.53', 'sts_ek_outage', 'GOOD')).statusCode).toBe(429);
    expect((await enroll(cutOff, '203.0.113.54', 'sts_ek_outage', 'GOOD')).statusCode).toBe(200);
    // So do the route limits (4 per address) and the telemetry limit (3 per device).
    const perAddress: number[] = [];
    for (let i = 0; i < 5; i++)
      perAddress.push((await enroll(cutOff, '198.51.100.55', 'sts_ek_x', 'GOOD')).statusCode);
    expect(perAddress).toEqual([200, 200, 200, 200, 429]);
    const telemetry: number[] = [];
    for (let i = 0; i < 4; i++) telemetry.push((await report(cutOff, 'cut', `c-${i}`)).statusCode);
    expect(telemetry).toEqual([202, 202, 202, 429]);
    expect(
      cutOff.logs.filter((line) => line.level === 40 && String(line.msg).includes('NATS KV did not answer')),
    ).toHaveLength(1);
    // The replicas that reach NATS knew nothing of it meanwhile.
    expect((await enroll(a, '198.51.100.60', 'sts_ek_outage', 'GOOD')).statusCode).toBe(200);

    proxy.restore();
    let probes = 0;
    await eventually(async () => {
      // A fresh address each time: one address would soon be over its limit, settled without asking NATS.
      probes += 1;
      await enroll(cutOff, `10.70.${Math.floor(probes / 250)}.${probes % 250}`, 'sts_ek_back', 'GOOD');
      return cutOff.logs.some((line) => String(line.msg).includes('NATS KV answers again'));
    });
    // Shared again: failures recorded through the other replicas block this one.
    for (let i = 0; i < 3; i++)
      expect((await enroll(i % 2 ? b : a, '198.51.100.80', 'sts_ek_after', `GUESS-${i}`)).statusCode).toBe(
        400,
      );
    expect((await enroll(cutOff, '198.51.100.80', 'sts_ek_after', 'GOOD')).statusCode).toBe(429);
  });
});
