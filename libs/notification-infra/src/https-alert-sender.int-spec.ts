import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
  type TestCertificateAuthority,
} from '@sts/stand-ins/https-receiver';
import { judgeAttempt } from '@sts/notification-domain/alert-delivery-policy';
import { httpsAlertSender, isForbiddenAddress } from './https-alert-sender';

/** The sender against real HTTPS receivers with a CA of their own. */
describe('HTTPS alert sender', () => {
  let ca: TestCertificateAuthority;
  let receiver: HttpsReceiver;
  let elsewhere: HttpsReceiver;
  const body = JSON.stringify({
    id: 'evt',
    type: 'alert.test',
    created_at: '2026-11-25T00:00:00Z',
    data: {},
  });
  const headers = { 'content-type': 'application/json', 'webhook-id': 'msg_1' };

  beforeAll(async () => {
    ca = await testCertificateAuthority();
    receiver = await startHttpsReceiver(ca);
    elsewhere = await startHttpsReceiver(ca);
  });

  afterAll(async () => {
    await receiver?.close();
    await elsewhere?.close();
  });

  beforeEach(() => {
    receiver.requests.length = 0;
    elsewhere.requests.length = 0;
    receiver.behave(() => ({ status: 200 }));
  });

  const open = (extra: { timeoutMs?: number; extraCa?: string | undefined } = {}) =>
    httpsAlertSender({
      timeoutMs: extra.timeoutMs ?? 2_000,
      allowPrivateNetworks: true,
      extraCa: ca.certPem,
      ...extra,
    });
  const guarded = () =>
    httpsAlertSender({ timeoutMs: 2_000, allowPrivateNetworks: false, extraCa: ca.certPem });

  it('POSTs the body and headers and reports the answer', async () => {
    receiver.behave(() => ({ status: 204 }));
    const result = await open().send({ url: `${receiver.url}/hooks/alerts?x=1`, headers, body });
    expect(result).toMatchObject({ kind: 'answered', status: 204 });
    expect(receiver.requests).toHaveLength(1);
    expect(receiver.requests[0]).toMatchObject({ method: 'POST', path: '/hooks/alerts?x=1', body });
    expect(receiver.requests[0]?.headers['webhook-id']).toBe('msg_1');
  });

  it("passes on Retry-After, and never follows a redirect (here to a private address's receiver)", async () => {
    receiver.behave(() => ({ status: 302, headers: { location: `${elsewhere.url}/` } }));
    expect(await open().send({ url: receiver.url, headers, body })).toMatchObject({
      kind: 'answered',
      status: 302,
    });
    receiver.behave(() => ({ status: 429, headers: { 'retry-after': '120' } }));
    expect(await open().send({ url: receiver.url, headers, body })).toMatchObject({
      status: 429,
      retryAfter: '120',
    });
    expect(elsewhere.requests).toHaveLength(0);
  });

  it('reports a dropped connection and a receiver that never answers, within the timeout', async () => {
    receiver.behave(() => 'drop-connection');
    expect(await open().send({ url: receiver.url, headers, body })).toMatchObject({
      kind: 'no-answer',
      reason: 'network',
    });
    receiver.behave(() => 'never-answer');
    const started = Date.now();
    const silent = await open({ timeoutMs: 500 }).send({ url: receiver.url, headers, body });
    expect(silent).toMatchObject({ kind: 'no-answer', reason: 'timeout' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('verifies the certificate: without the CA the attempt fails (a TLS failure) and nothing is sent', async () => {
    const result = await open({ extraCa: undefined }).send({ url: receiver.url, headers, body });
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'tls' });
    expect(receiver.requests).toHaveLength(0);
  });

  it('refuses loopback by name, by literal address and as IPv4-mapped or IPv4-compatible IPv6, unless private networks are allowed', async () => {
    for (const url of [
      receiver.url,
      `https://127.0.0.1:${receiver.port}`,
      `https://[::ffff:127.0.0.1]:${receiver.port}`,
      `https://[::127.0.0.1]:${receiver.port}`,
      `https://[::1]:${receiver.port}`,
    ]) {
      const result = await guarded().send({ url, headers, body });
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
    }
    expect(receiver.requests).toHaveLength(0);
  });

  it('records a name that does not resolve and a name that resolves inside alike (no DNS oracle), and no message of its own', async () => {
    const sender = httpsAlertSender({
      timeoutMs: 2_000,
      allowPrivateNetworks: false,
      extraCa: ca.certPem,
      resolve: async (hostname) => {
        if (hostname === 'metadata.internal.example') return [{ address: '10.0.0.5', family: 4 }];
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      },
    });
    const now = new Date();
    const [inside, unknown] = await Promise.all(
      ['metadata.internal.example', 'nothing.internal.example'].map(async (host) =>
        judgeAttempt(await sender.send({ url: `https://${host}:${receiver.port}/`, headers, body }), now),
      ),
    );
    expect(inside).toEqual(unknown);
    expect(inside).toEqual({
      outcome: 'retry',
      error: 'address not allowed (the name does not resolve, or only to private or reserved addresses)',
      retryAfterMs: null,
    });
    // A dropped connection is a class too, not the socket's own message.
    receiver.behave(() => 'drop-connection');
    expect(judgeAttempt(await open().send({ url: receiver.url, headers, body }), now)).toMatchObject({
      error: 'connection failed',
    });
    expect(receiver.requests).toHaveLength(1);
  });

  it('connects only to the address it checked (a name that resolves to a private address is refused)', async () => {
    const rebinding = httpsAlertSender({
      timeoutMs: 2_000,
      allowPrivateNetworks: false,
      extraCa: ca.certPem,
      // A hostile DNS answer: the receiver's name points at this machine.
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    const result = await rebinding.send({
      url: `https://alerts.example.com:${receiver.port}/`,
      headers,
      body,
    });
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
    expect(receiver.requests).toHaveLength(0);
  });

  it.each([
    ['127.0.0.1', true],
    ['10.1.2.3', true],
    ['172.31.255.255', true],
    ['192.168.1.1', true],
    ['169.254.169.254', true],
    ['100.64.0.1', true],
    ['224.0.0.1', true],
    ['0.0.0.0', true],
    ['::1', true],
    ['fd00:ec2::254', true],
    ['fe80::1', true],
    ['ff02::1', true],
    ['::ffff:10.0.0.1', true],
    ['::ffff:a00:1', true],
    ['64:ff9b::7f00:1', true],
    ['255.255.255.255', true],
    ['198.18.0.1', true],
    ['192.0.0.8', true],
    ['::', true],
    ['2001:db8::1', true],
    ['100::1', true],
    // IPv4-compatible (deprecated), whatever IPv4 it carries, in either notation.
    ['::7f00:1', true],
    ['::127.0.0.1', true],
    ['::a9fe:a9fe', true],
    ['::808:808', true],
    // IPv4-translated (::ffff:0:0:0/96).
    ['::ffff:0:7f00:1', true],
    ['::ffff:0:808:808', true],
    // Local-use NAT64 (64:ff9b:1::/48), 6to4 (2002::/16), Teredo (2001::/32), site-local (fec0::/10).
    ['64:ff9b:1::a00:1', true],
    ['64:ff9b:1::808:808', true],
    ['2002:7f00:1::1', true],
    ['2002:a9fe:a9fe::1', true],
    ['2002:808:808::1', true],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', true],
    ['2001:0:a00:1::1', true],
    ['fec0::1', true],
    ['not an address', true],
    ['8.8.8.8', false],
    ['1.1.1.1', false],
    ['2606:4700:4700::1111', false],
    ['2a00:1450:4001:80b::200e', false],
    ['::ffff:8.8.8.8', false],
    // NAT64 (well-known prefix): a public IPv4 receiver reached from an IPv6-only network.
    ['64:ff9b::808:808', false],
    ['64:ff9b::10.0.0.1', true],
    ['64:ff9b::169.254.169.254', true],
  ])('%s is forbidden: %s', (address, forbidden) => {
    expect(isForbiddenAddress(address)).toBe(forbidden);
  });
});
