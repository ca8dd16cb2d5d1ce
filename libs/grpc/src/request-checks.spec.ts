import { randomUUID } from 'node:crypto';
import { AppError } from '@sts/errors/app-error';
import { GrpcStatus } from '@sts/errors/grpc-status';
import { BillingCycle, Plan } from '@sts/proto/gen/billing/v1/billing';
import { Role as ProtoRole } from '@sts/proto/gen/identity/v1/identity';
import { BILLING_CYCLE_FROM_PROTO, PLAN_FROM_PROTO, ROLE_FROM_PROTO } from './proto-enums';
import {
  enumFrom,
  optionalUuidField,
  requireEmail,
  requirePresent,
  requireText,
  requireUuid,
  requireUuidField,
} from './request-checks';

const ID = randomUUID();

function failureOf(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error('expected the check to fail');
}

/** The answer a client gets: code, gRPC and HTTP status, detail and the bad field. */
function answerOf(run: () => unknown) {
  const error = failureOf(run);
  return {
    code: error.code,
    grpcStatus: error.grpcStatus,
    httpStatus: error.httpStatus,
    detail: error.detail,
    fields: error.fields,
  };
}

const invalid = (path: string, message: string) => ({
  code: 'VALIDATION_FAILED',
  grpcStatus: GrpcStatus.INVALID_ARGUMENT,
  httpStatus: 400,
  detail: `${path} ${message}`,
  fields: [{ path, message }],
});

const NOT_UUIDS = ['', ' ', 'not-a-uuid', "1' OR '1'='1", `${ID}0`, ` ${ID}`, ID.replaceAll('-', '')];

describe('requireUuid: an id the client names', () => {
  it('returns a UUID as sent, in either case', () => {
    expect(requireUuid(ID, 'DEVICE_NOT_FOUND')).toBe(ID);
    expect(requireUuid(ID.toUpperCase(), 'DEVICE_NOT_FOUND')).toBe(ID.toUpperCase());
  });

  it.each(NOT_UUIDS)('answers anything else (%j) with the resource’s not-found code', (value) => {
    expect(answerOf(() => requireUuid(value, 'NOTIFICATION_NOT_FOUND'))).toEqual({
      code: 'NOTIFICATION_NOT_FOUND',
      grpcStatus: GrpcStatus.NOT_FOUND,
      httpStatus: 404,
      detail: 'Notification not found',
      fields: [],
    });
  });
});

describe('requireUuidField: an id the request must carry well-formed', () => {
  it('returns a UUID as sent', () => {
    expect(requireUuidField(ID, 'org_id')).toBe(ID);
  });

  it('refuses a missing or blank one as required, a malformed one as not a UUID', () => {
    expect(answerOf(() => requireUuidField('', 'org_id'))).toEqual(invalid('org_id', 'is required'));
    expect(answerOf(() => requireUuidField('  ', 'org_id'))).toEqual(invalid('org_id', 'is required'));
    expect(answerOf(() => requireUuidField('org-1', 'org_id'))).toEqual(invalid('org_id', 'must be a UUID'));
  });
});

describe('optionalUuidField', () => {
  it('reads empty as absent and returns a UUID as sent', () => {
    expect(optionalUuidField('', 'device_id')).toBeNull();
    expect(optionalUuidField(ID, 'device_id')).toBe(ID);
  });

  it.each(NOT_UUIDS.filter((value) => value !== ''))('refuses %j', (value) => {
    expect(answerOf(() => optionalUuidField(value, 'device_id'))).toEqual(
      invalid('device_id', 'must be a UUID'),
    );
  });
});

describe('requireText', () => {
  it('returns the text as sent, untrimmed', () => {
    expect(requireText(' user-ada ', 'user_id')).toBe(' user-ada ');
  });

  it.each(['', ' ', '\t\n'])('refuses %j as required', (value) => {
    expect(answerOf(() => requireText(value, 'user_id'))).toEqual(invalid('user_id', 'is required'));
  });
});

describe('requirePresent', () => {
  it('returns a set field, falsy values included', () => {
    const principal = { $case: 'user' };
    expect(requirePresent(principal, 'principal')).toBe(principal);
    expect(requirePresent(false, 'flag')).toBe(false);
    expect(requirePresent(0, 'count')).toBe(0);
  });

  it('refuses an unset one as required', () => {
    expect(answerOf(() => requirePresent(undefined, 'principal'))).toEqual(
      invalid('principal', 'is required'),
    );
  });
});

describe('requireEmail', () => {
  it('returns the address trimmed', () => {
    expect(requireEmail('  Ada@Example.com\n', 'email')).toBe('Ada@Example.com');
  });

  it.each(['', 'not an address', 'ada@', `${'a'.repeat(250)}@x.io`])('refuses %j', (value) => {
    expect(answerOf(() => requireEmail(value, 'email'))).toEqual(
      invalid('email', 'must be an e-mail address'),
    );
  });
});

describe('enumFrom', () => {
  it('maps every defined value through the table', () => {
    expect(enumFrom(ROLE_FROM_PROTO, ProtoRole.ROLE_ORG_ADMIN, 'role')).toBe('ORG_ADMIN');
    expect(enumFrom(ROLE_FROM_PROTO, ProtoRole.ROLE_ANALYST, 'role')).toBe('ANALYST');
    expect(enumFrom(ROLE_FROM_PROTO, ProtoRole.ROLE_APP_USER, 'role')).toBe('APP_USER');
  });

  it('refuses UNSPECIFIED, UNRECOGNIZED and values the table does not hold, naming the accepted words', () => {
    const refusal = invalid('client.role', 'must be ORG_ADMIN, ANALYST or APP_USER');
    for (const value of [ProtoRole.ROLE_UNSPECIFIED, ProtoRole.UNRECOGNIZED, 'ROLE_ROOT', 'constructor']) {
      expect(answerOf(() => enumFrom(ROLE_FROM_PROTO, value as ProtoRole, 'client.role'))).toEqual(refusal);
    }
    expect(
      answerOf(() => enumFrom(BILLING_CYCLE_FROM_PROTO, BillingCycle.BILLING_CYCLE_UNSPECIFIED, 'cycle')),
    ).toEqual(invalid('cycle', 'must be monthly or annual'));
  });

  it('accepts only the allowed words when given, and names only those', () => {
    const purchasable = ['basic', 'pro', 'enterprise'] as const;
    expect(enumFrom(PLAN_FROM_PROTO, Plan.PLAN_PRO, 'plan', purchasable)).toBe('pro');
    expect(answerOf(() => enumFrom(PLAN_FROM_PROTO, Plan.PLAN_NONE, 'plan', purchasable))).toEqual(
      invalid('plan', 'must be basic, pro or enterprise'),
    );
  });
});
