import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { createLogger } from '@sts/logger/create-logger';
import { BillingCycle, BillingServiceService, LicenseStatus, Plan } from '@sts/proto/gen/billing/v1/billing';
import { testCertificateAuthority } from '@sts/stand-ins/https-receiver';
import { testServiceAuth } from '@sts/testing/service-auth';
import { AppError } from '@sts/errors/app-error';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { registerService, startGrpcServer, type RunningGrpcServer } from '@sts/grpc/grpc-server';
import { loadGrpcTls, type GrpcTls } from '@sts/grpc/grpc-tls';
import { probeGrpcHealth } from '@sts/grpc/health-probe';
import { ServiceTokenIssuer, ServiceTokenVerifier } from '@sts/grpc/service-token';

/**
 * Mutual TLS between services (libs/grpc/src/grpc-tls.ts, as the service host binds it), with certificate
 * authorities made on the fly. Here rather than in libs/grpc, whose tests cannot use @sts/testing.
 */
describe('gRPC over mutual TLS', () => {
  const logger = createLogger('grpc-tls-test', 'silent');
  const serviceAuth = testServiceAuth();
  let dir: string;
  let server: RunningGrpcServer;
  let ours: GrpcTls;
  let strangers: GrpcTls;
  let address: string;

  /** The PEM files of a certificate of `ca`, as a deployment mounts them. */
  async function filesOf(ca: Awaited<ReturnType<typeof testCertificateAuthority>>, name: string) {
    const leaf = await ca.issueLocalhost({ clientAuth: true });
    const files = {
      GRPC_TLS_CA_FILE: join(dir, `${name}-ca.pem`),
      GRPC_TLS_CERT_FILE: join(dir, `${name}.pem`),
      GRPC_TLS_KEY_FILE: join(dir, `${name}-key.pem`),
    };
    await writeFile(files.GRPC_TLS_CA_FILE, ca.certPem);
    await writeFile(files.GRPC_TLS_CERT_FILE, leaf.cert);
    await writeFile(files.GRPC_TLS_KEY_FILE, leaf.key);
    return files;
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sts-grpc-tls-'));
    ours = loadGrpcTls(await filesOf(await testCertificateAuthority(), 'ours'))!;
    strangers = loadGrpcTls(await filesOf(await testCertificateAuthority(), 'strangers'))!;
    server = await startGrpcServer({
      host: '127.0.0.1',
      port: 0,
      services: [
        registerService(
          'billing.v1.BillingService',
          BillingServiceService,
          {
            getLicense: async (request) => ({
              license: {
                orgId: request.orgId,
                plan: Plan.PLAN_NONE,
                status: LicenseStatus.LICENSE_STATUS_PENDING,
                billingCycle: BillingCycle.BILLING_CYCLE_MONTHLY,
                expiresAt: new Date('2030-01-01T00:00:00Z'),
              },
            }),
            createCheckoutSession: () => Promise.reject(new AppError('BILLING_NOT_CONFIGURED')),
            createPortalSession: () => Promise.reject(new AppError('BILLING_NOT_CONFIGURED')),
            handlePaymentEvent: () => Promise.reject(new AppError('BILLING_NOT_CONFIGURED')),
          },
          logger,
        ),
      ],
      callers: new ServiceTokenVerifier(serviceAuth.trustedKeys, 'billing', ['gateway']),
      everyMethodCallers: ['gateway'],
      tls: ours,
      logger,
    });
    address = `127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    await server?.shutdown();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('serves a client that presents a certificate of the CA', async () => {
    const client = createPromiseClient(
      BillingServiceService,
      address,
      5_000,
      { issuer: new ServiceTokenIssuer(serviceAuth.signingKeyOf('gateway'), 'gateway'), target: 'billing' },
      ours,
    );
    try {
      expect((await client.getLicense({ orgId: 'org-1' })).license?.orgId).toBe('org-1');
    } finally {
      client.close();
    }
    expect(await probeGrpcHealth(address, 3_000, ours)).toBe(true);
  });

  /** A raw call with the given channel credentials; the error grpc-js reports, if any. */
  async function rawCall(channel: ReturnType<typeof credentials.createSsl>): Promise<ServiceError | null> {
    const client = new Client(address, channel);
    const metadata = new Metadata();
    metadata.set(
      'authorization',
      await new ServiceTokenIssuer(serviceAuth.signingKeyOf('gateway'), 'gateway').tokenFor('billing'),
    );
    try {
      return await new Promise((resolve) =>
        client.makeUnaryRequest(
          BillingServiceService.getLicense.path,
          BillingServiceService.getLicense.requestSerialize,
          (bytes: Buffer) => bytes,
          { orgId: 'org-1' },
          metadata,
          { deadline: Date.now() + 3_000 },
          (error) => resolve(error),
        ),
      );
    } finally {
      client.close();
    }
  }

  it('refuses a client without a certificate, one of another CA, and plaintext', async () => {
    // Trusts the server, presents nothing.
    expect((await rawCall(credentials.createSsl(ours.ca)))?.code).toBe(14);
    // A certificate the server's CA did not sign.
    expect((await rawCall(credentials.createSsl(ours.ca, strangers.key, strangers.cert)))?.code).toBe(14);
    expect((await rawCall(credentials.createInsecure()))?.code).toBe(14);
    // The health service is behind the same door.
    expect(await probeGrpcHealth(address, 3_000)).toBe(false);
    expect(await probeGrpcHealth(address, 3_000, strangers)).toBe(false);
  });

  it('refuses a half-configured TLS at start', () => {
    expect(() => loadGrpcTls({ GRPC_TLS_CA_FILE: join(dir, 'ours-ca.pem') })).toThrow(
      /GRPC_TLS_CA_FILE, GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE go together/,
    );
    expect(loadGrpcTls({})).toBeNull();
  });
});
