import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
  type TestCertificateAuthority,
} from '@sts/testing/https-receiver';
import { forbiddenAddress, httpsAlertSender } from './https-alert-sender';

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

  it('verifies the certificate: without the CA the attempt fails and nothing is sent', async () => {
    const result = await open({ extraCa: undefined }).send({ url: receiver.url, headers, body });
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'network' });
    expect(receiver.requests).toHaveLength(0);
  });

  it('refuses loopback by name, by literal address and as IPv4-mapped IPv6, unless private networks are allowed', async () => {
    for (const url of [
      receiver.url,
      `https://127.0.0.1:${receiver.port}`,
      `https://[::ffff:127.0.0.1]:${receiver.port}`,
      `https://[::1]:${receiver.port}`,
    ]) {
      const result = await guarded().send({ url, headers, body });
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'refused' });
    }
    expect(receiver.requests).toHaveLength(0);
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
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'refused' });
    expect(result.kind === 'no-answer' && result.error).toBe(
      'alerts.example.com resolves only to private or reserved addresses',
    );
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
    ['8.8.8.8', false],
    ['1.1.1.1', false],
    ['2606:4700:4700::1111', false],
    ['::ffff:8.8.8.8', false],
  ])('%s is forbidden: %s', (address, forbidden) => {
    expect(forbiddenAddress(address) !== null).toBe(forbidden);
  });
});
