import { AppError } from '@sts/errors/app-error';
import { BillingCycle, LicenseStatus, Plan, type License } from '@sts/proto/gen/billing/v1/billing';
import { DeviceStatus, type Device } from '@sts/proto/gen/enrollment/v1/enrollment';
import { Role as ProtoRole } from '@sts/proto/gen/identity/v1/identity';
import { DEVICE_STATUS_TO_PROTO, ROLE_TO_PROTO } from '@sts/grpc/proto-enums';
import {
  deviceToContract,
  emailedEnrollmentCodeToContract,
  enrollmentCodeToContract,
  enrollmentKeyToContract,
  inviteToContract,
  licenseToContract,
  memberToContract,
  notificationToContract,
  roleFromProto,
} from './contract-mapping';
import {
  devicePayload,
  enrollmentCodePayload,
  enrollmentKeyPayload,
  invitePayload,
  licensePayload,
  memberPayload,
  notificationPayload,
  roleSchema,
} from './contract-schemas';
import { z } from 'zod';
import { protoInvite, protoMember, protoNotification } from '../test/fake-upstream';

const AT = new Date('2026-03-01T12:00:00.000Z');

function internal(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('INTERNAL');
    return error as AppError;
  }
  throw new Error('expected INTERNAL');
}

const license = (overrides: Partial<License> = {}): License => ({
  orgId: 'org-1',
  plan: Plan.PLAN_PRO,
  status: LicenseStatus.LICENSE_STATUS_ACTIVE,
  billingCycle: BillingCycle.BILLING_CYCLE_ANNUAL,
  expiresAt: AT,
  ...overrides,
});

const device = (overrides: Partial<Device> = {}): Device => ({
  id: 'd-1',
  name: 'laptop-1',
  machineId: 'machine-1',
  status: DeviceStatus.DEVICE_STATUS_ACTIVE,
  enrolledAt: AT,
  lastSeenAt: undefined,
  metadataJson: '{"os":"linux","arch":"x64"}',
  ...overrides,
});

describe('contract mapping', () => {
  describe('roles', () => {
    it('maps every contract role to proto and back', () => {
      for (const role of roleSchema.options) {
        expect(roleFromProto(ROLE_TO_PROTO[role])).toBe(role);
      }
      expect(new Set(Object.values(ROLE_TO_PROTO)).size).toBe(roleSchema.options.length);
    });

    it('covers every proto role: the three roles map, UNSPECIFIED and UNRECOGNIZED are INTERNAL', () => {
      const mapped = Object.values(ProtoRole).filter(
        (role) => role !== ProtoRole.ROLE_UNSPECIFIED && role !== ProtoRole.UNRECOGNIZED,
      );
      expect(mapped.map(roleFromProto).sort()).toEqual([...roleSchema.options].sort());
      expect(internal(() => roleFromProto(ProtoRole.ROLE_UNSPECIFIED)).detail).toBe(
        'upstream returned role ROLE_UNSPECIFIED',
      );
      internal(() => roleFromProto(ProtoRole.UNRECOGNIZED));
      internal(() => roleFromProto('ROLE_SUPERUSER' as ProtoRole));
    });
  });

  describe('licenses', () => {
    const defined = <Value extends string>(values: Value[]) =>
      values.filter((v) => !v.endsWith('_UNSPECIFIED') && v !== 'UNRECOGNIZED');

    it('maps every defined plan, status and billing cycle to a contract value', () => {
      const plans = defined(Object.values(Plan)).map((plan) => licenseToContract(license({ plan })).plan);
      const statuses = defined(Object.values(LicenseStatus)).map(
        (status) => licenseToContract(license({ status })).status,
      );
      const cycles = defined(Object.values(BillingCycle)).map(
        (billingCycle) => licenseToContract(license({ billingCycle })).billing_cycle,
      );

      expect(plans.sort()).toEqual([...licensePayload.shape.plan.options].sort());
      expect(statuses.sort()).toEqual([...licensePayload.shape.status.options].sort());
      expect(cycles.sort()).toEqual([...licensePayload.shape.billing_cycle.options].sort());
    });

    it('produces a payload the response schema accepts', () => {
      const payload = licenseToContract(license());
      expect(payload).toEqual({
        plan: 'pro',
        status: 'active',
        billing_cycle: 'annual',
        expires_at: '2026-03-01T12:00:00.000Z',
      });
      expect(licensePayload.safeParse(payload).success).toBe(true);
    });

    it('refuses unspecified or unrecognized values, a missing license and a missing expiry with INTERNAL', () => {
      internal(() => licenseToContract(undefined));
      internal(() => licenseToContract(license({ plan: Plan.PLAN_UNSPECIFIED })));
      internal(() => licenseToContract(license({ plan: Plan.UNRECOGNIZED })));
      internal(() => licenseToContract(license({ status: LicenseStatus.LICENSE_STATUS_UNSPECIFIED })));
      internal(() => licenseToContract(license({ status: LicenseStatus.UNRECOGNIZED })));
      internal(() => licenseToContract(license({ billingCycle: BillingCycle.BILLING_CYCLE_UNSPECIFIED })));
      internal(() => licenseToContract(license({ billingCycle: BillingCycle.UNRECOGNIZED })));
      expect(internal(() => licenseToContract(license({ expiresAt: undefined }))).detail).toBe(
        'upstream answer without a timestamp',
      );
    });
  });

  describe('members, invites and notifications', () => {
    it('keeps only contract fields, in contract names, valid for the response schemas', () => {
      const member = memberToContract(protoMember({ role: ProtoRole.ROLE_APP_USER, dashboardAccess: false }));
      expect(member).toEqual({
        id: 'm-1',
        email: 'ada@example.com',
        name: 'Ada',
        role: 'APP_USER',
        dashboard_access: false,
        joined_at: '2026-03-01T12:00:00.000Z',
      });
      expect(memberPayload.strict().safeParse(member).success).toBe(true);

      const invite = inviteToContract(protoInvite());
      expect(invite).toEqual({
        id: 'i-1',
        email: 'grace@example.com',
        role: 'ANALYST',
        created_at: '2026-03-01T12:00:00.000Z',
        expires_at: '2026-03-08T12:00:00.000Z',
        status: 'pending',
        accepted_at: null,
      });
      expect(invitePayload.strict().safeParse(invite).success).toBe(true);

      const notification = notificationToContract(protoNotification({ read: true }));
      expect(notification).toEqual({
        id: 'n-1',
        type: 'member.joined',
        message: 'Grace (grace@example.com) joined as ANALYST',
        read: true,
        created_at: '2026-03-01T12:00:00.000Z',
      });
      expect(notificationPayload.strict().safeParse(notification).success).toBe(true);
    });

    it('refuses missing timestamps and unspecified roles with INTERNAL', () => {
      internal(() => memberToContract(protoMember({ joinedAt: undefined })));
      internal(() => memberToContract(protoMember({ role: ProtoRole.ROLE_UNSPECIFIED })));
      internal(() => inviteToContract(protoInvite({ expiresAt: undefined })));
      internal(() => inviteToContract(protoInvite({ role: ProtoRole.UNRECOGNIZED })));
      internal(() => notificationToContract(protoNotification({ createdAt: undefined })));
    });
  });

  describe('enrollment keys and codes', () => {
    it('maps keys and codes to contract payloads the response schemas accept', () => {
      const key = enrollmentKeyToContract({ key: 'sts_ek_1', createdAt: AT });
      expect(key).toEqual({ key: 'sts_ek_1', created_at: '2026-03-01T12:00:00.000Z' });
      expect(enrollmentKeyPayload.safeParse(key).success).toBe(true);
      const code = enrollmentCodeToContract({ code: 'ABCD-EFGH', expiresAt: AT });
      expect(code).toEqual({ code: 'ABCD-EFGH', expires_at: '2026-03-01T12:00:00.000Z' });
      expect(enrollmentCodePayload.safeParse(code).success).toBe(true);
      expect(emailedEnrollmentCodeToContract('ops@example.com', { expiresAt: AT })).toEqual({
        email: 'ops@example.com',
        expires_at: '2026-03-01T12:00:00.000Z',
      });
    });

    it('refuses a missing key and missing timestamps with INTERNAL', () => {
      internal(() => enrollmentKeyToContract(undefined));
      internal(() => enrollmentKeyToContract({ key: 'sts_ek_1', createdAt: undefined }));
      internal(() => enrollmentCodeToContract({ code: 'ABCD-EFGH', expiresAt: undefined }));
      internal(() => emailedEnrollmentCodeToContract('ops@example.com', { expiresAt: undefined }));
    });
  });

  describe('devices', () => {
    const page = z.array(devicePayload);
    const mapped = (devices: Device[]) => devices.map(deviceToContract);

    it('maps every defined device status; unspecified is INTERNAL', () => {
      for (const status of devicePayload.shape.status.options) {
        expect(mapped([device({ status: DEVICE_STATUS_TO_PROTO[status] })])).toEqual([
          expect.objectContaining({ status }),
        ]);
      }
      internal(() => deviceToContract(device({ status: DeviceStatus.DEVICE_STATUS_UNSPECIFIED })));
      internal(() => deviceToContract(device({ status: DeviceStatus.UNRECOGNIZED })));
    });

    it('writes every field of the contract, parsing the metadata object and falling back to the enrollment time for last_seen_at', () => {
      const payload = mapped([
        device(),
        device({ id: 'd-2', lastSeenAt: new Date('2026-03-02T08:30:00.123Z'), metadataJson: '' }),
      ]);
      expect(payload).toEqual([
        {
          id: 'd-1',
          name: 'laptop-1',
          machine_id: 'machine-1',
          status: 'active',
          enrolled_at: '2026-03-01T12:00:00.000Z',
          last_seen_at: '2026-03-01T12:00:00.000Z',
          metadata: { os: 'linux', arch: 'x64' },
        },
        expect.objectContaining({ id: 'd-2', last_seen_at: '2026-03-02T08:30:00.123Z', metadata: {} }),
      ]);
      expect(page.safeParse(payload).success).toBe(true);
    });

    it('treats metadata that is not a JSON object as an upstream bug (INTERNAL)', () => {
      for (const metadataJson of ['[1,2]', '"text"', 'null', '{"open": 1']) {
        internal(() => deviceToContract(device({ metadataJson })));
      }
      internal(() => deviceToContract(device({ enrolledAt: undefined })));
    });
  });
});
