import type { AlertEndpoint } from '@sts/proto/gen/notification/v1/notification';
import { Role as ProtoRole } from '@sts/proto/gen/identity/v1/identity';
import { AT, ORG_ID } from '../test/fake-upstream';
import { startTestGateway, type TestGateway } from '../test/test-gateway';

/** Webhook URLs whose path or query is the receiver's credential. */
const SLACK = 'https://hooks.slack.com/services/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';
const WITH_TOKEN = 'https://siem.example.com/ingest/alerts?token=Zq9vS3cr3tT0k3nValue1234&source=sts';

const endpoint = (id: string, url: string): AlertEndpoint => ({
  id,
  url,
  description: '',
  createdAt: AT,
  disabledAt: undefined,
});

/**
 * Alert endpoint URLs are often bearer secrets: ORG_ADMIN, who registers them, reads them whole; an
 * ANALYST (who may read the list) and any client that is not ORG_ADMIN reads the origin, masked path and
 * masked query values, still as a string (contract: `url` is a string).
 */
describe('alert endpoint routes: who reads the whole URL', () => {
  let gw: TestGateway;

  beforeEach(async () => {
    gw = await startTestGateway();
    gw.upstream.notification.listAlertEndpoints = async () => ({
      endpoints: [endpoint('e-1', SLACK), endpoint('e-2', WITH_TOKEN)],
    });
    gw.upstream.memberships.set('ana@example.com', { role: ProtoRole.ROLE_ANALYST, dashboardAccess: true });
  });

  afterEach(async () => {
    await gw.app.close();
  });

  const list = async (token: string) => {
    const response = await gw.app.inject({
      method: 'GET',
      url: '/api/org-alert-endpoints',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.statusCode).toBe(200);
    return response;
  };

  it('shows ORG_ADMIN the whole URLs', async () => {
    const response = await list(await gw.tokens.user('ada@example.com'));
    expect(response.json<{ url: string }[]>().map((item) => item.url)).toEqual([SLACK, WITH_TOKEN]);
  });

  it.each([
    ['an analyst', (gw: TestGateway) => gw.tokens.user('ana@example.com')],
    ['an analyst machine client', (gw: TestGateway) => gw.tokens.client('siem', ORG_ID, 'ANALYST')],
  ])('shows %s the origin with the path and query masked', async (_who, token) => {
    const response = await list(await token(gw));
    expect(response.body).not.toContain('Zq9v');
    expect(response.body).not.toContain('T0ACME');
    expect(response.json()).toEqual([
      { id: 'e-1', url: 'https://hooks.slack.com/services/…/…/…', created_at: AT.toISOString() },
      {
        id: 'e-2',
        url: 'https://siem.example.com/ingest/…?token=…&source=…',
        created_at: AT.toISOString(),
      },
    ]);
  });

  it('answers ORG_ADMIN the whole URL on create, enable and rotation', async () => {
    const admin = { authorization: `Bearer ${await gw.tokens.user('ada@example.com')}` };
    gw.upstream.notification.createAlertEndpoint = async () => ({
      endpoint: endpoint('e-3', SLACK),
      secret: 'whsec_x',
    });
    gw.upstream.notification.enableAlertEndpoint = async () => ({ endpoint: endpoint('e-3', SLACK) });
    gw.upstream.notification.rotateAlertSecret = async () => ({
      endpoint: endpoint('e-3', SLACK),
      secret: 'whsec_y',
      previousSecretExpiresAt: AT,
    });
    const answers = [
      await gw.app.inject({
        method: 'POST',
        url: '/api/org-alert-endpoints',
        headers: admin,
        payload: { url: SLACK },
      }),
      await gw.app.inject({ method: 'POST', url: '/api/org-alert-endpoints/e-3/enable', headers: admin }),
      await gw.app.inject({
        method: 'POST',
        url: '/api/org-alert-endpoints/e-3/rotate-secret',
        headers: admin,
      }),
    ];
    expect(answers.map((answer) => [answer.statusCode, answer.json<{ url: string }>().url])).toEqual([
      [201, SLACK],
      [200, SLACK],
      [200, SLACK],
    ]);
  });
});
