import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  enrollmentCredentials,
  eventually,
  startSystem,
  type SystemUnderTest,
  enrollAgent,
  runAgent,
} from './system-under-test';

/**
 * The agent against a gateway that takes small batches only (TELEMETRY_BODY_LIMIT_BYTES 4 KiB, far below
 * what the agent would send): it splits what the gateway answers 413 until it fits, sets aside the one
 * event that can never fit, and delivers everything else exactly once.
 */
describe('the agent splits batches the gateway refuses as too large', () => {
  let system: SystemUnderTest;

  beforeAll(async () => {
    system = await startSystem({ gatewayEnv: { TELEMETRY_BODY_LIMIT_BYTES: '4096' } });
  });

  afterAll(async () => {
    await system?.stop();
  });

  it('splits on 413 with new batch ids, sets aside a lone event that never fits, and sends the rest once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sts-agent-split-'));
    const config = join(dir, 'agent.json');
    try {
      const admin = await system.tokenFor('split@agent.test', { name: 'Split' });
      const { key, code } = await enrollmentCredentials(system, admin);
      const agent = runAgent;
      expect((await enrollAgent(system, { key, code, config, machineId: 'agent-split' })).code).toBe(0);
      const deviceId = (JSON.parse(await readFile(config, 'utf8')) as { device_id: string }).device_id;

      // The oldest batch holds an event that alone is over 4 KiB (a URL of 4,050 characters: valid, but
      // too large for this gateway); 300 ordinary events follow, 100 to a batch (some 11 KB each).
      const lines = [
        JSON.stringify({ url: `https://huge.example/${'x'.repeat(4_030)}`, verdict: 'allowed' }),
        ...Array.from({ length: 300 }, (_, i) =>
          JSON.stringify({ url: `https://split-${i}.example/page`, verdict: i % 30 ? 'allowed' : 'blocked' }),
        ),
      ];
      await writeFile(join(dir, 'events.jsonl'), lines.join('\n'));
      const reported = await agent(
        'report',
        '--input',
        join(dir, 'events.jsonl'),
        '--config',
        config,
        '--batch-size',
        '100',
        '--max-retry',
        '5',
      );
      // 14: a batch was refused (the lone huge event); everything else went.
      expect(reported.code).toBe(14);
      expect(reported.stdout).toContain('done: 300 events in');
      expect(reported.stdout).toContain('1 batches refused by the server');
      expect(reported.stderr).toContain('is too large for the server');
      expect(reported.stderr).not.toContain('retrying');
      expect((await readdir(join(dir, 'spool'))).filter((name) => name.endsWith('.json'))).toEqual([]);
      const aside = await readdir(join(dir, 'spool', 'rejected'));
      expect(aside).toHaveLength(1);
      expect(await readFile(join(dir, 'spool', 'rejected', aside[0]!), 'utf8')).toContain(
        'https://huge.example/',
      );

      const summary = async () =>
        (
          await system.api<{ total_analyzed: number; dangerous_blocks: number }>(
            'GET',
            `/api/analytics/summary?window=24h&device_id=${deviceId}`,
            { token: admin },
          )
        ).body;
      await eventually(async () => (await summary()).total_analyzed === 300);
      expect((await summary()).dangerous_blocks).toBe(10);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
