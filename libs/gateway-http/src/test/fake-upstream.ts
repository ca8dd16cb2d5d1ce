import type { CallOptions } from '@sts/grpc/service-types';
import { BillingCycle, LicenseStatus, Plan } from '@sts/proto/gen/billing/v1/billing';
import {
  InviteState,
  Role as ProtoRole,
  type Invite,
  type Member,
  type ResolveCallerResponse,
} from '@sts/proto/gen/identity/v1/identity';
import type { Notification } from '@sts/proto/gen/notification/v1/notification';
import type { UpstreamClients } from '../upstream-clients';

/** The generated clients' methods are read-only; the fake's can be replaced by a test. */
type Scriptable<Client> = { -readonly [Method in keyof Client]: Client[Method] };

/** One recorded upstream call: which RPC, with what request and request id. */
export interface UpstreamCall {
  method: string;
  request: unknown;
  requestId: string | undefined;
}

export const ORG_ID = '0b6a8a55-7c55-4b8e-9d0e-5f2f3c1a1a01';
export const OTHER_ORG_ID = '0b6a8a55-7c55-4b8e-9d0e-5f2f3c1a1a02';
export const AT = new Date('2026-03-01T12:00:00.000Z');

/** How identity sees a user, by token subject. Unknown subjects are ORG_ADMIN with dashboard access. */
export interface FakeMembership {
  role: ProtoRole;
  dashboardAccess: boolean;
}

export const protoMember = (overrides: Partial<Member> = {}): Member => ({
  id: 'm-1',
  userId: 'u-1',
  email: 'ada@example.com',
  name: 'Ada',
  role: ProtoRole.ROLE_ORG_ADMIN,
  dashboardAccess: true,
  joinedAt: AT,
  ...overrides,
});

export const protoInvite = (overrides: Partial<Invite> = {}): Invite => ({
  id: 'i-1',
  state: InviteState.INVITE_STATE_PENDING,
  acceptedAt: undefined,
  email: 'grace@example.com',
  role: ProtoRole.ROLE_ANALYST,
  createdAt: AT,
  expiresAt: new Date(AT.getTime() + 7 * 24 * 3_600_000),
  ...overrides,
});

export const protoNotification = (overrides: Partial<Notification> = {}): Notification => ({
  id: 'n-1',
  type: 'member.joined',
  message: 'Grace (grace@example.com) joined as ANALYST',
  read: false,
  createdAt: AT,
  ...overrides,
});

/**
 * Hand-written stand-ins for the gRPC clients (unit tier: no network). Every method is a plain async
 * function returning proto-shaped objects; tests replace single methods to script answers or errors.
 */
export class FakeUpstream {
  readonly calls: UpstreamCall[] = [];
  readonly memberships = new Map<string, FakeMembership>();

  private record(method: string, request: unknown, options: CallOptions | undefined): void {
    this.calls.push({ method, request, requestId: options?.requestId });
  }

  callsOf(method: string): UpstreamCall[] {
    return this.calls.filter((call) => call.method === method);
  }

  readonly identity: Scriptable<UpstreamClients['identity']> = {
    resolveCaller: async (request, options) => {
      this.record('resolveCaller', request, options);
      const principal = request.principal;
      if (!principal) throw new Error('no principal');
      if (principal.$case === 'client') {
        const response: ResolveCallerResponse = {
          user: { id: `client:${principal.value.subject}`, email: '', name: principal.value.subject },
          org: { id: principal.value.orgId, name: 'Acme' },
          memberId: '',
          role: principal.value.role,
          dashboardAccess: true,
        };
        return response;
      }
      const membership = this.memberships.get(principal.value.subject) ?? {
        role: ProtoRole.ROLE_ORG_ADMIN,
        dashboardAccess: true,
      };
      return {
        user: {
          id: `user:${principal.value.subject}`,
          email: principal.value.email,
          name: principal.value.name,
        },
        org: { id: request.orgId || ORG_ID, name: 'Acme' },
        memberId: `member:${principal.value.subject}`,
        role: membership.role,
        dashboardAccess: membership.dashboardAccess,
      };
    },
    listMembers: async (request, options) => {
      this.record('listMembers', request, options);
      return { members: [protoMember()], nextCursor: '' };
    },
    updateMember: async (request, options) => {
      this.record('updateMember', request, options);
      return { member: protoMember({ id: request.memberId, role: request.role ?? ProtoRole.ROLE_ANALYST }) };
    },
    removeMember: async (request, options) => {
      this.record('removeMember', request, options);
      return {};
    },
    listInvites: async (request, options) => {
      this.record('listInvites', request, options);
      return { invites: [protoInvite()], nextCursor: '' };
    },
    createInvite: async (request, options) => {
      this.record('createInvite', request, options);
      return { invite: protoInvite({ email: request.email.toLowerCase(), role: request.role }) };
    },
    revokeInvite: async (request, options) => {
      this.record('revokeInvite', request, options);
      return {};
    },
    acceptInvite: async (request, options) => {
      this.record('acceptInvite', request, options);
      return { invite: protoInvite(), org: { id: ORG_ID, name: 'Acme' } };
    },
    previewInvite: async (request, options) => {
      this.record('previewInvite', request, options);
      return { invite: protoInvite(), org: { id: ORG_ID, name: 'Acme' } };
    },
    reserveOutboundEmail: async (request, options) => {
      this.record('reserveOutboundEmail', request, options);
      return { reservationId: 'r-1' };
    },
    releaseOutboundEmail: async (request, options) => {
      this.record('releaseOutboundEmail', request, options);
      return {};
    },
    close: () => undefined,
  };

  readonly notification: Scriptable<UpstreamClients['notification']> = {
    listNotifications: async (request, options) => {
      this.record('listNotifications', request, options);
      return { notifications: [protoNotification()], nextCursor: '', unreadCount: 1 };
    },
    markRead: async (request, options) => {
      this.record('markRead', request, options);
      return { notification: protoNotification({ id: request.notificationId, read: true }) };
    },
    markAllRead: async (request, options) => {
      this.record('markAllRead', request, options);
      return { marked: 1 };
    },
    listAlertEndpoints: (request, options) => this.unscripted('listAlertEndpoints', request, options),
    createAlertEndpoint: (request, options) => this.unscripted('createAlertEndpoint', request, options),
    deleteAlertEndpoint: (request, options) => this.unscripted('deleteAlertEndpoint', request, options),
    sendTestAlert: (request, options) => this.unscripted('sendTestAlert', request, options),
    listAlertDeliveries: (request, options) => this.unscripted('listAlertDeliveries', request, options),
    rotateAlertSecret: (request, options) => this.unscripted('rotateAlertSecret', request, options),
    enableAlertEndpoint: (request, options) => this.unscripted('enableAlertEndpoint', request, options),
    close: () => undefined,
  };

  readonly billing: Scriptable<UpstreamClients['billing']> = {
    getLicense: async (request, options) => {
      this.record('getLicense', request, options);
      return {
        license: {
          orgId: request.orgId,
          plan: Plan.PLAN_NONE,
          status: LicenseStatus.LICENSE_STATUS_PENDING,
          billingCycle: BillingCycle.BILLING_CYCLE_MONTHLY,
          expiresAt: new Date(AT.getTime() + 14 * 24 * 3_600_000),
        },
      };
    },
    createCheckoutSession: (request, options) => this.unscripted('createCheckoutSession', request, options),
    createPortalSession: (request, options) => this.unscripted('createPortalSession', request, options),
    handlePaymentEvent: (request, options) => this.unscripted('handlePaymentEvent', request, options),
    close: () => undefined,
  };

  /** Enrollment is not scripted by default: a test that reaches it replaces the method it needs. */
  readonly enrollment: Scriptable<UpstreamClients['enrollment']> = {
    getEnrollmentKey: (request, options) => this.unscripted('getEnrollmentKey', request, options),
    rotateEnrollmentKey: (request, options) => this.unscripted('rotateEnrollmentKey', request, options),
    revokeEnrollmentKey: (request, options) => this.unscripted('revokeEnrollmentKey', request, options),
    createEnrollmentCodes: (request, options) => this.unscripted('createEnrollmentCodes', request, options),
    emailEnrollmentCode: (request, options) => this.unscripted('emailEnrollmentCode', request, options),
    enrollDevice: (request, options) => this.unscripted('enrollDevice', request, options),
    allowReEnrollment: (request, options) => this.unscripted('allowReEnrollment', request, options),
    listDevices: (request, options) => this.unscripted('listDevices', request, options),
    getDevice: (request, options) => this.unscripted('getDevice', request, options),
    disableDevice: (request, options) => this.unscripted('disableDevice', request, options),
    enableDevice: (request, options) => this.unscripted('enableDevice', request, options),
    deleteDevice: (request, options) => this.unscripted('deleteDevice', request, options),
    authenticateDevice: (request, options) => this.unscripted('authenticateDevice', request, options),
    close: () => undefined,
  };

  /** Analytics is not scripted by default either. */
  readonly analytics: Scriptable<UpstreamClients['analytics']> = {
    getSummary: (request, options) => this.unscripted('getSummary', request, options),
    getSeries: (request, options) => this.unscripted('getSeries', request, options),
    close: () => undefined,
  };

  clients(): UpstreamClients {
    return {
      identity: this.identity,
      notification: this.notification,
      billing: this.billing,
      enrollment: this.enrollment,
      analytics: this.analytics,
      close: () => undefined,
    };
  }

  private async unscripted(
    method: string,
    request: unknown,
    options: CallOptions | undefined,
  ): Promise<never> {
    this.record(method, request, options);
    throw new Error(`fake upstream: ${method} is not scripted in this test`);
  }
}
