import { Migration } from '@mikro-orm/migrations';
import type { MigrationEntry } from '@sts/db/service-orm';
import { processedEventsTableSql } from '@sts/db/processed-events';
import { outboxDeadLetterSql, outboxTableSql, outboxTraceContextSql } from '@sts/outbox/outbox';

export const IDENTITY_SCHEMA = 'identity';

class InitialIdentitySchema extends Migration {
  override up(): void {
    this.addSql(`
      create table identity.users (
        id uuid primary key,
        issuer text not null,
        subject text not null,
        email text not null,
        name text not null,
        created_at timestamptz not null,
        constraint users_issuer_subject_key unique (issuer, subject)
      );
      create index users_email_idx on identity.users (lower(email));

      create table identity.organizations (
        id uuid primary key,
        name text not null,
        domain text null,
        created_at timestamptz not null
      );

      create table identity.members (
        id uuid primary key,
        org_id uuid not null references identity.organizations (id) on delete cascade,
        user_id uuid not null references identity.users (id) on delete cascade,
        role text not null check (role in ('ORG_ADMIN', 'ANALYST', 'APP_USER')),
        dashboard_access boolean not null default true,
        joined_at timestamptz not null,
        constraint members_org_user_key unique (org_id, user_id)
      );
      create index members_org_joined_idx on identity.members (org_id, joined_at, id);
      create index members_user_idx on identity.members (user_id, joined_at desc);

      create table identity.invites (
        id uuid primary key,
        org_id uuid not null references identity.organizations (id) on delete cascade,
        email text not null,
        role text not null check (role in ('ORG_ADMIN', 'ANALYST', 'APP_USER')),
        status text not null check (status in ('pending', 'accepted', 'joined', 'expired')),
        token_hash char(64) not null,
        invited_by_member_id uuid null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        accepted_at timestamptz null,
        constraint invites_token_hash_key unique (token_hash)
      );
      -- At most one live invite per e-mail and organization.
      create unique index invites_one_pending_idx on identity.invites (org_id, email) where status = 'pending';
      create index invites_org_created_idx on identity.invites (org_id, created_at, id) where status = 'pending';
      create index invites_accepted_email_idx on identity.invites (email) where status = 'accepted';
    `);
    this.addSql(outboxTableSql(IDENTITY_SCHEMA));
    this.addSql(processedEventsTableSql(IDENTITY_SCHEMA));
  }
}

/** Invites per organization and UTC day, counted as they are created (revoking does not give them back). */
class InviteQuota extends Migration {
  override up(): void {
    this.addSql(`
      create table identity.invite_quota (
        org_id uuid not null references identity.organizations (id) on delete cascade,
        day date not null,
        count integer not null,
        primary key (org_id, day)
      );
    `);
  }
}

/** Parked outbox rows (the relay's dead-letter state). */
class OutboxDeadLetter extends Migration {
  override up(): void {
    this.addSql(outboxDeadLetterSql(IDENTITY_SCHEMA));
  }
}

/** The trace context an outbox row carries to the event it becomes (and the parked-rows index). */
class OutboxTraceContext extends Migration {
  override up(): void {
    this.addSql(outboxTraceContextSql(IDENTITY_SCHEMA));
  }
}

/**
 * E-mails to outsiders (invites and e-mailed enrollment codes), one row each, for the daily quota per
 * organization that both kinds share and the daily limit per recipient. The recipient is a SHA-256 of
 * the lower-cased address; rows of past days go with the organization's next e-mail. It replaced
 * `invite_quota`, which 0007 drops once no replica of the release before it counts there.
 */
class OutboundEmails extends Migration {
  override up(): void {
    this.addSql(`
      create table identity.outbound_emails (
        id uuid primary key,
        org_id uuid not null references identity.organizations (id) on delete cascade,
        day date not null,
        recipient_hash char(64) not null,
        kind text not null check (kind in ('invite', 'enrollment_code')),
        created_at timestamptz not null
      );
      create index outbound_emails_org_day_idx on identity.outbound_emails (org_id, day, recipient_hash);
    `);
  }
}

/**
 * The daily limit per recipient across all organizations counts `outbound_emails` of one day and recipient
 * hash, whichever organization sent them.
 */
class OutboundEmailsByRecipient extends Migration {
  override up(): void {
    this.addSql(
      `create index outbound_emails_day_recipient_idx on identity.outbound_emails (day, recipient_hash);`,
    );
  }
}

/** `invite_quota` has been neither written nor read since 0005 (outbound_emails counts invites). */
class DropInviteQuota extends Migration {
  override up(): void {
    this.addSql(`drop table if exists identity.invite_quota;`);
  }
}

/** Admins list accepted invites whose invitee has not joined yet, as they list pending ones. */
class AcceptedInvitesByOrganization extends Migration {
  override up(): void {
    this.addSql(
      `create index invites_org_accepted_created_idx on identity.invites (org_id, created_at, id) where status = 'accepted';`,
    );
  }
}

export const IDENTITY_MIGRATIONS: MigrationEntry[] = [
  { name: '0001_initial_identity_schema', class: InitialIdentitySchema },
  { name: '0002_outbox_dead_letter', class: OutboxDeadLetter },
  { name: '0003_invite_quota', class: InviteQuota },
  { name: '0004_outbox_trace_context', class: OutboxTraceContext },
  { name: '0005_outbound_emails', class: OutboundEmails },
  { name: '0006_outbound_emails_by_recipient', class: OutboundEmailsByRecipient },
  { name: '0007_drop_invite_quota', class: DropInviteQuota },
  { name: '0008_accepted_invites_by_organization', class: AcceptedInvitesByOrganization },
];
