import { Metric, Window } from '@sts/proto/gen/analytics/v1/analytics';
import { BillingCycle, LicenseStatus, Plan } from '@sts/proto/gen/billing/v1/billing';
import { DeviceStatus } from '@sts/proto/gen/enrollment/v1/enrollment';
import { Role as ProtoRole } from '@sts/proto/gen/identity/v1/identity';
import { ROLES } from '@sts/vocabulary/roles';
import {
  BILLING_CYCLE_FROM_PROTO,
  BILLING_CYCLE_TO_PROTO,
  DEVICE_STATUS_FROM_PROTO,
  DEVICE_STATUS_TO_PROTO,
  LICENSE_STATUS_FROM_PROTO,
  LICENSE_STATUS_TO_PROTO,
  METRIC_FROM_PROTO,
  METRIC_TO_PROTO,
  PLAN_FROM_PROTO,
  PLAN_TO_PROTO,
  ROLE_FROM_PROTO,
  ROLE_TO_PROTO,
  WINDOW_FROM_PROTO,
  WINDOW_TO_PROTO,
  nameFromProto,
  namesOf,
  type ProtoEnumTable,
} from './proto-enums';

const TABLES: [string, Record<string, string>, ProtoEnumTable<string, string>, Record<string, string>][] = [
  ['Role', ProtoRole, ROLE_FROM_PROTO, ROLE_TO_PROTO],
  ['DeviceStatus', DeviceStatus, DEVICE_STATUS_FROM_PROTO, DEVICE_STATUS_TO_PROTO],
  ['Plan', Plan, PLAN_FROM_PROTO, PLAN_TO_PROTO],
  ['LicenseStatus', LicenseStatus, LICENSE_STATUS_FROM_PROTO, LICENSE_STATUS_TO_PROTO],
  ['BillingCycle', BillingCycle, BILLING_CYCLE_FROM_PROTO, BILLING_CYCLE_TO_PROTO],
  ['Window', Window, WINDOW_FROM_PROTO, WINDOW_TO_PROTO],
  ['Metric', Metric, METRIC_FROM_PROTO, METRIC_TO_PROTO],
];

const unset = (value: string) => value.endsWith('_UNSPECIFIED') || value === 'UNRECOGNIZED';

describe.each(TABLES)('the %s table', (_name, protoEnum, fromProto, toProto) => {
  it('maps exactly the defined values to a word, UNSPECIFIED and UNRECOGNIZED to null', () => {
    const values = Object.values(protoEnum);
    expect(Object.keys(fromProto).sort()).toEqual([...values].sort());
    for (const value of values) {
      expect(nameFromProto(fromProto, value) === null).toBe(unset(value));
    }
  });

  it('has an inverse that leads every word back to its value', () => {
    const names = namesOf(fromProto);
    expect(new Set(names).size).toBe(names.length);
    expect(Object.keys(toProto).sort()).toEqual([...names].sort());
    for (const name of names) expect(nameFromProto(fromProto, toProto[name] as string)).toBe(name);
  });
});

describe('nameFromProto', () => {
  it('finds nothing for values outside the table, inherited keys included', () => {
    for (const value of ['ROLE_ROOT', 'constructor', '__proto__', 'toString', '']) {
      expect(nameFromProto(ROLE_FROM_PROTO, value)).toBeNull();
    }
  });
});

describe('roles', () => {
  it('are the vocabulary’s roles, in its order', () => {
    expect(namesOf(ROLE_FROM_PROTO)).toEqual([...ROLES]);
  });
});
