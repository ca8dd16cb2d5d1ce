import { ORG_ID, OTHER_ORG_ID } from '../test/fake-upstream';
import { startTestGateway, type TestGateway } from '../test/test-gateway';

/** Ids of organization B's objects, as a caller of organization A might name them in a path. */
const THEIRS = '7d1c2b8e-5d4f-4a1b-9c3e-2f6a8b9c0d1e';

/**
 * Every route that changes something or reads one object by its id, called by an ORG_ADMIN machine client
 * of organization A that names organization B in X-Org-Id and B's objects in the path: what reaches the
 * services is scoped to A (the service answers 404 for B's object), never to B. A body naming an
 * organization is refused before anything is called.
 */
describe('tenant scoping of changes', () => {
  let gw: TestGateway;
  let token: string;

  beforeEach(async () => {
    gw = await startTestGateway();
    token = await gw.tokens.client('ci', ORG_ID, 'ORG_ADMIN');
  });

  afterEach(async () => {
    await gw.app.close();
  });

  const changes: { method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; url: string; body?: object }[] = [
    { method: 'GET', url: `/api/devices/${THEIRS}` },
    { method: 'POST', url: `/api/devices/${THEIRS}/disable` },
    { method: 'POST', url: `/api/devices/${THEIRS}/enable` },
    { method: 'DELETE', url: `/api/devices/${THEIRS}` },
    { method: 'POST', url: `/api/devices/${THEIRS}/re-enrollment` },
    { method: 'POST', url: '/api/enrollment-key' },
    { method: 'DELETE', url: '/api/enrollment-key' },
    { method: 'POST', url: '/api/enrollment-codes', body: { count: 1 } },
    { method: 'POST', url: '/api/enrollment-codes/email', body: { email: 'ops@example.com' } },
    { method: 'POST', url: '/api/invites', body: { email: 'new@example.com', role: 'ANALYST' } },
    { method: 'DELETE', url: `/api/invites/${THEIRS}` },
    { method: 'PATCH', url: `/api/members/${THEIRS}`, body: { role: 'ANALYST' } },
    { method: 'DELETE', url: `/api/members/${THEIRS}` },
    { method: 'POST', url: '/api/org-alert-endpoints', body: { url: 'https://alerts.example.com/hook' } },
    { method: 'DELETE', url: `/api/org-alert-endpoints/${THEIRS}` },
    { method: 'POST', url: `/api/org-alert-endpoints/${THEIRS}/test` },
    { method: 'POST', url: `/api/org-alert-endpoints/${THEIRS}/enable` },
    { method: 'POST', url: `/api/org-alert-endpoints/${THEIRS}/rotate-secret` },
    { method: 'POST', url: '/api/billing/checkout-session', body: { plan: 'pro', cycle: 'annual' } },
    { method: 'POST', url: '/api/billing/portal' },
    { method: 'POST', url: `/api/notifications/${THEIRS}/read` },
    { method: 'POST', url: '/api/notifications/read-all' },
  ];

  it.each(changes)('$method $url reaches the services for the caller’s organization only', async (change) => {
    // The fake services answer only what a test scripts; what matters here is what they were asked.
    await gw.app.inject({
      method: change.method,
      url: change.url,
      headers: { authorization: `Bearer ${token}`, 'x-org-id': OTHER_ORG_ID },
      ...(change.body ? { payload: change.body } : {}),
    });
    const calls = gw.upstream.calls.filter((call) => call.method !== 'resolveCaller');
    // The route did reach a service (so the check below can fail)…
    expect(calls.length).toBeGreaterThan(0);
    // …and every organization it named there is the caller's.
    const named = calls.map((call) => (call.request as { orgId?: string }).orgId);
    expect(named).toEqual(named.map(() => ORG_ID));
  });

  it('refuses a body that names an organization, before calling anything', async () => {
    const response = await gw.app.inject({
      method: 'POST',
      url: '/api/invites',
      headers: { authorization: `Bearer ${token}` },
      payload: { email: 'new@example.com', role: 'ANALYST', org_id: OTHER_ORG_ID },
    });
    expect(response.statusCode).toBe(400);
    expect(gw.upstream.calls.filter((call) => call.method !== 'resolveCaller')).toEqual([]);
  });
});
