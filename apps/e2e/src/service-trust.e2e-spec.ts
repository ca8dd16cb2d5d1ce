import { generateKeyPairSync } from 'node:crypto';
import { Client, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { ServiceTokenIssuer } from '@sts/grpc/service-token';
import { EnrollmentServiceService } from '@sts/proto/gen/enrollment/v1/enrollment';
import { IdentityServiceService, Role } from '@sts/proto/gen/identity/v1/identity';
import { startSystem, type SystemUnderTest } from './system-under-test';

/**
 * The services' gRPC ports are reachable by anything on their network. These calls are what an
 * attacker there would make; each must be refused before it reaches a handler.
 */
describe('trust between services, end to end', () => {
  let system: SystemUnderTest;
  let orgId: string;

  beforeAll(async () => {
    system = await startSystem();
    const admin = await system.tokenFor('root@trust.test', { name: 'Root' });
    const session = await system.api<{ org: { id: string } }>('GET', '/api/session', { token: admin });
    orgId = session.body.org.id;
    expect((await system.api('POST', '/api/enrollment-key', { token: admin })).status).toBe(200);
  });

  afterAll(async () => {
    await system?.stop();
  });

  /** A plain grpc-js client, as an attacker would write it: the real messages, any `authorization`. */
  async function call<Request>(
    address: string,
    method: { path: string; requestSerialize: (request: Request) => Buffer },
    request: Request,
    authorization?: string,
  ): Promise<{ error: ServiceError | null; bytes?: Buffer }> {
    const client = new Client(address, credentials.createInsecure());
    const metadata = new Metadata();
    if (authorization) metadata.set('authorization', authorization);
    try {
      return await new Promise((resolve) =>
        client.makeUnaryRequest(
          method.path,
          method.requestSerialize,
          (bytes: Buffer) => bytes,
          request,
          metadata,
          {},
          (error, bytes) => resolve({ error, bytes }),
        ),
      );
    } finally {
      client.close();
    }
  }

  const attacks = () => [
    [
      'GetEnrollmentKey',
      system.grpcAddresses.enrollment,
      EnrollmentServiceService.getEnrollmentKey,
      { orgId },
    ] as const,
    [
      'ResolveCaller for a made-up client principal',
      system.grpcAddresses.identity,
      IdentityServiceService.resolveCaller,
      {
        principal: {
          $case: 'client',
          value: { issuer: 'https://evil.test', subject: 'evil', orgId, role: Role.ROLE_ORG_ADMIN },
        },
        orgId: '',
      },
    ] as const,
    [
      'ListMembers of an organization',
      system.grpcAddresses.identity,
      IdentityServiceService.listMembers,
      { orgId, limit: 50 },
    ] as const,
  ];

  it('refuses every call without a service token', async () => {
    for (const [name, address, method, request] of attacks()) {
      const { error, bytes } = await call(address, method as never, request);
      expect({ name, code: error?.code, appCode: error?.metadata.get('sts-error-code') }).toEqual({
        name,
        code: 16,
        appCode: ['SERVICE_CALLER_REFUSED'],
      });
      expect(bytes).toBeUndefined();
    }
  });

  it('refuses tokens signed with a key no service holds, and tokens of a service that is not an allowed caller', async () => {
    const forged = new ServiceTokenIssuer(generateKeyPairSync('ed25519').privateKey, 'gateway');
    const realKeyWrongCaller = system.serviceAuth.as('enrollment', 'analytics').issuer;
    for (const [name, address, method, request] of attacks()) {
      const target = address === system.grpcAddresses.enrollment ? 'enrollment' : 'identity';
      for (const issuer of [forged, realKeyWrongCaller]) {
        const { error } = await call(address, method as never, request, await issuer.tokenFor(target));
        expect({ name, caller: issuer.caller, appCode: error?.metadata.get('sts-error-code') }).toEqual({
          name,
          caller: issuer.caller,
          appCode: ['SERVICE_CALLER_REFUSED'],
        });
      }
    }
  });

  it("refuses the notifier's own key when its token claims to be the gateway (a compromised notifier)", async () => {
    // What a notifier taken over from the internet holds: its own private key, never the gateway's.
    const impostor = new ServiceTokenIssuer(system.serviceAuth.signingKeyOf('notification'), 'gateway');
    for (const [name, address, method, request] of attacks()) {
      const target = address === system.grpcAddresses.enrollment ? 'enrollment' : 'identity';
      const { error, bytes } = await call(address, method as never, request, await impostor.tokenFor(target));
      expect({ name, code: error?.code, appCode: error?.metadata.get('sts-error-code') }).toEqual({
        name,
        code: 16,
        appCode: ['SERVICE_CALLER_REFUSED'],
      });
      expect(bytes).toBeUndefined();
    }
    // The gateway's own key is served: the refusals above were the key, not the calls.
    const gateway = new ServiceTokenIssuer(system.serviceAuth.signingKeyOf('gateway'), 'gateway');
    const members = await call(
      system.grpcAddresses.identity,
      IdentityServiceService.listMembers,
      { orgId, limit: 50, cursor: '' },
      await gateway.tokenFor('identity'),
    );
    expect(members.error).toBeNull();
    const key = await call(
      system.grpcAddresses.enrollment,
      EnrollmentServiceService.getEnrollmentKey,
      { orgId },
      await gateway.tokenFor('enrollment'),
    );
    expect(key.error).toBeNull();
  });

  it('lets the notifier list members (the admins it e-mails) and call nothing else of identity', async () => {
    const notifier = system.serviceAuth.as('identity', 'notification').issuer;
    const token = await notifier.tokenFor('identity');
    const listed = await call(
      system.grpcAddresses.identity,
      IdentityServiceService.listMembers,
      { orgId, limit: 50, cursor: '' },
      token,
    );
    expect(listed.error).toBeNull();
    expect(IdentityServiceService.listMembers.responseDeserialize(listed.bytes!).members).toEqual([
      expect.objectContaining({ email: 'root@trust.test', role: Role.ROLE_ORG_ADMIN }),
    ]);
    const [, , resolveCaller, request] = attacks()[1]!;
    const refused = await call(system.grpcAddresses.identity, resolveCaller as never, request, token);
    expect(refused.error?.metadata.get('sts-error-code')).toEqual(['SERVICE_CALLER_REFUSED']);
    const demote = await call(
      system.grpcAddresses.identity,
      IdentityServiceService.updateMember,
      { orgId, memberId: '00000000-0000-4000-8000-000000000000', role: Role.ROLE_APP_USER },
      token,
    );
    expect(demote.error?.metadata.get('sts-error-code')).toEqual(['SERVICE_CALLER_REFUSED']);
  });

  it('serves the gateway, with its own key (the key is there, so the refusals above were the token)', async () => {
    const gateway = system.serviceAuth.as('enrollment').issuer;
    const { error, bytes } = await call(
      system.grpcAddresses.enrollment,
      EnrollmentServiceService.getEnrollmentKey,
      { orgId },
      await gateway.tokenFor('enrollment'),
    );
    expect(error).toBeNull();
    expect(EnrollmentServiceService.getEnrollmentKey.responseDeserialize(bytes!).key?.key).toMatch(
      /^sts_ek_/,
    );
  });
});
