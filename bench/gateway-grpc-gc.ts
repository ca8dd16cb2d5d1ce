/**
 * What the gateway's young-generation collector keeps, a diagnostic, not a target
 * (`npx tsx bench/gateway-grpc-gc.ts`, docs/decisions.md "The device page"). A child process runs the real
 * gateway (buildGateway: routes, hooks, token cache) with in-process fake upstreams, except ListDevices,
 * which goes through our gRPC client to a canned server (bench/grpc-client-gc.ts) answering a 50-device
 * page — or, with MODE=fake, is decoded in-process from the same bytes. This process drives GET
 * /api/devices as an open loop at 500/s (3 s warm-up, 8 s measured; CLOSED=1 first runs 10 s at 64
 * connections) and prints p50/p99 and, from the child's --trace-gc-nvp lines over the measured 8 s, what the
 * gateway allocated, what its scavenges promoted and how long they paused. SEMI_SPACE_MB (64) sets the child's
 * young generation.
 */
import { fork } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { AccessTokenVerifier } from '@sts/auth/access-token-verifier';
import { buildGateway } from '@sts/gateway-http/build-gateway';
import { GatewayCaches } from '@sts/gateway-http/gateway-caches';
import { FakeUpstream } from '../libs/gateway-http/src/test/fake-upstream';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { EnrollmentServiceService } from '@sts/proto/gen/enrollment/v1/enrollment';
import { percentile, runLoad, runOpenLoad } from './bench-harness';
import { cannedDevices } from './canned-device-page';
import { traceGcNvpField } from './gc-pauses';

const MODE = process.env.MODE ?? 'grpc';
const SEMI_SPACE_MB = Number(process.env.SEMI_SPACE_MB ?? 64);
if (process.argv[2] === '--server') {
  void (async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k', alg: 'ES256', use: 'sig' };
    const verifier = new AccessTokenVerifier({
      issuer: 'https://idp.test/',
      audience: 'aud',
      keySet: createLocalJWKSet({ keys: [jwk] }),
    });
    const token = await new SignJWT({ sub: 'a@x.test', email: 'a@x.test', email_verified: true, name: 'a' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k' })
      .setIssuer('https://idp.test/')
      .setAudience('aud')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
    const upstream = new FakeUpstream();
    const devices = cannedDevices(50);
    const bytes = Buffer.from(
      EnrollmentServiceService.listDevices.responseSerialize({ devices, nextCursor: 'abc' }),
    );
    if (MODE === 'grpc') {
      const canned = fork(require.resolve('./grpc-client-gc.ts'), ['--server', '50'], {
        execArgv: ['--import', 'tsx'],
      });
      process.once('SIGTERM', () => {
        canned.kill();
        process.exit(0);
      });
      const port = await new Promise<number>((resolve) =>
        canned.once('message', (message) => resolve(Number(message))),
      );
      const client = createPromiseClient(EnrollmentServiceService, `127.0.0.1:${port}`, 5000);
      upstream.enrollment.listDevices = (request, options) => client.listDevices(request, options);
    } else {
      upstream.enrollment.listDevices = async () =>
        EnrollmentServiceService.listDevices.responseDeserialize(bytes);
    }
    const logger = pino({ level: 'info' }, pino.destination({ dest: 2, sync: false }));
    const app = await buildGateway({
      config: {
        BODY_LIMIT_BYTES: 65536,
        TRUST_PROXY: false,
        RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: 30,
        ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: 600,
        ENROLL_FAILURES_PER_MINUTE: 20,
      },
      caches: new GatewayCaches({
        CALLER_CACHE_TTL_MS: 60000,
        LICENSE_CACHE_TTL_MS: 60000,
        MEMBER_LIST_CACHE_TTL_MS: 60000,
      }),
      logger,
      clients: upstream.clients(),
      verifier,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    // Marks the measured run in the --trace-gc-nvp output.
    process.on('message', (mark) => console.log(String(mark)));
    process.send?.({ port: (app.server.address() as AddressInfo).port, token });
  })();
} else {
  const child = fork(__filename, ['--server'], {
    execArgv: ['--import', 'tsx', `--max-semi-space-size=${SEMI_SPACE_MB}`, '--trace-gc-nvp'],
    env: { ...process.env },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  let gcLines = '';
  child.stdout?.on('data', (chunk: Buffer) => (gcLines += chunk.toString('utf8')));
  child.once('message', (message) => void measure(message as { port: number; token: string }));
  const measure = async ({ port, token }: { port: number; token: string }) => {
    const url = `http://127.0.0.1:${port}/api/devices`;
    const requests = [{ path: '/api/devices', headers: { authorization: `Bearer ${token}` } }];
    if (process.env.CLOSED) await runLoad({ name: 'c', url, requests, connections: 64, durationS: 10 });
    await runOpenLoad({ name: 'x', url, requests, ratePerSecond: 500, maxConnections: 64, durationS: 3 });
    child.send('MEASURED start');
    const r = await runOpenLoad({
      name: 'x',
      url,
      requests,
      ratePerSecond: 500,
      maxConnections: 64,
      durationS: 8,
    });
    child.send('MEASURED end');
    await new Promise((resolve) => setTimeout(resolve, 200));
    console.log(
      `p50 ${percentile(r.latenciesMs, 50).toFixed(2)} ms, p99 ${percentile(r.latenciesMs, 99).toFixed(2)} ms`,
    );
    const measured = gcLines.slice(gcLines.indexOf('MEASURED start'), gcLines.indexOf('MEASURED end'));
    let allocated = 0;
    let promoted = 0;
    const scavengePauses: number[] = [];
    for (const line of measured.split('\n')) {
      allocated += traceGcNvpField(line, 'allocated');
      promoted += traceGcNvpField(line, 'promoted');
      if (line.includes('gc=s ')) scavengePauses.push(traceGcNvpField(line, 'pause'));
    }
    console.log(
      `gateway over the measured ${r.latenciesMs.length} requests: ${(allocated / 1e6).toFixed(0)} MB allocated, ` +
        `${(promoted / 1e6).toFixed(1)} MB promoted; ${scavengePauses.length} scavenges pausing ` +
        `${scavengePauses.map((pause) => pause.toFixed(1)).join(', ')} ms`,
    );
    child.kill();
    process.exit(0);
  };
}
