import type { OrgAdmins } from '@sts/notification-domain/notification-ports';
import { MAX_PAGE_SIZE } from '@sts/pagination/keyset-cursor';
import type { IdentityServiceService } from '@sts/proto/gen/identity/v1/identity';
import { Role } from '@sts/proto/gen/identity/v1/identity';
import type { createPromiseClient } from '@sts/grpc/grpc-client';

type IdentityClient = Pick<
  ReturnType<typeof createPromiseClient<typeof IdentityServiceService>>,
  'listMembers'
>;

/**
 * The organization's admins, asked of identity (notification may call its ListMembers and nothing
 * else: start-identity-service.ts). Pages through all members: organizations have tens, not thousands.
 */
export class IdentityOrgAdmins implements OrgAdmins {
  constructor(private readonly identity: IdentityClient) {}

  async emailsOf(orgId: string): Promise<string[]> {
    const emails: string[] = [];
    let cursor = '';
    do {
      const page = await this.identity.listMembers({ orgId, limit: MAX_PAGE_SIZE, cursor });
      for (const member of page.members) if (member.role === Role.ROLE_ORG_ADMIN) emails.push(member.email);
      cursor = page.nextCursor;
    } while (cursor);
    return emails;
  }
}
