import { EntitySchema } from '@mikro-orm/postgresql';
import type { Role } from '@sts/vocabulary/roles';

/** Row shapes of the identity schema, mapped by MikroORM. Domain objects are built from these. */
export interface UserRow {
  id: string;
  issuer: string;
  subject: string;
  email: string;
  name: string;
  createdAt: Date;
}

export interface OrganizationRow {
  id: string;
  name: string;
  domain: string | null;
  createdAt: Date;
}

export interface MemberRow {
  id: string;
  orgId: string;
  userId: string;
  role: Role;
  dashboardAccess: boolean;
  joinedAt: Date;
}

export interface InviteRow {
  id: string;
  orgId: string;
  email: string;
  role: Role;
  status: 'pending' | 'accepted' | 'joined' | 'expired';
  tokenHash: string;
  invitedByMemberId: string | null;
  createdAt: Date;
  expiresAt: Date;
  acceptedAt: Date | null;
}

export const UserEntity = new EntitySchema<UserRow>({
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
});

export const OrganizationEntity = new EntitySchema<OrganizationRow>({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'text' },
    domain: { type: 'text', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
});

export const MemberEntity = new EntitySchema<MemberRow>({
  name: 'Member',
  tableName: 'members',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'uuid', fieldName: 'org_id' },
    userId: { type: 'uuid', fieldName: 'user_id' },
    role: { type: 'text' },
    dashboardAccess: { type: 'boolean', fieldName: 'dashboard_access' },
    joinedAt: { type: 'datetime', fieldName: 'joined_at' },
  },
});

export const InviteEntity = new EntitySchema<InviteRow>({
  name: 'Invite',
  tableName: 'invites',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'uuid', fieldName: 'org_id' },
    email: { type: 'text' },
    role: { type: 'text' },
    status: { type: 'text' },
    tokenHash: { type: 'text', fieldName: 'token_hash' },
    invitedByMemberId: { type: 'uuid', fieldName: 'invited_by_member_id', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    expiresAt: { type: 'datetime', fieldName: 'expires_at' },
    acceptedAt: { type: 'datetime', fieldName: 'accepted_at', nullable: true },
  },
});

export const IDENTITY_ENTITIES = [UserEntity, OrganizationEntity, MemberEntity, InviteEntity];
