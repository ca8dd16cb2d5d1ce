import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { eventually, startSystem, type SystemUnderTest } from './system-under-test';

const run = promisify(execFile);

interface Problem {
  code: string;
  status: number;
  errors?: { path: string; message: string }[];
}
interface Summary {
  total_analyzed: number;
  dangerous_blocks: number;
  risky_warnings: number;
  avg_classification_ms: number;
}
interface Series {
  metric: string;
  window: string;
  data: { timestamp: string; value: number }[];
}

describe('telemetry and analytics, end to end', () => {
  let system: SystemUnderTest;
  let admin: string;
  let key: string;

  beforeAll(async () => {
    system = await startSystem();
    admin = await system.tokenFor('root@telemetry.test', { name: 'Root' });
    key = (await system.api<{ key: string }>('POST', '/api/enrollment-key', { token: admin })).body.key;
  });

  afterAll(async () => {
    await system?.stop();
  });

  async function enrollDevice(machineId: string, token = admin, enrollmentKey = key) {
    const codes = await system.api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
      token,
      body: { count: 1 },
    });
    const enrolled = await system.api<{ device_id: string; device_token: string }>(
      'POST',
      '/api/device/enroll',
      {
        headers: { 'x-enrollment-key': enrollmentKey },
        body: { code: codes.body.codes[0]!.code, machine_id: machineId, hostname: machineId, metadata: {} },
      },
    );
    expect(enrolled.status).toBe(200);
    return enrolled.body;
  }

  const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

  function batch(batchId: string, verdicts: ('allowed' | 'blocked' | 'warned')[], ms = 20) {
    return {
      batch_id: batchId,
      events: verdicts.map((verdict, i) => ({
        observed_at: minutesAgo(2),
        url: `https://site-${i}.example/path?q=${i}`,
        verdict,
        classification_ms: ms,
      })),
    };
  }

  const send = (deviceToken: string | undefined, body: unknown) =>
    system.api<Problem & { accepted: number; duplicate: boolean }>('POST', '/api/device/telemetry', {
      ...(deviceToken ? { headers: { 'x-device-token': deviceToken } } : {}),
      body,
    });

  const summary = (query: string, token = admin) =>
    system.api<Summary & Problem>('GET', `/api/analytics/summary${query}`, { token });

  it('accepts a batch with 202 and answers it in the summary and the zero-filled series', async () => {
    const device = await enrollDevice('telemetry-a');
    const accepted = await send(
      device.device_token,
      batch('first', ['allowed', 'allowed', 'blocked', 'warned']),
    );
    expect(accepted.status).toBe(202);
    expect(accepted.body).toMatchObject({ batch_id: 'first', accepted: 4, duplicate: false });
    // The same batch id again: accepted, counted once.
    const again = await send(
      device.device_token,
      batch('first', ['allowed', 'allowed', 'blocked', 'warned']),
    );
    expect([again.status, again.body.duplicate]).toEqual([202, true]);

    const figures = await eventually(async () => {
      const response = await summary(`?window=24h&device_id=${device.device_id}`);
      return response.body.total_analyzed === 4 && response.body;
    });
    expect(figures).toEqual({
      total_analyzed: 4,
      dangerous_blocks: 1,
      risky_warnings: 1,
      avg_classification_ms: 20,
    });

    const series = await system.api<Series>(
      'GET',
      `/api/analytics/series?metric=dangerous_blocks&window=24h&device_id=${device.device_id}`,
      {
        token: admin,
      },
    );
    expect(series.status).toBe(200);
    expect(series.body.metric).toBe('dangerous_blocks');
    expect(series.body.window).toBe('24h');
    expect(series.body.data).toHaveLength(24);
    const currentHour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000).toISOString();
    expect(series.body.data[23]!.timestamp).toBe(currentHour);
    expect(series.body.data.reduce((sum, point) => sum + point.value, 0)).toBe(1);
    const daily = await system.api<Series>('GET', '/api/analytics/series?metric=total_analyzed&window=30d', {
      token: admin,
    });
    expect(daily.body.data).toHaveLength(30);
    expect(daily.body.data[29]!.timestamp).toBe(`${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`);

    // Our addition for the dashboard: the summary and every metric's series in one answer, each as its
    // own route answers it.
    const overview = await system.api<{
      window: string;
      summary: typeof figures;
      series: Record<string, Series['data']>;
    }>('GET', `/api/analytics/overview?window=24h&device_id=${device.device_id}`, { token: admin });
    expect(overview.status).toBe(200);
    expect(overview.body.window).toBe('24h');
    expect(overview.body.summary).toEqual(figures);
    expect(Object.keys(overview.body.series).sort()).toEqual([
      'avg_classification_ms',
      'dangerous_blocks',
      'risky_warnings',
      'total_analyzed',
    ]);
    expect(overview.body.series.dangerous_blocks).toEqual(series.body.data);
    expect(overview.body.series.total_analyzed!.reduce((sum, point) => sum + point.value, 0)).toBe(4);
  });

  it("moves the device's last_seen_at when its telemetry arrives", async () => {
    const device = await enrollDevice('telemetry-seen');
    const listed = async () =>
      (
        await system.api<{ id: string; enrolled_at: string; last_seen_at: string }[]>(
          'GET',
          '/api/devices?limit=200',
          {
            token: admin,
          },
        )
      ).body.find((d) => d.id === device.device_id)!;
    const before = await listed();
    expect(before.last_seen_at).toBe(before.enrolled_at);
    // Not a wait for anything to happen: the batch must be stamped (the gateway's clock, this process's)
    // in a later millisecond than the enrollment, so wait for the clock to pass it, not for a set time.
    await eventually(() => Date.now() > Date.parse(before.enrolled_at));
    expect((await send(device.device_token, batch('seen-1', ['allowed']))).status).toBe(202);
    const after = await eventually(async () => {
      const row = await listed();
      return row.last_seen_at > before.last_seen_at ? row : undefined;
    });
    expect(Date.parse(after.last_seen_at)).toBeGreaterThan(Date.parse(before.enrolled_at));
  });

  it('refuses unknown tokens (401), disabled devices (403) and deleted ones (401), as problem+json', async () => {
    const device = await enrollDevice('telemetry-b');
    const body = batch('b1', ['allowed']);
    const missing = await send(undefined, body);
    expect([missing.status, missing.body.code]).toEqual([401, 'DEVICE_TOKEN_INVALID']);
    expect(missing.headers.get('content-type')).toContain('application/problem+json');
    expect((await send('sts_dt_not-a-real-token', body)).status).toBe(401);

    expect((await send(device.device_token, body)).status).toBe(202);
    expect(
      (await system.api('POST', `/api/devices/${device.device_id}/disable`, { token: admin })).status,
    ).toBe(204);
    const disabled = await eventually(async () => {
      const response = await send(device.device_token, batch('b2', ['allowed']));
      return response.status === 403 && response;
    });
    expect(disabled.body.code).toBe('DEVICE_DISABLED');
    expect(
      (await system.api('POST', `/api/devices/${device.device_id}/enable`, { token: admin })).status,
    ).toBe(204);
    await eventually(async () => (await send(device.device_token, batch('b3', ['allowed']))).status === 202);
    expect((await system.api('DELETE', `/api/devices/${device.device_id}`, { token: admin })).status).toBe(
      204,
    );
    await eventually(async () => (await send(device.device_token, batch('b4', ['allowed']))).status === 401);
  });

  it("refuses a device's very next batch after a disable (403), never counts it, and takes the next after an enable", async () => {
    const device = await enrollDevice('telemetry-next');
    const devicePath = `/api/devices/${device.device_id}`;
    // The gateway now holds the device's credential as active.
    expect((await send(device.device_token, batch('before', ['allowed', 'allowed', 'allowed']))).status).toBe(
      202,
    );

    expect((await system.api('POST', `${devicePath}/disable`, { token: admin })).status).toBe(204);
    const refused = await send(
      device.device_token,
      batch('while', ['allowed', 'allowed', 'allowed', 'allowed']),
    );
    expect([refused.status, refused.body.code]).toEqual([403, 'DEVICE_DISABLED']);

    expect((await system.api('POST', `${devicePath}/enable`, { token: admin })).status).toBe(204);
    expect((await send(device.device_token, batch('after', ['allowed', 'allowed']))).status).toBe(202);
    // The batch after the enable is counted: everything sent before it has been decided.
    const figures = await eventually(async () => {
      const response = await summary(`?window=24h&device_id=${device.device_id}`);
      return response.body.total_analyzed >= 5 && response.body;
    });
    expect(figures.total_analyzed).toBe(5);

    expect((await system.api('DELETE', devicePath, { token: admin })).status).toBe(204);
    const gone = await send(device.device_token, batch('deleted', ['allowed']));
    expect([gone.status, gone.body.code]).toEqual([401, 'DEVICE_TOKEN_INVALID']);
  });

  it('refuses hostile batches with 4xx and stores nothing of them', async () => {
    const device = await enrollDevice('telemetry-c');
    const good = batch('ok', ['allowed'])['events'][0]!;
    const cases: [string, unknown, number][] = [
      ['wrong types', { batch_id: 'h1', events: [{ ...good, classification_ms: '12' }] }, 400],
      ['unknown verdict', { batch_id: 'h2', events: [{ ...good, verdict: 'maybe' }] }, 400],
      ['negative latency', { batch_id: 'h3', events: [{ ...good, classification_ms: -1 }] }, 400],
      ['huge latency', { batch_id: 'h4', events: [{ ...good, classification_ms: 1e12 }] }, 400],
      ['invalid date', { batch_id: 'h5', events: [{ ...good, observed_at: '2026-13-45T99:00:00Z' }] }, 400],
      ['far past', { batch_id: 'h6', events: [{ ...good, observed_at: '2001-01-01T00:00:00Z' }] }, 400],
      [
        'future',
        {
          batch_id: 'h7',
          events: [{ ...good, observed_at: new Date(Date.now() + 3_600_000).toISOString() }],
        },
        400,
      ],
      [
        'control characters',
        { batch_id: 'h8', events: [{ ...good, url: 'https://a.example/\u0000x' }] },
        400,
      ],
      ['not a url', { batch_id: 'h9', events: [{ ...good, url: 'http://[oops' }] }, 400],
      ['no events', { batch_id: 'h10', events: [] }, 400],
      ['extra field', { batch_id: 'h11', events: [good], device_id: 'someone-else' }, 400],
      ['too many events', { batch_id: 'h12', events: Array.from({ length: 5001 }, () => good) }, 413],
      [
        'too large a body',
        { batch_id: 'h13', events: [{ ...good, url: `https://a.example/${'x'.repeat(3_000_000)}` }] },
        413,
      ],
    ];
    for (const [name, body, status] of cases) {
      const response = await send(device.device_token, body);
      expect([name, response.status]).toEqual([name, status]);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
    }
    const deep = await system.api<Problem>('POST', '/api/device/telemetry', {
      headers: { 'x-device-token': device.device_token, 'content-type': 'application/json' },
      rawBody: `{"batch_id":"deep","events":${'['.repeat(50_000)}${']'.repeat(50_000)}}`,
    });
    expect(deep.status).toBeGreaterThanOrEqual(400);
    expect(deep.status).toBeLessThan(500);
    // A lawful batch afterwards is the only thing counted.
    expect((await send(device.device_token, batch('lawful', ['warned']))).status).toBe(202);
    const figures = await eventually(async () => {
      const response = await summary(`?window=30d&device_id=${device.device_id}`);
      return response.body.total_analyzed > 0 && response.body;
    });
    expect(figures.total_analyzed).toBe(1);
  });

  it('validates analytics queries (400) and keeps organizations and roles apart', async () => {
    for (const query of [
      '',
      '?window=7d',
      '?window=24h&device_id=1%27%20OR%201%3D1--',
      "?window=24h&device_id=' UNION SELECT 1",
      '?window=24h&extra=1',
    ]) {
      const response = await summary(query);
      expect([query, response.status, response.body.code]).toEqual([query, 400, 'VALIDATION_FAILED']);
    }
    const badMetric = await system.api<Problem>('GET', '/api/analytics/series?metric=everything&window=24h', {
      token: admin,
    });
    expect(badMetric.status).toBe(400);
    for (const query of ['', '?window=7d', '?window=24h&metric=total_analyzed', '?window=24h&device_id=x']) {
      const response = await system.api<Problem>('GET', `/api/analytics/overview${query}`, { token: admin });
      expect([query, response.status, response.body.code]).toEqual([query, 400, 'VALIDATION_FAILED']);
    }

    const device = await enrollDevice('telemetry-d');
    expect((await send(device.device_token, batch('iso', ['blocked', 'blocked']))).status).toBe(202);
    await eventually(
      async () => (await summary(`?window=24h&device_id=${device.device_id}`)).body.total_analyzed === 2,
    );

    const stranger = await system.tokenFor('eve@elsewhere.test', { name: 'Eve' });
    expect((await summary('?window=24h', stranger)).body.total_analyzed).toBe(0);
    expect((await summary(`?window=24h&device_id=${device.device_id}`, stranger)).body).toEqual({
      total_analyzed: 0,
      dangerous_blocks: 0,
      risky_warnings: 0,
      avg_classification_ms: 0,
    });
    const strangerSeries = await system.api<Series>(
      'GET',
      `/api/analytics/series?metric=dangerous_blocks&window=30d&device_id=${device.device_id}`,
      {
        token: stranger,
      },
    );
    expect(strangerSeries.body.data.every((point) => point.value === 0)).toBe(true);
    const strangerOverview = await system.api<{ summary: { total_analyzed: number } }>(
      'GET',
      `/api/analytics/overview?window=24h&device_id=${device.device_id}`,
      { token: stranger },
    );
    expect(strangerOverview.body.summary.total_analyzed).toBe(0);
    expect((await system.api('GET', '/api/analytics/summary?window=24h')).status).toBe(401);
    expect((await system.api('GET', '/api/analytics/overview?window=24h')).status).toBe(401);

    const health = await system.api<{ status: string }>('GET', '/api/analytics/health');
    expect([health.status, health.body.status]).toEqual([200, 'ok']);
  });

  it('leaves a disabled device out of organization figures and raises a threat alert in the feed', async () => {
    const owner = await system.tokenFor('owner@threats.test', { name: 'Owner' });
    const ownKey = (await system.api<{ key: string }>('POST', '/api/enrollment-key', { token: owner })).body
      .key;
    const calm = await enrollDevice('calm-laptop', owner, ownKey);
    const noisy = await enrollDevice('noisy-kiosk', owner, ownKey);
    expect((await send(calm.device_token, batch('c1', ['allowed', 'allowed']))).status).toBe(202);
    expect(
      (
        await send(
          noisy.device_token,
          batch('n1', ['blocked', 'blocked', 'blocked', 'blocked', 'blocked', 'blocked']),
        )
      ).status,
    ).toBe(202);
    await eventually(async () => (await summary('?window=24h', owner)).body.total_analyzed === 8);

    const alert = await eventually(async () => {
      const feed = await system.api<{ type: string; message: string }[]>('GET', '/api/notifications', {
        token: owner,
      });
      return feed.body.find((item) => item.type === 'threat.alert');
    });
    expect(alert.message).toContain('noisy-kiosk');

    expect(
      (await system.api('POST', `/api/devices/${noisy.device_id}/disable`, { token: owner })).status,
    ).toBe(204);
    await eventually(async () => (await summary('?window=24h', owner)).body.total_analyzed === 2);
    expect(
      (await system.api('POST', `/api/devices/${noisy.device_id}/enable`, { token: owner })).status,
    ).toBe(204);
    await eventually(async () => (await summary('?window=24h', owner)).body.total_analyzed === 8);
  });

  it("reports through the agent's report and simulate commands, keeping a spool", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sts-agent-report-'));
    const config = join(dir, 'agent.json');
    try {
      const codes = await system.api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
        token: admin,
        body: { count: 1 },
      });
      const agent = (...args: string[]) =>
        run(process.execPath, ['--import', 'tsx', 'apps/agent/src/main.ts', ...args]);
      await agent(
        'enroll',
        '--server',
        system.gateway.url,
        '--key',
        key,
        '--code',
        codes.body.codes[0]!.code,
        '--config',
        config,
        '--machine-id',
        'agent-report-machine',
        '--hostname',
        'agent-report',
      );
      const deviceId = (JSON.parse(await readFile(config, 'utf8')) as { device_id: string }).device_id;
      const lines = [
        JSON.stringify({ url: 'https://one.example/', verdict: 'allowed', classification_ms: 5 }),
        'not json',
        JSON.stringify({ url: 'https://two.example/', verdict: 'blocked', classification_ms: 15 }),
        JSON.stringify({ url: 'https://three.example/', verdict: 'warned' }),
      ];
      await writeFile(join(dir, 'events.jsonl'), lines.join('\n'));
      const reported = await agent(
        'report',
        '--input',
        join(dir, 'events.jsonl'),
        '--config',
        config,
        '--batch-size',
        '2',
      );
      expect(reported.stdout).toContain('queued 3 events, skipped 1 invalid lines');
      expect(reported.stdout).toContain('done: 3 events in 2 batches sent');
      expect(await readdir(join(dir, 'spool'))).toEqual([]);

      const simulated = await agent(
        'simulate',
        '--events',
        '300',
        '--hours',
        '2',
        '--seed',
        '7',
        '--config',
        config,
      );
      expect(simulated.stdout).toContain('done: 300 events');
      await eventually(
        async () => (await summary(`?window=24h&device_id=${deviceId}`)).body.total_analyzed === 303,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
