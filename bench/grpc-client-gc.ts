/**
 * grpc-js unary calls and the garbage they leave (`npx tsx bench/grpc-client-gc.ts [devices] [-- node flags]`),
 * a diagnostic, not a target. A server process answers ListDevices with a canned page of N devices (50);
 * the client keeps 64 calls in flight through `createPromiseClient` (the services' own client) for 2 s of
 * warm-up and 5 s measured, then prints calls/s, CPU µs per call of client and server, and, per process,
 * the V8 collector's totals from `--trace-gc-nvp`: bytes allocated and promoted, and the sum of pauses.
 * Node flags after `--` (e.g. `-- --max-semi-space-size=64`) apply to both processes.
 */
import { fork, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { cannedDevices } from './canned-device-page';
import { traceGcNvpField } from './gc-pauses';
import {
  DeviceStatus,
  EnrollmentServiceService,
} from '@sts/proto/gen/enrollment/v1/enrollment';

const IN_FLIGHT = 64;
const [role, devicesArg] = process.argv.slice(2);

if (role === '--server') {
  const devices = cannedDevices(Number(devicesArg));
  const server = new Server();
  server.addService(EnrollmentServiceService, {
    listDevices: (_call: unknown, callback: (error: null, response: unknown) => void) =>
      callback(null, { devices, nextCursor: '' }),
  });
  server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (_error, port) => process.send?.(port));
  process.on('message', () => process.send?.(process.cpuUsage()));
} else if (role === '--client') {
  const server = fork(__filename, ['--server', devicesArg ?? '50'], { execArgv: process.execArgv });
  const serverCpu = () =>
    new Promise<NodeJS.CpuUsage>((resolve) => {
      server.once('message', (usage) => resolve(usage as NodeJS.CpuUsage));
      server.send('cpu');
    });
  server.once('message', (port) => {
    void (async () => {
      const client = createPromiseClient(
        EnrollmentServiceService,
        `127.0.0.1:${Number(port)}`,
        5_000,
      );
      const request = {
        orgId: randomUUID(),
        limit: 50,
        cursor: '',
        status: DeviceStatus.DEVICE_STATUS_UNSPECIFIED,
        query: '',
      };
      const run = async (ms: number) => {
        const end = Date.now() + ms;
        let calls = 0;
        await Promise.all(
          Array.from({ length: IN_FLIGHT }, async () => {
            while (Date.now() < end) {
              await client.listDevices(request);
              calls += 1;
            }
          }),
        );
        return calls;
      };
      await run(2_000);
      const serverBefore = await serverCpu();
      const clientBefore = process.cpuUsage();
      const startedAt = Date.now();
      const calls = await run(5_000);
      const clientCpu = process.cpuUsage(clientBefore);
      const seconds = (Date.now() - startedAt) / 1000;
      const serverAfter = await serverCpu();
      const serverMicros = serverAfter.user + serverAfter.system - serverBefore.user - serverBefore.system;
      console.log(
        `RESULT ${(calls / seconds).toFixed(0)} calls/s; CPU per call: client ${((clientCpu.user + clientCpu.system) / calls).toFixed(0)} µs, ` +
          `server ${(serverMicros / calls).toFixed(0)} µs`,
      );
      client.close();
      server.kill();
    })();
  });
} else {
  // Parent: runs the client (which forks the server) with --trace-gc-nvp and sums the collector's lines.
  const flags = process.argv.includes('--') ? process.argv.slice(process.argv.indexOf('--') + 1) : [];
  const devices = role && !role.startsWith('-') ? role : '50';
  const child = spawn(
    process.execPath,
    [...flags, '--trace-gc-nvp', '--import', 'tsx', __filename, '--client', devices],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.on('exit', () => {
    const perProcess = new Map<
      string,
      { gcs: number; allocated: number; promoted: number; pauseMs: number }
    >();
    for (const line of output.split('\n')) {
      const pid = /^\[(\d+):/.exec(line)?.[1];
      if (!pid || !line.includes(' pause=')) continue;
      const totals = perProcess.get(pid) ?? { gcs: 0, allocated: 0, promoted: 0, pauseMs: 0 };
      totals.gcs += 1;
      totals.allocated += traceGcNvpField(line, 'allocated');
      totals.promoted += traceGcNvpField(line, 'promoted');
      totals.pauseMs += traceGcNvpField(line, 'pause');
      perProcess.set(pid, totals);
    }
    console.log(
      `${devices} devices per page, ${IN_FLIGHT} calls in flight, node flags: ${flags.join(' ') || '(none)'}`,
    );
    console.log(
      output
        .split('\n')
        .find((line) => line.startsWith('RESULT'))
        ?.slice(7) ?? 'no result',
    );
    for (const [pid, totals] of perProcess) {
      console.log(
        `  process ${pid}: ${totals.gcs} collections, ${(totals.allocated / 1e6).toFixed(0)} MB allocated, ` +
          `${(totals.promoted / 1e6).toFixed(0)} MB promoted, ${totals.pauseMs.toFixed(0)} ms paused (whole run, warm-up included)`,
      );
    }
  });
}
