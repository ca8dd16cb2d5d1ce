import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTcpProxy, type TcpProxy } from '@sts/testing/tcp-proxy';
import { enrollAgent, eventually, runAgent, startSystem, type SystemUnderTest } from './system-under-test';

/**
 * Outages of the parts behind the gateway, made with TCP proxies in front of the real servers: the
 * analytics service reaches ClickHouse, and the gateway reaches NATS, through one each.
 */
describe('telemetry when ClickHouse or NATS is unreachable', () => {
  let system: SystemUnderTest;
  let clickhouseProxy: TcpProxy;
  let natsProxy: TcpProxy;
  let admin: string;
  let key: string;

  beforeAll(async () => {
    const clickhouse = new URL(process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123');
    clickhouseProxy = await startTcpProxy({
      host: clickhouse.hostname,
      port: Number(clickhouse.port || 8123),
    });
    const nats = new URL(process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
    natsProxy = await startTcpProxy({ host: nats.hostname, port: Number(nats.port || 4222) });
    const natsThroughProxy = new URL(nats);
    natsThroughProxy.host = `127.0.0.1:${natsProxy.port}`;
    system = await startSystem({
      analyticsEnv: { CLICKHOUSE_URL: `http://127.0.0.1:${clickhouseProxy.port}` },
      gatewayEnv: { NATS_URL: natsThroughProxy.toString(), TELEMETRY_PUBLISH_TIMEOUT_MS: '1000' },
    });
    admin = await system.tokenFor('ops@outage.test', { name: 'Ops' });
    key = (await system.api<{ key: string }>('POST', '/api/enrollment-key', { token: admin })).body.key;
  });

  afterAll(async () => {
    await system?.stop();
    await clickhouseProxy?.close();
    await natsProxy?.close();
  });

  async function enroll(machineId: string) {
    const codes = await system.api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
      token: admin,
      body: { count: 1 },
    });
    return (
      await system.api<{ device_id: string; device_token: string }>('POST', '/api/device/enroll', {
        headers: { 'x-enrollment-key': key },
        body: { code: codes.body.codes[0]!.code, machine_id: machineId, hostname: machineId, metadata: {} },
      })
    ).body;
  }

  const batch = (batchId: string, count: number) => ({
    batch_id: batchId,
    events: Array.from({ length: count }, (_, i) => ({
      observed_at: new Date(Date.now() - 60_000).toISOString(),
      url: `https://outage-${i}.example/`,
      verdict: i % 10 === 0 ? 'blocked' : 'allowed',
      classification_ms: 12,
    })),
  });

  const total = async (deviceId: string) =>
    (
      await system.api<{ total_analyzed: number }>(
        'GET',
        `/api/analytics/summary?window=24h&device_id=${deviceId}`,
        {
          token: admin,
        },
      )
    ).body.total_analyzed;

  it('keeps answering 202 while ClickHouse is down for 30 s, then stores everything exactly once', async () => {
    const device = await enroll('outage-clickhouse');
    let sent = 0;
    let batchNumber = 0;
    const sendOne = async () => {
      const response = await system.api('POST', '/api/device/telemetry', {
        headers: { 'x-device-token': device.device_token },
        body: batch(`c${batchNumber++}`, 50),
      });
      expect(response.status).toBe(202);
      sent += 50;
    };
    await sendOne();
    await eventually(async () => (await total(device.device_id)) === 50);

    clickhouseProxy.cut();
    const outageEnds = Date.now() + 30_000;
    while (Date.now() < outageEnds) {
      await sendOne();
      // Paces the load through the outage (about four batches a second); it proves nothing by itself.
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    clickhouseProxy.restore();

    await eventually(async () => (await total(device.device_id)) === sent, 90_000);
    // And nothing more arrives later (no batch stored twice): every batch is acknowledged, none waits.
    await eventually(() => system.consumersIdle(), 30_000);
    expect(await total(device.device_id)).toBe(sent);
  }, 180_000);

  it("answers 503 with Retry-After while NATS is unreachable, and the agent's spool keeps the events", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sts-agent-outage-'));
    const config = join(dir, 'agent.json');
    try {
      const codes = await system.api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
        token: admin,
        body: { count: 1 },
      });
      const agent = runAgent;
      const enrolled = await enrollAgent(system, {
        key,
        code: codes.body.codes[0]!.code,
        config,
        machineId: 'outage-nats',
      });
      expect(enrolled.code).toBe(0);
      const deviceId = /device id:\s+(\S+)/.exec((await agent('status', '--config', config)).stdout)![1]!;

      natsProxy.cut();
      const refused = await system.api<{ code: string }>('POST', '/api/device/telemetry', {
        headers: {
          'x-device-token': (JSON.parse(await readFile(config, 'utf8')) as { device_token: string })
            .device_token,
        },
        body: batch('n0', 3),
      });
      expect([refused.status, refused.body.code]).toEqual([503, 'SERVICE_UNAVAILABLE']);
      expect(refused.headers.get('retry-after')).toBe('5');

      const lines = Array.from({ length: 25 }, (_, i) =>
        JSON.stringify({ url: `https://spooled-${i}.example/`, verdict: 'allowed', classification_ms: 3 }),
      );
      await writeFile(join(dir, 'events.jsonl'), lines.join('\n'));
      const offline = await agent(
        'report',
        '--input',
        join(dir, 'events.jsonl'),
        '--config',
        config,
        '--batch-size',
        '10',
        '--max-retry',
        '3',
      );
      expect(offline.code).toBe(16);
      expect(offline.stderr).toContain('3 batches kept in the spool');
      expect((await readdir(join(dir, 'spool'))).filter((name) => name.endsWith('.json'))).toHaveLength(3);

      natsProxy.restore();
      const online = await eventually(async () => {
        const result = await agent('report', '--config', config, '--max-retry', '5');
        return result.code === 0 && result;
      }, 30_000);
      expect(online.stdout).toContain('done: 25 events in 3 batches sent');
      await eventually(async () => (await total(deviceId)) === 25);
    } finally {
      natsProxy.restore();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
