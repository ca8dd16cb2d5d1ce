import { AppError } from '@sts/errors/app-error';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { Role as ProtoRole } from '@sts/proto/gen/identity/v1/identity';
import { OTHER_ORG_ID } from '../test/fake-upstream';
import { startTestGateway, type TestGateway } from '../test/test-gateway';

/** A device of another organization than the caller's, and its token (shaped like one). */
const THEIR_DEVICE = 'their-device';
const THEIR_TOKEN = `sts_dt_${'b'.repeat(43)}`;

/**
 * A disable, enable or delete evicts the device's cached credential on this gateway only when the change
 * may have been made: a refusal (404 for a device of another organization) leaves it cached, so that no
 * caller can make another organization's device credentials be looked up again.
 */
describe('device routes: credential evictions', () => {
  let gw: TestGateway;
  let analyst: string;
  let admin: string;
  /** What the enrollment service was asked to authenticate. */
  let lookups: number;

  beforeEach(async () => {
    gw = await startTestGateway({}, {}, { deviceCacheTtlMs: 60_000 });
    admin = await gw.tokens.user('ada@example.com');
    analyst = await gw.tokens.user('ana@example.com');
    gw.upstream.memberships.set('ana@example.com', { role: ProtoRole.ROLE_ANALYST, dashboardAccess: true });
    lookups = 0;
    gw.upstream.enrollment.authenticateDevice = async () => {
      lookups++;
      return { deviceId: THEIR_DEVICE, orgId: OTHER_ORG_ID, status: DeviceStatus.DEVICE_STATUS_ACTIVE };
    };
  });

  afterEach(async () => {
    await gw.app.close();
  });

  const authenticate = () => gw.credentials.authenticate(THEIR_TOKEN, {});
  const as = (token: string) => ({ authorization: `Bearer ${token}` });
  const changes = [
    {
      caller: () => analyst,
      method: 'POST',
      url: `/api/devices/${THEIR_DEVICE}/disable`,
      rpc: 'disableDevice',
    },
    {
      caller: () => analyst,
      method: 'POST',
      url: `/api/devices/${THEIR_DEVICE}/enable`,
      rpc: 'enableDevice',
    },
    { caller: () => admin, method: 'DELETE', url: `/api/devices/${THEIR_DEVICE}`, rpc: 'deleteDevice' },
  ] as const;

  it("leaves another organization's device credential cached when the change is refused with 404", async () => {
    await authenticate();
    for (const { caller, method, url, rpc } of changes) {
      gw.upstream.enrollment[rpc] = async () => {
        throw new AppError('DEVICE_NOT_FOUND');
      };
      expect([url, (await gw.app.inject({ method, url, headers: as(caller()) })).statusCode]).toEqual([
        url,
        404,
      ]);
    }
    await authenticate();
    expect(lookups).toBe(1);
  });

  it('evicts the credential after a change, and after a failure that may have made it', async () => {
    const failures = [
      new AppError('DEADLINE_EXCEEDED'),
      new AppError('SERVICE_UNAVAILABLE'),
      new AppError('INTERNAL'),
      new Error('connection reset'),
    ];
    const outcomes: (Error | null)[] = [null, ...failures];
    for (const { caller, method, url, rpc } of changes) {
      for (const failure of outcomes) {
        gw.upstream.enrollment[rpc] = async () => {
          if (failure) throw failure;
          return {};
        };
        await authenticate();
        const before = lookups;
        await gw.app.inject({ method, url, headers: as(caller()) });
        await authenticate();
        const change = `${rpc}: ${failure?.message ?? 'done'}`;
        expect({ change, lookedUpAgain: lookups - before }).toEqual({ change, lookedUpAgain: 1 });
      }
    }
  });
});
