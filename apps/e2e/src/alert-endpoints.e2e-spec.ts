import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
} from '@sts/stand-ins/https-receiver';
import { eventually, startSystem, type SystemUnderTest } from './system-under-test';

interface Endpoint {
  id: string;
  url: string;
  description?: string;
  created_at: string;
  secret?: string;
}
interface Delivery {
  id: string;
  status: string;
  attempts: number;
  event_type: string;
  last_response_code: number | null;
}
interface Problem {
  code: string;
  status: number;
  errors?: { path: string }[];
}

describe('alert endpoints, end to end', () => {
  let system: SystemUnderTest;
  let receiver: HttpsReceiver;
  let caDir: string;
  let admin: string;
  let analyst: string;
  let outsider: string;

  beforeAll(async () => {
    const ca = await testCertificateAuthority();
    receiver = await startHttpsReceiver(ca);
    caDir = await mkdtemp(join(tmpdir(), 'sts-e2e-ca-'));
    await writeFile(join(caDir, 'ca.pem'), ca.certPem);
    system = await startSystem({
      notificationEnv: { ALERT_ALLOW_PRIVATE_NETWORKS: 'true', ALERT_EXTRA_CA_FILE: join(caDir, 'ca.pem') },
    });
    admin = await system.tokenFor('admin@alerts.test', { name: 'Admin' });
    outsider = await system.tokenFor('admin@other.test', { name: 'Other' });
    await system.api('POST', '/api/invites', {
      token: admin,
      body: { email: 'ana@alerts.test', role: 'ANALYST' },
    });
    const mail = await system.mail.waitFor((m) => m.to.includes('ana@alerts.test'), 10_000);
    const token = /sts_inv_[A-Za-z0-9_-]{43}/.exec(mail.text ?? '')![0];
    await system.api('POST', '/api/invites/accept', { body: { token } });
    analyst = await system.tokenFor('ana@alerts.test', { name: 'Ana' });
  });

  afterAll(async () => {
    await system?.stop();
    await receiver?.close();
    if (caDir) await rm(caDir, { recursive: true, force: true });
  });

  const list = (token: string) =>
    system.api<Endpoint[] & Problem>('GET', '/api/org-alert-endpoints', { token });
  const create = (token: string, body: unknown) =>
    system.api<Endpoint & Problem>('POST', '/api/org-alert-endpoints', { token, body });

  it('registers, lists and deletes endpoints; the secret is shown once', async () => {
    const created = await create(admin, { url: `${receiver.url}/siem`, description: 'SIEM' });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(String),
      url: `${receiver.url}/siem`,
      description: 'SIEM',
      created_at: expect.any(String),
      secret: expect.stringMatching(/^whsec_/),
    });
    const listed = await list(analyst);
    expect(listed.status).toBe(200);
    // The path may be the receiver's credential: an analyst reads the origin only.
    expect(listed.body).toEqual([
      {
        id: created.body.id,
        url: `${receiver.url}/…`,
        description: 'SIEM',
        created_at: created.body.created_at,
      },
    ]);
    expect((await list(admin)).body).toEqual([expect.objectContaining({ url: created.body.url })]);

    expect(
      (await system.api('DELETE', `/api/org-alert-endpoints/${created.body.id}`, { token: analyst })).status,
    ).toBe(403);
    expect(
      (await system.api('DELETE', `/api/org-alert-endpoints/${created.body.id}`, { token: outsider })).status,
    ).toBe(404);
    expect(
      (await system.api('DELETE', `/api/org-alert-endpoints/${created.body.id}`, { token: admin })).status,
    ).toBe(204);
    expect(
      (await system.api('DELETE', `/api/org-alert-endpoints/${created.body.id}`, { token: admin })).status,
    ).toBe(404);
    expect((await list(admin)).body).toEqual([]);
  });

  it('refuses analysts, bad URLs, duplicates and hostile bodies with problem+json, writing nothing', async () => {
    expect((await create(analyst, { url: `${receiver.url}/x` })).status).toBe(403);
    const bad = async (body: unknown) => {
      const response = await create(admin, body);
      expect([response.status, response.headers.get('content-type')]).toEqual([
        400,
        expect.stringContaining('application/problem+json'),
      ]);
      return response.body;
    };
    for (const url of [
      'http://hooks.example.com/',
      'https://user:secret@hooks.example.com/',
      'https://hooks.example.com/#x',
      'ftp://hooks.example.com/',
      'not a url',
      `https://hooks.example.com/${'a'.repeat(3000)}`,
    ]) {
      expect((await bad({ url })).code).toBe('VALIDATION_FAILED');
    }
    expect((await bad({})).code).toBe('VALIDATION_FAILED');
    expect((await bad({ url: 42 })).code).toBe('VALIDATION_FAILED');
    expect((await bad({ url: `${receiver.url}/y`, description: 'x'.repeat(201) })).code).toBe(
      'VALIDATION_FAILED',
    );
    expect((await bad({ url: `${receiver.url}/y`, extra: true })).code).toBe('VALIDATION_FAILED');
    expect((await bad({ url: `${receiver.url}/y`, description: 'two\nlines' })).code).toBe(
      'VALIDATION_FAILED',
    );
    expect((await list(admin)).body).toEqual([]);

    expect((await create(admin, { url: `${receiver.url}/dup` })).status).toBe(201);
    expect((await bad({ url: `${receiver.url}/dup` })).code).toBe('ALERT_ENDPOINT_DUPLICATE');
    expect((await list(admin)).body).toHaveLength(1);
    expect((await list(outsider)).body).toEqual([]);
    expect(
      (await system.api('GET', '/api/org-alert-endpoints/not-a-uuid/deliveries', { token: admin })).status,
    ).toBe(404);
  });

  it('sends a signed test alert that the reference library verifies, and logs the delivery', async () => {
    const created = await create(admin, { url: `${receiver.url}/test-send` });
    const sent = await system.api<Delivery>('POST', `/api/org-alert-endpoints/${created.body.id}/test`, {
      token: admin,
    });
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ status: 'pending', attempts: 0, event_type: 'alert.test' });
    expect(
      (await system.api('POST', `/api/org-alert-endpoints/${created.body.id}/test`, { token: outsider }))
        .status,
    ).toBe(404);
    expect(
      (await system.api('POST', `/api/org-alert-endpoints/${created.body.id}/test`, { token: analyst }))
        .status,
    ).toBe(403);

    const request = await eventually(() => receiver.requests.find((r) => r.path === '/test-send'));
    const payload = new Webhook(created.body.secret!).verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });
    expect(payload).toMatchObject({ type: 'alert.test', id: sent.body.id });

    const log = await eventually(async () => {
      const response = await system.api<Delivery[]>(
        'GET',
        `/api/org-alert-endpoints/${created.body.id}/deliveries`,
        {
          token: analyst,
        },
      );
      return response.body[0]?.status === 'delivered' ? response.body : undefined;
    });
    expect(log).toEqual([
      expect.objectContaining({ id: sent.body.id, attempts: 1, last_response_code: 200 }),
    ]);
    expect(
      (await system.api('GET', `/api/org-alert-endpoints/${created.body.id}/deliveries`, { token: outsider }))
        .status,
    ).toBe(404);
  });

  it('shows analysts a webhook URL masked, and still delivers to the whole URL', async () => {
    const secret = 'Zq9vS3cr3tT0k3nValue1234';
    const path = `/services/T0ACME/B0ALERTS/${secret}?token=${secret}&channel=ops`;
    const created = await create(admin, { url: `${receiver.url}${path}` });
    expect(created.status).toBe(201);
    expect(created.body.url).toBe(`${receiver.url}${path}`);

    const asAnalyst = await list(analyst);
    expect(JSON.stringify(asAnalyst.body)).not.toContain(secret);
    expect(asAnalyst.body.find((item) => item.id === created.body.id)?.url).toBe(
      `${receiver.url}/services/…/…/…?token=…&channel=…`,
    );
    expect((await list(admin)).body.find((item) => item.id === created.body.id)?.url).toBe(
      `${receiver.url}${path}`,
    );

    await system.api('POST', `/api/org-alert-endpoints/${created.body.id}/test`, { token: admin });
    await eventually(() => receiver.requests.find((r) => r.path === path));
    const log = await eventually(async () => {
      const response = await system.api<Delivery[]>(
        'GET',
        `/api/org-alert-endpoints/${created.body.id}/deliveries`,
        { token: analyst },
      );
      return response.body[0]?.status === 'delivered' ? response : undefined;
    });
    expect(JSON.stringify(log.body)).not.toContain(secret);
    await system.api('DELETE', `/api/org-alert-endpoints/${created.body.id}`, { token: admin });
  });

  it('rotates the secret: the next message verifies with the new secret and, for a day, the old one', async () => {
    const created = await create(admin, { url: `${receiver.url}/rotating` });
    expect(
      (
        await system.api('POST', `/api/org-alert-endpoints/${created.body.id}/rotate-secret`, {
          token: analyst,
        })
      ).status,
    ).toBe(403);
    const rotated = await system.api<Endpoint & { previous_secret_expires_at: string }>(
      'POST',
      `/api/org-alert-endpoints/${created.body.id}/rotate-secret`,
      { token: admin },
    );
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(created.body.secret);
    expect(Date.parse(rotated.body.previous_secret_expires_at) - Date.now()).toBeGreaterThan(23 * 3_600_000);

    await system.api('POST', `/api/org-alert-endpoints/${created.body.id}/test`, { token: admin });
    const request = await eventually(() => receiver.requests.find((r) => r.path === '/rotating'));
    const headers = {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    };
    expect(new Webhook(rotated.body.secret!).verify(request.body, headers)).toMatchObject({
      type: 'alert.test',
    });
    expect(new Webhook(created.body.secret!).verify(request.body, headers)).toMatchObject({
      type: 'alert.test',
    });
  });

  it('enables an endpoint (admins only, own organization only)', async () => {
    const created = await create(admin, { url: `${receiver.url}/enable-me` });
    const enable = (token: string) =>
      system.api<Endpoint>('POST', `/api/org-alert-endpoints/${created.body.id}/enable`, { token });
    expect((await enable(analyst)).status).toBe(403);
    expect((await enable(outsider)).status).toBe(404);
    const enabled = await enable(admin);
    expect(enabled.status).toBe(200);
    expect(enabled.body).toEqual({
      id: created.body.id,
      url: created.body.url,
      created_at: created.body.created_at,
    });
  });
});
