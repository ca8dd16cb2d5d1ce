import { Client, credentials, Metadata, Server, ServerCredentials, type ServiceError } from '@grpc/grpc-js';
import { AppError } from '@sts/errors/app-error';
import { createLogger } from '@sts/logger/create-logger';
import { BillingServiceService, BillingCycle, LicenseStatus, Plan } from '@sts/proto/gen/billing/v1/billing';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { service as healthService } from 'grpc-health-check';
import { SignJWT } from 'jose';
import { createPromiseClient } from './grpc-client';
import { registerService, startGrpcServer, type RunningGrpcServer } from './grpc-server';
import type { ServiceName } from '@sts/vocabulary/services';
import { ServiceTokenIssuer, ServiceTokenVerifier } from './service-token';

describe('gRPC plumbing', () => {
  const logger = createLogger('grpc-test', 'silent');
  let server: RunningGrpcServer;
  let client: ReturnType<typeof createPromiseClient<typeof BillingServiceService>>;
  let handled = 0;
  // Each caller its own key; the server holds only their public halves.
  const gatewayKeys = generateKeyPairSync('ed25519');
  const notifierKeys = generateKeyPairSync('ed25519');
  const key = gatewayKeys.privateKey;
  const notifierKey = notifierKeys.privateKey;
  const trusted = new Map([
    ['gateway', [gatewayKeys.publicKey]],
    ['notification', [notifierKeys.publicKey]],
  ] as const);
  const asGateway = { issuer: new ServiceTokenIssuer(key, 'gateway'), target: 'billing' as const };

  beforeAll(async () => {
    const service = registerService(
      'billing.v1.BillingService',
      BillingServiceService,
      {
        getLicense: async (request) => {
          handled += 1;
          if (request.orgId === 'missing')
            throw new AppError('ORGANIZATION_NOT_FOUND', 'no such org', {
              fields: [{ path: 'org_id', message: 'unknown' }],
            });
          if (request.orgId === 'bug') throw new Error('secret internal detail');
          if (request.orgId === 'slow') await new Promise((resolve) => setTimeout(resolve, 500));
          return {
            license: {
              orgId: request.orgId,
              plan: Plan.PLAN_NONE,
              status: LicenseStatus.LICENSE_STATUS_PENDING,
              billingCycle: BillingCycle.BILLING_CYCLE_MONTHLY,
              expiresAt: new Date('2030-01-01T00:00:00Z'),
            },
          };
        },
        createCheckoutSession: () => Promise.reject(new AppError('BILLING_NOT_CONFIGURED')),
        createPortalSession: () => Promise.reject(new AppError('BILLING_NOT_CONFIGURED')),
        handlePaymentEvent: () => Promise.reject(new AppError('BILLING_NOT_CONFIGURED')),
      },
      logger,
    );
    server = await startGrpcServer({
      host: '127.0.0.1',
      port: 0,
      services: [service],
      callers: new ServiceTokenVerifier(trusted, 'billing', ['gateway']),
      everyMethodCallers: ['gateway'],
      logger,
    });
    client = createPromiseClient(BillingServiceService, `127.0.0.1:${server.port}`, 2_000, asGateway);
  });

  afterAll(async () => {
    client.close();
    await server.shutdown();
  });

  it('round-trips a request', async () => {
    const response = await client.getLicense({ orgId: 'o1' });
    expect(response.license?.orgId).toBe('o1');
    expect(response.license?.expiresAt?.toISOString()).toBe('2030-01-01T00:00:00.000Z');
  });

  it('carries the application error code and fields across', async () => {
    const error = await client.getLicense({ orgId: 'missing' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('ORGANIZATION_NOT_FOUND');
    expect((error as AppError).detail).toBe('no such org');
    expect((error as AppError).fields).toEqual([{ path: 'org_id', message: 'unknown' }]);
  });

  it('hides unexpected errors behind INTERNAL', async () => {
    const error = (await client.getLicense({ orgId: 'bug' }).catch((e: unknown) => e)) as AppError;
    expect(error.code).toBe('INTERNAL');
    expect(error.detail).not.toContain('secret');
  });

  it('enforces deadlines', async () => {
    const error = (await client
      .getLicense({ orgId: 'slow' }, { deadlineMs: 100 })
      .catch((e: unknown) => e)) as AppError;
    expect(error.code).toBe('DEADLINE_EXCEEDED');
  });

  it('maps an unreachable peer to SERVICE_UNAVAILABLE', async () => {
    const dead = createPromiseClient(BillingServiceService, '127.0.0.1:1', 500, asGateway);
    const error = (await dead.getLicense({ orgId: 'x' }).catch((e: unknown) => e)) as AppError;
    dead.close();
    expect(['SERVICE_UNAVAILABLE', 'DEADLINE_EXCEEDED']).toContain(error.code);
  });

  it('answers MALFORMED_REQUEST, without calling the handler, to bytes that are not the request message', async () => {
    // The server decodes requests itself (grpc-server.ts); a raw client sends what it likes.
    const handledBefore = handled;
    const error = await rawCall(Buffer.from([0x0a, 0xff]), await asGateway.issuer.tokenFor('billing'));
    expect(error?.metadata.get('sts-error-code')).toEqual(['MALFORMED_REQUEST']);
    expect(handled).toBe(handledBefore);
  });

  /** A plain grpc-js client: sends what it is given, with the `authorization` value given (if any). */
  async function rawCall(request: Buffer, authorization?: string): Promise<ServiceError | null> {
    const raw = new Client(`127.0.0.1:${server.port}`, credentials.createInsecure());
    const metadata = new Metadata();
    if (authorization !== undefined) metadata.set('authorization', authorization);
    try {
      return await new Promise<ServiceError | null>((resolve) =>
        raw.makeUnaryRequest(
          BillingServiceService.getLicense.path,
          (bytes: Buffer) => bytes,
          (bytes: Buffer) => bytes,
          request,
          metadata,
          {},
          (failure) => resolve(failure),
        ),
      );
    } finally {
      raw.close();
    }
  }

  describe('trust between services', () => {
    const validRequest = BillingServiceService.getLicense.requestSerialize({ orgId: 'o1' });
    const tokenOf = (signingKey: KeyObject, caller: ServiceName, audience: ServiceName, now?: () => number) =>
      new ServiceTokenIssuer(signingKey, caller, now).tokenFor(audience);

    it.each<[string, () => Promise<string | undefined> | string | undefined]>([
      ['no token at all', () => undefined],
      ['a token that is not a bearer token', () => 'Basic Z2F0ZXdheTpnYXRld2F5'],
      ['garbage', () => 'Bearer not-a-jwt'],
      [
        'a token signed with a key no caller holds',
        () => tokenOf(generateKeyPairSync('ed25519').privateKey, 'gateway', 'billing'),
      ],
      [
        "a token signed with the notifier's own key that claims to be the gateway",
        () => tokenOf(notifierKey, 'gateway', 'billing'),
      ],
      ['a token meant for another service', () => tokenOf(key, 'gateway', 'identity')],
      [
        'a token of a service that may not call this one',
        () => tokenOf(notifierKey, 'notification', 'billing'),
      ],
      ['an expired token', () => tokenOf(key, 'gateway', 'billing', () => Date.now() - 3_600_000)],
      [
        "an HS256 token keyed with the gateway's public key (algorithm confusion)",
        async () =>
          `Bearer ${await new SignJWT({})
            .setProtectedHeader({ alg: 'HS256' })
            .setIssuer('sts-service')
            .setSubject('gateway')
            .setAudience('billing')
            .setIssuedAt()
            .setExpirationTime('5m')
            .sign(gatewayKeys.publicKey.export({ format: 'der', type: 'spki' }))}`,
      ],
      [
        'an unsigned token (alg none)',
        async () => {
          const [, payload] = (await tokenOf(key, 'gateway', 'billing')).slice('Bearer '.length).split('.');
          return `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.${payload}.`;
        },
      ],
    ])('refuses a call with %s, before the handler runs', async (_name, authorization) => {
      const handledBefore = handled;
      const error = await rawCall(validRequest, await authorization());
      expect(error?.code).toBe(16); // UNAUTHENTICATED
      expect(error?.metadata.get('sts-error-code')).toEqual(['SERVICE_CALLER_REFUSED']);
      expect(handled).toBe(handledBefore);
    });

    it('serves a call with a valid token of an allowed caller', async () => {
      const error = await rawCall(validRequest, await tokenOf(key, 'gateway', 'billing'));
      expect(error).toBeNull();
    });

    it('answers health checks without a token (probes carry none)', async () => {
      const raw = new Client(`127.0.0.1:${server.port}`, credentials.createInsecure());
      const check = healthService.Check!;
      const answer = await new Promise<unknown>((resolve, reject) =>
        raw.makeUnaryRequest(
          check.path,
          check.requestSerialize,
          check.responseDeserialize,
          { service: 'billing.v1.BillingService' },
          new Metadata(),
          {},
          (error, response) => (error ? reject(error) : resolve(response)),
        ),
      );
      raw.close();
      expect(answer).toMatchObject({ status: 'SERVING' });
    });
  });

  it('answers INTERNAL when the peer sends bytes that are not the response message', async () => {
    // The client decodes responses itself (grpc-client.ts), so it must fail the way grpc-js would.
    const peer = new Server();
    peer.addService(
      {
        getLicense: {
          ...BillingServiceService.getLicense,
          responseSerialize: () => Buffer.from([0x0a, 0xff]),
        },
      },
      {
        getLicense: (_call: unknown, callback: (error: null, response: object) => void) => callback(null, {}),
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      peer.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    const garbled = createPromiseClient(BillingServiceService, `127.0.0.1:${port}`, 2_000, asGateway);
    const error = await garbled.getLicense({ orgId: 'x' }).catch((e: unknown) => e);
    garbled.close();
    peer.forceShutdown();
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('INTERNAL');
  });
});
