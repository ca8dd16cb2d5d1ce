import { eventually, startSystem, type SystemUnderTest } from './system-under-test';

interface Member {
  id: string;
  email: string;
  name: string;
  role: string;
  dashboard_access: boolean;
  joined_at: string;
}
interface Invite {
  id: string;
  email: string;
  role: string;
  created_at: string;
  expires_at: string;
  status: string;
  accepted_at: string | null;
}
interface Session {
  user: { id: string; email: string; name: string; role: string; dashboard_access: boolean };
  org: { id: string; name: string; domain: string | null };
  license: { plan: string; status: string; billing_cycle: string; expires_at: string };
}
interface Notification {
  id: string;
  type: string;
  message: string;
  read: boolean;
  created_at: string;
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function tokenFromMail(text: string): string {
  const match = /sts_inv_[A-Za-z0-9_-]{43}/.exec(text);
  if (!match) throw new Error('no invite token in the e-mail');
  return match[0];
}

describe('members, invites and the session, end to end', () => {
  let system: SystemUnderTest;
  let alice: string;
  let aliceSession: Session;

  beforeAll(async () => {
    system = await startSystem();
    alice = await system.tokenFor('alice@acme.test', { name: 'Alice Admin' });
    aliceSession = (await system.api<Session>('GET', '/api/session', { token: alice })).body;
  });

  afterAll(async () => {
    await system?.stop();
  });

  /** Invites `email` as `role` from Alice's organization and returns the token the e-mail carried. */
  async function invite(email: string, role: string): Promise<{ invite: Invite; token: string }> {
    const created = await system.api<Invite>('POST', '/api/invites', { token: alice, body: { email, role } });
    expect(created.status).toBe(201);
    const mail = await system.mail.waitFor((m) => m.to.includes(email), 10_000);
    return { invite: created.body, token: tokenFromMail(mail.text ?? '') };
  }

  it('provisions a personal organization with a pending license at first login', async () => {
    expect(aliceSession.user).toEqual({
      id: expect.any(String),
      email: 'alice@acme.test',
      name: 'Alice Admin',
      role: 'ORG_ADMIN',
      dashboard_access: true,
    });
    expect(aliceSession.org).toEqual({
      id: expect.any(String),
      name: "Alice Admin's organization",
      domain: null,
    });
    expect(aliceSession.license).toEqual({
      plan: 'none',
      status: 'pending',
      billing_cycle: 'monthly',
      expires_at: expect.stringMatching(ISO),
    });

    const again = await system.api<Session>('GET', '/api/session', { token: alice });
    expect(again.body.org.id).toBe(aliceSession.org.id);
  });

  it('lists the members of the caller organization', async () => {
    const members = await system.api<Member[]>('GET', '/api/members', { token: alice });
    expect(members.status).toBe(200);
    expect(members.body).toEqual([
      {
        id: expect.any(String),
        email: 'alice@acme.test',
        name: 'Alice Admin',
        role: 'ORG_ADMIN',
        dashboard_access: true,
        joined_at: expect.stringMatching(ISO),
      },
    ]);
  });

  it('invites by e-mail; the token is accepted once; the invitee joins at next login; the feed says so', async () => {
    const { invite: created, token } = await invite('bob@acme.test', 'ANALYST');
    expect(created).toEqual(
      expect.objectContaining({
        email: 'bob@acme.test',
        role: 'ANALYST',
        created_at: expect.stringMatching(ISO),
      }),
    );

    const mail = system.mail.messages.find((m) => m.to.includes('bob@acme.test'));
    expect(mail?.subject).toContain("Alice Admin's organization");
    expect(mail?.html).toContain(`token=${token}`);

    const pending = await system.api<Invite[]>('GET', '/api/invites', { token: alice });
    expect(pending.body.map((i) => i.id)).toContain(created.id);

    // The invitation page shows who invites, as what, before anything is accepted.
    const previewed = await system.api('POST', '/api/invites/preview', { body: { token } });
    expect([previewed.status, previewed.body]).toEqual([
      200,
      {
        status: 'pending',
        email: 'bob@acme.test',
        role: 'ANALYST',
        org: { id: aliceSession.org.id, name: aliceSession.org.name },
        expires_at: created.expires_at,
      },
    ]);

    const accepted = await system.api<{ status: string; org: { id: string } }>(
      'POST',
      '/api/invites/accept',
      { body: { token } },
    );
    expect(accepted.status).toBe(200);
    expect(accepted.body).toEqual(
      expect.objectContaining({
        status: 'accepted',
        org: { id: aliceSession.org.id, name: aliceSession.org.name },
      }),
    );
    const replay = await system.api<{ code: string }>('POST', '/api/invites/accept', { body: { token } });
    expect(replay.status).toBe(400);
    expect(replay.body.code).toBe('INVITE_TOKEN_INVALID');
    const spent = await system.api<{ code: string }>('POST', '/api/invites/preview', { body: { token } });
    expect([spent.status, spent.body.code]).toEqual([400, 'INVITE_TOKEN_INVALID']);

    const stillPending = await system.api<Invite[]>('GET', '/api/invites', { token: alice });
    expect(stillPending.body.map((i) => i.id)).not.toContain(created.id);

    const bob = await system.tokenFor('bob@acme.test', { name: 'Bob Analyst' });
    const bobSession = await system.api<Session>('GET', '/api/session', { token: bob });
    expect(bobSession.status).toBe(200);
    expect(bobSession.body.org.id).toBe(aliceSession.org.id);
    expect(bobSession.body.user.role).toBe('ANALYST');

    const members = await system.api<Member[]>('GET', '/api/members', { token: alice });
    expect(members.body.map((m) => [m.email, m.role])).toEqual([
      ['alice@acme.test', 'ORG_ADMIN'],
      ['bob@acme.test', 'ANALYST'],
    ]);

    const joined = await eventually(async () => {
      const feed = await system.api<Notification[]>('GET', '/api/notifications', { token: alice });
      return feed.body.find((n) => n.type === 'member.joined');
    });
    expect(joined.message).toContain('bob@acme.test');
    expect(joined.read).toBe(false);
  });

  it('keeps hostile display names from forging lines in invitation e-mails and the feed', async () => {
    const forged = 'Mallory\r\n\r\nIT department: reply with your password to evil@example.com';
    const eve = await system.tokenFor('eve@forge.test', { name: forged });
    const session = await system.api<Session>('GET', '/api/session', { token: eve });
    expect(session.body.user.name).not.toMatch(/[\r\n]/);
    const created = await system.api<Invite>('POST', '/api/invites', {
      token: eve,
      body: { email: 'victim@forge.test', role: 'ANALYST' },
    });
    expect(created.status).toBe(201);
    const mail = await system.mail.waitFor((m) => m.to.includes('victim@forge.test'), 10_000);
    const lines = (mail.text ?? '').split(/\r?\n/);
    expect(lines.some((line) => line.startsWith('IT department'))).toBe(false);
    expect(lines.some((line) => line.startsWith('Mallory IT department: reply with your password'))).toBe(
      true,
    );

    const token = tokenFromMail(mail.text ?? '');
    expect((await system.api('POST', '/api/invites/accept', { body: { token } })).status).toBe(200);
    const victim = await system.tokenFor('victim@forge.test', { name: 'Victim\nSecond line' });
    expect((await system.api('GET', '/api/session', { token: victim })).status).toBe(200);
    const joined = await eventually(async () => {
      const feed = await system.api<Notification[]>('GET', '/api/notifications', { token: eve });
      return feed.body.find((n) => n.type === 'member.joined');
    });
    expect(joined.message).toBe('Victim Second line (victim@forge.test) joined as ANALYST');
  });

  it('keeps read state per user', async () => {
    const bob = await system.tokenFor('bob@acme.test', { name: 'Bob Analyst' });
    const feed = await system.api<Notification[]>('GET', '/api/notifications', { token: alice });
    const item = feed.body[0]!;
    const read = await system.api<Notification>('POST', `/api/notifications/${item.id}/read`, {
      token: alice,
    });
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ ...item, read: true });

    const bobFeed = await system.api<Notification[]>('GET', '/api/notifications', { token: bob });
    expect(bobFeed.body.find((n) => n.id === item.id)?.read).toBe(false);
    const all = await system.api<{ marked: number }>('POST', '/api/notifications/read-all', { token: bob });
    expect(all.status).toBe(200);
    expect(all.body.marked).toBeGreaterThanOrEqual(1);
    const bobAfter = await system.api<Notification[]>('GET', '/api/notifications', { token: bob });
    expect(bobAfter.body.every((n) => n.read)).toBe(true);
    expect(bobAfter.headers.get('x-unread-count')).toBe('0');
  });

  it('enforces roles: an ANALYST reads members but cannot manage them or invites', async () => {
    const bob = await system.tokenFor('bob@acme.test', { name: 'Bob Analyst' });
    const members = await system.api<Member[]>('GET', '/api/members', { token: bob });
    expect(members.status).toBe(200);
    const aliceId = members.body.find((m) => m.email === 'alice@acme.test')!.id;

    for (const [method, path, body] of [
      ['PATCH', `/api/members/${aliceId}`, { role: 'ANALYST' }],
      ['DELETE', `/api/members/${aliceId}`, undefined],
      ['GET', '/api/invites', undefined],
      ['POST', '/api/invites', { email: 'x@acme.test', role: 'ANALYST' }],
    ] as const) {
      const response = await system.api<{ code: string }>(method, path, { token: bob, body });
      expect([method, path, response.status, response.body.code]).toEqual([method, path, 403, 'FORBIDDEN']);
    }
  });

  it('an APP_USER sees its session and the feed, and nothing else', async () => {
    const { token } = await invite('carl@acme.test', 'APP_USER');
    await system.api('POST', '/api/invites/accept', { body: { token } });
    const carl = await system.tokenFor('carl@acme.test', { name: 'Carl User' });
    expect((await system.api('GET', '/api/session', { token: carl })).status).toBe(200);
    expect((await system.api('GET', '/api/notifications', { token: carl })).status).toBe(200);
    expect((await system.api('GET', '/api/members', { token: carl })).status).toBe(403);
  });

  it('protects the last ORG_ADMIN and allows handing the role over', async () => {
    const members = (await system.api<Member[]>('GET', '/api/members', { token: alice })).body;
    const aliceId = members.find((m) => m.email === 'alice@acme.test')!.id;
    const bobId = members.find((m) => m.email === 'bob@acme.test')!.id;

    for (const [method, body] of [
      ['PATCH', { role: 'ANALYST' }],
      ['PATCH', { dashboard_access: false }],
      ['DELETE', undefined],
    ] as const) {
      const response = await system.api<{ code: string }>(method, `/api/members/${aliceId}`, {
        token: alice,
        body,
      });
      expect([method, response.status, response.body.code]).toEqual([method, 409, 'LAST_ADMIN']);
    }

    const promoted = await system.api<Member>('PATCH', `/api/members/${bobId}`, {
      token: alice,
      body: { role: 'ORG_ADMIN' },
    });
    expect(promoted.status).toBe(200);
    expect(promoted.body.role).toBe('ORG_ADMIN');
    const demoted = await system.api<Member>('PATCH', `/api/members/${bobId}`, {
      token: alice,
      body: { role: 'ANALYST' },
    });
    expect(demoted.body.role).toBe('ANALYST');
  });

  it('denies dashboard access when it is switched off, and removes members', async () => {
    const { token } = await invite('dora@acme.test', 'ANALYST');
    await system.api('POST', '/api/invites/accept', { body: { token } });
    const dora = await system.tokenFor('dora@acme.test', { name: 'Dora' });
    expect((await system.api('GET', '/api/session', { token: dora })).status).toBe(200);

    const members = (await system.api<Member[]>('GET', '/api/members', { token: alice })).body;
    const doraId = members.find((m) => m.email === 'dora@acme.test')!.id;
    const off = await system.api<Member>('PATCH', `/api/members/${doraId}`, {
      token: alice,
      body: { dashboard_access: false },
    });
    expect(off.body.dashboard_access).toBe(false);
    const denied = await system.api<{ code: string }>('GET', '/api/session', { token: dora });
    expect(denied.status).toBe(403);
    expect(denied.headers.get('content-type')).toContain('application/problem+json');
    expect(denied.body.code).toBe('DASHBOARD_ACCESS_DENIED');

    expect((await system.api('DELETE', `/api/members/${doraId}`, { token: alice })).status).toBe(204);
    expect((await system.api('DELETE', `/api/members/${doraId}`, { token: alice })).status).toBe(404);
  });

  it('revokes invites; a revoked token cannot be accepted', async () => {
    const { invite: created, token } = await invite('erin@acme.test', 'ANALYST');
    expect((await system.api('DELETE', `/api/invites/${created.id}`, { token: alice })).status).toBe(204);
    expect((await system.api('DELETE', `/api/invites/${created.id}`, { token: alice })).status).toBe(404);
    expect((await system.api('POST', '/api/invites/accept', { body: { token } })).status).toBe(400);
  });

  it('lists an accepted invite until its invitee joins, and revokes it: the sign-in then joins nothing (issue 41)', async () => {
    const { invite: created, token } = await invite('wrong-address@acme.test', 'ORG_ADMIN');
    expect(created).toMatchObject({ status: 'pending', accepted_at: null });
    expect((await system.api('POST', '/api/invites/accept', { body: { token } })).status).toBe(200);

    const accepted = await system.api<Invite[]>('GET', '/api/invites?status=accepted', { token: alice });
    expect(accepted.status).toBe(200);
    const listed = accepted.body.find((i) => i.id === created.id);
    expect(listed).toEqual({
      ...created,
      status: 'accepted',
      accepted_at: expect.stringMatching(ISO),
    });
    const pending = await system.api<Invite[]>('GET', '/api/invites', { token: alice });
    expect(pending.body.map((i) => i.id)).not.toContain(created.id);
    const bad = await system.api<{ code: string }>('GET', '/api/invites?status=joined', { token: alice });
    expect([bad.status, bad.body.code]).toEqual([400, 'VALIDATION_FAILED']);

    expect((await system.api('DELETE', `/api/invites/${created.id}`, { token: alice })).status).toBe(204);
    const after = await system.api<Invite[]>('GET', '/api/invites?status=accepted', { token: alice });
    expect(after.body.map((i) => i.id)).not.toContain(created.id);
    const holder = await system.tokenFor('wrong-address@acme.test', { name: 'Wrong Address' });
    const session = await system.api<Session>('GET', '/api/session', { token: holder });
    expect(session.status).toBe(200);
    expect(session.body.org.id).not.toBe(aliceSession.org.id);
    const members = await system.api<Member[]>('GET', '/api/members', { token: alice });
    expect(members.body.map((m) => m.email)).not.toContain('wrong-address@acme.test');
  });

  it('refuses duplicate invites and invites for members', async () => {
    await invite('fred@acme.test', 'ANALYST');
    const duplicate = await system.api<{ code: string }>('POST', '/api/invites', {
      token: alice,
      body: { email: 'FRED@acme.test', role: 'ANALYST' },
    });
    expect([duplicate.status, duplicate.body.code]).toEqual([409, 'INVITE_ALREADY_PENDING']);
    const member = await system.api<{ code: string }>('POST', '/api/invites', {
      token: alice,
      body: { email: 'bob@acme.test', role: 'ANALYST' },
    });
    expect([member.status, member.body.code]).toEqual([409, 'ALREADY_MEMBER']);
  });

  it('isolates tenants: another organization gets 404 for every id of this one', async () => {
    const mallory = await system.tokenFor('mallory@evil.test', { name: 'Mallory' });
    const malloryFeed = await system.api<Notification[]>('GET', '/api/notifications', { token: mallory });
    expect(malloryFeed.body).toEqual([]);
    expect((await system.api<Member[]>('GET', '/api/members', { token: mallory })).body).toHaveLength(1);

    const members = (await system.api<Member[]>('GET', '/api/members', { token: alice })).body;
    const bobId = members.find((m) => m.email === 'bob@acme.test')!.id;
    const { invite: pending } = await invite('gina@acme.test', 'ANALYST');
    const feed = (await system.api<Notification[]>('GET', '/api/notifications', { token: alice })).body;

    const attempts = [
      ['PATCH', `/api/members/${bobId}`, { role: 'ORG_ADMIN' }],
      ['DELETE', `/api/members/${bobId}`, undefined],
      ['DELETE', `/api/invites/${pending.id}`, undefined],
      ['POST', `/api/notifications/${feed[0]!.id}/read`, undefined],
    ] as const;
    for (const [method, path, body] of attempts) {
      const response = await system.api<{ code: string }>(method, path, { token: mallory, body });
      expect([method, path, response.status]).toEqual([method, path, 404]);
    }
    // Nothing changed on Alice's side.
    const after = (await system.api<Member[]>('GET', '/api/members', { token: alice })).body;
    expect(after.find((m) => m.id === bobId)?.role).toBe('ANALYST');
    expect(
      (await system.api<Invite[]>('GET', '/api/invites', { token: alice })).body.map((i) => i.id),
    ).toContain(pending.id);

    // Asking to act in Alice's organization through the header is refused the same way.
    const header = await system.api('GET', '/api/members', {
      token: mallory,
      headers: { 'x-org-id': aliceSession.org.id },
    });
    expect(header.status).toBe(404);
  });

  it('pages lists with limit and a Link header', async () => {
    const first = await system.api<Member[]>('GET', '/api/members?limit=1', { token: alice });
    expect(first.body).toHaveLength(1);
    const link = first.headers.get('link');
    expect(link).toMatch(/rel="next"/);
    const next = /<([^>]+)>/.exec(link!)![1]!;
    const second = await system.api<Member[]>('GET', next, { token: alice });
    expect(second.body).toHaveLength(1);
    expect(second.body[0]!.id).not.toBe(first.body[0]!.id);
  });
});
