import { Metric, Window } from '@sts/proto/gen/analytics/v1/analytics';
import { BillingCycle, LicenseStatus, Plan } from '@sts/proto/gen/billing/v1/billing';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { InviteState, Role as ProtoRole } from '@sts/proto/gen/identity/v1/identity';
import type { Role } from '@sts/vocabulary/roles';

/**
 * The one table per proto enum: each wire value and the word the services and the public contract
 * use for it. Each table is a `Record` over the whole enum, so a value added to a .proto does not
 * compile until it is mapped here. UNSPECIFIED and UNRECOGNIZED map to null: whoever reads the value
 * decides whose fault that is (a bad request: `enumFrom` in request-checks; our bug: the gateway's
 * `fromUpstreamEnum`). The other direction (`*_TO_PROTO`) is derived, so the two cannot disagree.
 */
export type ProtoEnumTable<Proto extends string, Name extends string> = Readonly<Record<Proto, Name | null>>;

/** The word for `value`; null for UNSPECIFIED, UNRECOGNIZED and anything the table does not hold. */
export function nameFromProto<Proto extends string, Name extends string>(
  table: ProtoEnumTable<Proto, Name>,
  value: string,
): Name | null {
  // Own keys only: a value such as `constructor` must not find something on Object.prototype.
  return Object.hasOwn(table, value) ? table[value as Proto] : null;
}

/** Every word of the table, in the order of the proto enum. */
export function namesOf<Proto extends string, Name extends string>(
  table: ProtoEnumTable<Proto, Name>,
): Name[] {
  return Object.values<Name | null>(table).filter((name): name is Name => name !== null);
}

/**
 * A table over every value of `protoEnum` (the generated enum object fixes the key type; the words
 * keep their literal types).
 */
function protoEnumTable<Proto extends string, const Name extends string>(
  _protoEnum: Record<string, Proto>,
  table: Record<Proto, Name | null>,
): ProtoEnumTable<Proto, Name> {
  return table;
}

/** word → proto value. Refuses, when the module loads, a table that gives two values one word. */
function inverseOf<Proto extends string, Name extends string>(
  table: ProtoEnumTable<Proto, Name>,
): Readonly<Record<Name, Proto>> {
  const inverse: Partial<Record<Name, Proto>> = {};
  for (const [proto, name] of Object.entries<Name | null>(table)) {
    if (name === null) continue;
    if (inverse[name] !== undefined) throw new Error(`proto enum table maps two values to ${name}`);
    inverse[name] = proto as Proto;
  }
  return inverse as Record<Name, Proto>;
}

export const ROLE_FROM_PROTO = protoEnumTable<ProtoRole, Role>(ProtoRole, {
  [ProtoRole.ROLE_UNSPECIFIED]: null,
  [ProtoRole.ROLE_ORG_ADMIN]: 'ORG_ADMIN',
  [ProtoRole.ROLE_ANALYST]: 'ANALYST',
  [ProtoRole.ROLE_APP_USER]: 'APP_USER',
  [ProtoRole.UNRECOGNIZED]: null,
});
export const ROLE_TO_PROTO = inverseOf(ROLE_FROM_PROTO);

/** The invites an admin lists and revokes, by where they stand (joined and superseded ones never are). */
export const INVITE_STATE_FROM_PROTO = protoEnumTable(InviteState, {
  [InviteState.INVITE_STATE_UNSPECIFIED]: null,
  [InviteState.INVITE_STATE_PENDING]: 'pending',
  [InviteState.INVITE_STATE_ACCEPTED]: 'accepted',
  [InviteState.UNRECOGNIZED]: null,
});
export const INVITE_STATE_TO_PROTO = inverseOf(INVITE_STATE_FROM_PROTO);

export const DEVICE_STATUS_FROM_PROTO = protoEnumTable(DeviceStatus, {
  [DeviceStatus.DEVICE_STATUS_UNSPECIFIED]: null,
  [DeviceStatus.DEVICE_STATUS_ACTIVE]: 'active',
  [DeviceStatus.DEVICE_STATUS_DISABLED]: 'disabled',
  [DeviceStatus.UNRECOGNIZED]: null,
});
export const DEVICE_STATUS_TO_PROTO = inverseOf(DEVICE_STATUS_FROM_PROTO);

export const PLAN_FROM_PROTO = protoEnumTable(Plan, {
  [Plan.PLAN_UNSPECIFIED]: null,
  [Plan.PLAN_NONE]: 'none',
  [Plan.PLAN_BASIC]: 'basic',
  [Plan.PLAN_PRO]: 'pro',
  [Plan.PLAN_ENTERPRISE]: 'enterprise',
  [Plan.UNRECOGNIZED]: null,
});
export const PLAN_TO_PROTO = inverseOf(PLAN_FROM_PROTO);

export const LICENSE_STATUS_FROM_PROTO = protoEnumTable(LicenseStatus, {
  [LicenseStatus.LICENSE_STATUS_UNSPECIFIED]: null,
  [LicenseStatus.LICENSE_STATUS_PENDING]: 'pending',
  [LicenseStatus.LICENSE_STATUS_ONBOARDING]: 'onboarding',
  [LicenseStatus.LICENSE_STATUS_ACTIVE]: 'active',
  [LicenseStatus.LICENSE_STATUS_CANCELED]: 'canceled',
  [LicenseStatus.UNRECOGNIZED]: null,
});
export const LICENSE_STATUS_TO_PROTO = inverseOf(LICENSE_STATUS_FROM_PROTO);

export const BILLING_CYCLE_FROM_PROTO = protoEnumTable(BillingCycle, {
  [BillingCycle.BILLING_CYCLE_UNSPECIFIED]: null,
  [BillingCycle.BILLING_CYCLE_MONTHLY]: 'monthly',
  [BillingCycle.BILLING_CYCLE_ANNUAL]: 'annual',
  [BillingCycle.UNRECOGNIZED]: null,
});
export const BILLING_CYCLE_TO_PROTO = inverseOf(BILLING_CYCLE_FROM_PROTO);

export const WINDOW_FROM_PROTO = protoEnumTable(Window, {
  [Window.WINDOW_UNSPECIFIED]: null,
  [Window.WINDOW_24H]: '24h',
  [Window.WINDOW_30D]: '30d',
  [Window.UNRECOGNIZED]: null,
});
export const WINDOW_TO_PROTO = inverseOf(WINDOW_FROM_PROTO);

export const METRIC_FROM_PROTO = protoEnumTable(Metric, {
  [Metric.METRIC_UNSPECIFIED]: null,
  [Metric.METRIC_TOTAL_ANALYZED]: 'total_analyzed',
  [Metric.METRIC_DANGEROUS_BLOCKS]: 'dangerous_blocks',
  [Metric.METRIC_RISKY_WARNINGS]: 'risky_warnings',
  [Metric.METRIC_AVG_CLASSIFICATION_MS]: 'avg_classification_ms',
  [Metric.UNRECOGNIZED]: null,
});
export const METRIC_TO_PROTO = inverseOf(METRIC_FROM_PROTO);
