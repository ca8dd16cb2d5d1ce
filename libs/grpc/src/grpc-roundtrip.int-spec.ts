import { Client, credentials, Metadata, Server, ServerCredentials, type ServiceError } from '@grpc/grpc-js';
import { AppError } from '@sts/errors/app-error';
import { createLogger } from '@sts/logger/create-logger';
import {
  BillingServiceService,
  BillingCycle,
  LicenseStatus,
  Plan,
} from '@sts/proto/gen/billing/v1/billing';
import { createPromiseClient } from './grpc-client';
import { registerService, startGrpcServer, type RunningGrpcServer } from './grpc-server';

describe('gRPC plumbing', () => {
  const logger = createLogger('grpc-test', 'silent');
  let server: RunningGrpcServer;
  let client: ReturnType<typeof createPromiseClient<typeof BillingServiceService>>;
  let handled = 0;

  beforeAll(async () => {
    const service = registerService(
      'billing.v1.BillingService',
      BillingServiceService,
      {
        getLicense: async (request) => {
          handled += 1;
          if (request.orgId === 'missing') throw new AppError('ORGANIZATION_NOT_FOUND', 'no such org', { fields: [{ path: 'org_id', message: 'unknown' }] });
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
      },
      logger,
    );
    server = await startGrpcServer({ host: '127.0.0.1', port: 0, services: [service], logger });
    client = createPromiseClient(BillingServiceService, `127.0.0.1:${server.port}`, 2_000);
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

  it("keeps the caller's stack out of grpc-js and restores the stack trace limit", async () => {
    // grpc-js's per-call Error would hold the caller's frames, and through them its request (grpc-client.ts).
    const limitBefore = Error.stackTraceLimit;
    async function callerNamedForThisTest(): Promise<AppError> {
      return client.getLicense({ orgId: 'missing' }).then(
        () => Promise.reject(new Error('expected ORGANIZATION_NOT_FOUND')),
        (e: unknown) => e as AppError,
      );
    }
    const error = await callerNamedForThisTest();
    expect(Error.stackTraceLimit).toBe(limitBefore);
    expect(error.code).toBe('ORGANIZATION_NOT_FOUND');
    expect(String((error.cause as Error).stack)).toContain('for call at');
    expect(String((error.cause as Error).stack)).not.toContain('callerNamedForThisTest');
  });

  it('hides unexpected errors behind INTERNAL', async () => {
    const error = (await client.getLicense({ orgId: 'bug' }).catch((e: unknown) => e)) as AppError;
    expect(error.code).toBe('INTERNAL');
    expect(error.detail).not.toContain('secret');
  });

  it('enforces deadlines', async () => {
    const error = (await client.getLicense({ orgId: 'slow' }, { deadlineMs: 100 }).catch((e: unknown) => e)) as AppError;
    expect(error.code).toBe('DEADLINE_EXCEEDED');
  });

  it('maps an unreachable peer to SERVICE_UNAVAILABLE', async () => {
    const dead = createPromiseClient(BillingServiceService, '127.0.0.1:1', 500);
    const error = (await dead.getLicense({ orgId: 'x' }).catch((e: unknown) => e)) as AppError;
    dead.close();
    expect(['SERVICE_UNAVAILABLE', 'DEADLINE_EXCEEDED']).toContain(error.code);
  });

  it('answers MALFORMED_REQUEST, without calling the handler, to bytes that are not the request message', async () => {
    // The server decodes requests itself (grpc-server.ts); a raw client sends what it likes.
    const raw = new Client(`127.0.0.1:${server.port}`, credentials.createInsecure());
    const handledBefore = handled;
    const error = await new Promise<ServiceError | null>((resolve) =>
      raw.makeUnaryRequest(
        BillingServiceService.getLicense.path,
        (bytes: Buffer) => bytes,
        (bytes: Buffer) => bytes,
        Buffer.from([0x0a, 0xff]),
        new Metadata(),
        {},
        (failure) => resolve(failure),
      ),
    );
    raw.close();
    expect(error?.metadata.get('sts-error-code')).toEqual(['MALFORMED_REQUEST']);
    expect(handled).toBe(handledBefore);
  });

  it('answers INTERNAL when the peer sends bytes that are not the response message', async () => {
    // The client decodes responses itself (grpc-client.ts), so it must fail the way grpc-js would.
    const peer = new Server();
    peer.addService(
      { getLicense: { ...BillingServiceService.getLicense, responseSerialize: () => Buffer.from([0x0a, 0xff]) } },
      { getLicense: (_call: unknown, callback: (error: null, response: object) => void) => callback(null, {}) },
    );
    const port = await new Promise<number>((resolve, reject) =>
      peer.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    const garbled = createPromiseClient(BillingServiceService, `127.0.0.1:${port}`, 2_000);
    const error = await garbled.getLicense({ orgId: 'x' }).catch((e: unknown) => e);
    garbled.close();
    peer.forceShutdown();
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('INTERNAL');
  });
});
