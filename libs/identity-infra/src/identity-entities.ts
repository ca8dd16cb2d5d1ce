import { EntitySchema } from '@mikro-orm/postgresql';
import { ProcessedEventEntity } from '@sts/db/processed-events';
import type {
  Invite,
  Member,
  Organization,
  OutboundEmail,
  OutboundEmailKind,
  User,
} from '@sts/identity-domain/identity-model';
import type { InviteStatus } from '@sts/identity-domain/identity-model';
import { OutboxEntity } from '@sts/outbox/outbox';
import { ROLES } from '@sts/vocabulary/roles';

/**
 * The tables of the `identity` schema, as its migrations (identity-migrations.ts) leave them: the one
 * description the store queries by, checked against the migrated schema by identity-entities.int-spec.ts.
 * An `enum` property is a text column with PostgreSQL's `<table>_<column>_check` constraint listing the
 * values; a reference to another table is a many-to-one property mapped to the referenced key (`mapToPk`),
 * so rows carry ids, as the domain does. Indexes with an `expression` (partial, on an expression, ordered)
 * are written as PostgreSQL prints them (`pg_get_indexdef`), which the check compares.
 */

const INVITE_STATUSES: InviteStatus[] = ['pending', 'accepted', 'joined', 'expired'];
const OUTBOUND_EMAIL_KINDS: OutboundEmailKind[] = ['invite', 'enrollment_code'];

/**
 * `<fieldName> … references <entity's table> (id) on delete cascade` of `table`, as a property holding the
 * referenced id; the constraint has PostgreSQL's default name.
 */
const cascadingReference = (table: string, fieldName: string, entity: string) =>
  ({
    kind: 'm:1',
    entity,
    mapToPk: true,
    fieldName,
    foreignKeyName: `${table}_${fieldName}_fkey`,
    deleteRule: 'cascade',
    updateRule: 'no action',
  }) as const;

export const UserEntity = new EntitySchema<User>({
  name: 'User',
  tableName: 'users',
  properties: {
    id: { type: 'uuid', primary: true },
    issuer: { type: 'text' },
    subject: { type: 'text' },
    email: { type: 'text' },
    name: { type: 'text' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
  uniques: [{ name: 'users_issuer_subject_key', properties: ['issuer', 'subject'] }],
  indexes: [
    {
      name: 'users_email_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (lower(email))`,
    },
  ],
});

export const OrganizationEntity = new EntitySchema<Organization>({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'text' },
    domain: { type: 'text', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
});

/** A membership; the member's e-mail and name are its user's. */
export type MemberRow = Omit<Member, 'email' | 'name'>;

export const MemberEntity = new EntitySchema<MemberRow>({
  name: 'Member',
  tableName: 'members',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: cascadingReference('members', 'org_id', 'Organization'),
    userId: cascadingReference('members', 'user_id', 'User'),
    role: { enum: true, items: [...ROLES], columnType: 'text' },
    dashboardAccess: { type: 'boolean', fieldName: 'dashboard_access', default: true },
    joinedAt: { type: 'datetime', fieldName: 'joined_at' },
  },
  uniques: [{ name: 'members_org_user_key', properties: ['orgId', 'userId'] }],
  indexes: [
    { name: 'members_org_joined_idx', properties: ['orgId', 'joinedAt', 'id'] },
    {
      name: 'members_user_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (user_id, joined_at DESC)`,
    },
  ],
});

export const InviteEntity = new EntitySchema<Invite>({
  name: 'Invite',
  tableName: 'invites',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: cascadingReference('invites', 'org_id', 'Organization'),
    email: { type: 'text' },
    role: { enum: true, items: [...ROLES], columnType: 'text' },
    status: { enum: true, items: INVITE_STATUSES, columnType: 'text' },
    tokenHash: { type: 'character', length: 64, fieldName: 'token_hash', unique: 'invites_token_hash_key' },
    invitedByMemberId: { type: 'uuid', fieldName: 'invited_by_member_id', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    expiresAt: { type: 'datetime', fieldName: 'expires_at' },
    acceptedAt: { type: 'datetime', fieldName: 'accepted_at', nullable: true },
  },
  uniques: [
    {
      // At most one live invite per e-mail and organization.
      name: 'invites_one_pending_idx',
      expression: (table, _columns, name) =>
        `CREATE UNIQUE INDEX ${name} ON ${String(table)} USING btree (org_id, email) WHERE (status = 'pending'::text)`,
    },
  ],
  indexes: [
    {
      name: 'invites_org_created_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (org_id, created_at, id) WHERE (status = 'pending'::text)`,
    },
    {
      // Accepted invites not joined yet, listed for their admins (GET /api/invites?status=accepted).
      name: 'invites_org_accepted_created_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (org_id, created_at, id) WHERE (status = 'accepted'::text)`,
    },
    {
      name: 'invites_accepted_email_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (email) WHERE (status = 'accepted'::text)`,
    },
  ],
});

export const OutboundEmailEntity = new EntitySchema<OutboundEmail>({
  name: 'OutboundEmail',
  tableName: 'outbound_emails',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: cascadingReference('outbound_emails', 'org_id', 'Organization'),
    day: { type: 'date' },
    recipientHash: { type: 'character', length: 64, fieldName: 'recipient_hash' },
    kind: { enum: true, items: OUTBOUND_EMAIL_KINDS, columnType: 'text' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
  indexes: [
    { name: 'outbound_emails_org_day_idx', properties: ['orgId', 'day', 'recipientHash'] },
    { name: 'outbound_emails_day_recipient_idx', properties: ['day', 'recipientHash'] },
  ],
});

export const IDENTITY_ENTITIES = [
  UserEntity,
  OrganizationEntity,
  MemberEntity,
  InviteEntity,
  OutboundEmailEntity,
  OutboxEntity,
  ProcessedEventEntity,
];
