import { Role, type ListMembersRequest, type Member } from '@sts/proto/gen/identity/v1/identity';
import { IdentityOrgAdmins } from './identity-org-admins';

const member = (email: string, role: Role): Member => ({
  id: email,
  userId: email,
  email,
  name: email,
  role,
  dashboardAccess: true,
  joinedAt: new Date(0),
});

describe('IdentityOrgAdmins', () => {
  it("pages through the organization's members and keeps the ORG_ADMINs", async () => {
    const pages: Record<string, { members: Member[]; nextCursor: string }> = {
      '': {
        members: [member('a@x.test', Role.ROLE_ORG_ADMIN), member('b@x.test', Role.ROLE_ANALYST)],
        nextCursor: 'c2',
      },
      c2: {
        members: [member('c@x.test', Role.ROLE_APP_USER), member('d@x.test', Role.ROLE_ORG_ADMIN)],
        nextCursor: '',
      },
    };
    const asked: ListMembersRequest[] = [];
    const admins = new IdentityOrgAdmins({
      listMembers: async (request: ListMembersRequest) => {
        asked.push(request);
        return pages[request.cursor]!;
      },
    });
    expect(await admins.emailsOf('org-1')).toEqual(['a@x.test', 'd@x.test']);
    expect(asked.map((request) => [request.orgId, request.cursor])).toEqual([
      ['org-1', ''],
      ['org-1', 'c2'],
    ]);
  });
});
