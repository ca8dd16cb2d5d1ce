/** The public REST API's shapes (contract.md section 2 and libs/gateway-http's zod schemas). */
import type { Role } from '../lib/permissions';
import type { AnalyticsWindow } from '../lib/buckets';

export type { Role, AnalyticsWindow };

export interface Session {
  readonly user: {
    readonly id: string;
    readonly email: string;
    readonly name: string;
    readonly role: Role;
    readonly dashboard_access: boolean;
  };
  readonly org: { readonly id: string; readonly name: string; readonly domain: string | null };
  readonly license: License;
}

export type Plan = 'none' | 'basic' | 'pro' | 'enterprise';
export type BillingCycle = 'monthly' | 'annual';
export interface License {
  readonly plan: Plan;
  readonly status: 'pending' | 'onboarding' | 'active' | 'canceled';
  readonly billing_cycle: BillingCycle;
  readonly expires_at: string;
}

export interface Member {
  readonly id: string;
  readonly email: string;
  readonly name: string;
  readonly role: Role;
  readonly dashboard_access: boolean;
  readonly joined_at: string;
}

/** pending: not accepted yet; accepted: the invitee joins at their next sign-in before expires_at. */
export type InviteStatus = 'pending' | 'accepted';

export interface Invite {
  readonly id: string;
  readonly email: string;
  readonly role: Role;
  readonly created_at: string;
  readonly expires_at: string;
  readonly status: InviteStatus;
  readonly accepted_at: string | null;
}

export interface AcceptedInvite {
  readonly status: 'accepted';
  readonly email: string;
  readonly role: Role;
  readonly org: { readonly id: string; readonly name: string };
}

/** What an invitation token would accept (POST /api/invites/preview). */
export interface InvitePreview {
  readonly status: 'pending';
  readonly email: string;
  readonly role: Role;
  readonly org: { readonly id: string; readonly name: string };
  readonly expires_at: string;
}

export type DeviceStatus = 'active' | 'disabled';
export interface Device {
  readonly id: string;
  readonly name: string;
  readonly machine_id: string;
  readonly status: DeviceStatus;
  readonly enrolled_at: string;
  readonly last_seen_at: string;
  readonly metadata: Record<string, unknown>;
}

export interface EnrollmentKey {
  readonly key: string;
  readonly created_at: string;
}

export interface EnrollmentCode {
  readonly code: string;
  readonly expires_at: string;
}

export interface AlertEndpoint {
  readonly id: string;
  readonly url: string;
  readonly description?: string;
  readonly created_at: string;
  readonly disabled_at?: string;
}

export interface CreatedAlertEndpoint extends AlertEndpoint {
  readonly secret: string;
}

export interface RotatedAlertEndpoint extends CreatedAlertEndpoint {
  readonly previous_secret_expires_at: string;
}

export interface AlertDelivery {
  readonly id: string;
  readonly endpoint_id: string;
  readonly event_type: 'alert.threat_detected' | 'alert.test';
  readonly status: 'pending' | 'delivered' | 'failed';
  readonly attempts: number;
  readonly last_response_code: number | null;
  readonly last_error: string | null;
  readonly last_duration_ms: number | null;
  readonly last_attempt_at: string | null;
  readonly next_attempt_at: string | null;
  readonly created_at: string;
}

export type Metric = 'total_analyzed' | 'dangerous_blocks' | 'risky_warnings' | 'avg_classification_ms';

export interface AnalyticsSummary {
  readonly total_analyzed: number;
  readonly dangerous_blocks: number;
  readonly risky_warnings: number;
  readonly avg_classification_ms: number;
}

export interface TimeSeries {
  readonly metric: Metric;
  readonly window: AnalyticsWindow;
  readonly data: { readonly timestamp: string; readonly value: number }[];
}

/** GET /api/analytics/overview: the summary and each metric's buckets (oldest first, zero-filled). */
export interface AnalyticsOverview {
  readonly window: AnalyticsWindow;
  readonly summary: AnalyticsSummary;
  readonly series: Readonly<Record<Metric, TimeSeries['data']>>;
}

export interface Notification {
  readonly id: string;
  readonly type: string;
  readonly message: string;
  readonly read: boolean;
  readonly created_at: string;
}

/** One page of a list endpoint and the cursor of the next (from the Link header). */
export interface Page<T> {
  readonly items: T[];
  readonly nextCursor?: string;
}
