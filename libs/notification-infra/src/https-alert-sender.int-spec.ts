import { createServer, type Server } from 'node:https';
import type { ServerResponse } from 'node:http';
import {
  getDefaultAutoSelectFamily,
  setDefaultAutoSelectFamily,
  type AddressInfo,
  type Socket,
} from 'node:net';
import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
  type TestCertificateAuthority,
} from '@sts/stand-ins/https-receiver';
import { judgeAttempt } from '@sts/notification-domain/alert-delivery-policy';
import { eventually } from '@sts/testing/eventually';
import { httpsAlertSender, type HttpsAlertSenderOptions } from './https-alert-sender';

/**
 * A real HTTPS receiver whose answers this spec writes itself (the body's size, an answer that never
 * ends), recording which connection carried each request and which connections the client closed.
 */
async function startRawReceiver(ca: TestCertificateAuthority) {
  const { cert, key } = await ca.issueLocalhost();
  const connections: Socket[] = [];
  const closed = new Set<number>();
  const served: number[] = [];
  let answer: (res: ServerResponse) => void = (res) => res.end('ok');
  const server: Server = createServer({ cert, key }, (req, res) => {
    req.resume();
    req.on('end', () => {
      served.push(connections.indexOf(req.socket));
      answer(res);
    });
  });
  server.on('secureConnection', (socket: Socket) => {
    const index = connections.push(socket) - 1;
    socket.once('close', () => closed.add(index));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    /** The connection (0, 1, …) of each request served. */
    served,
    closed,
    answer: (next: typeof answer) => {
      answer = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        connections.forEach((socket) => socket.destroy());
        server.close(() => resolve());
      }),
  };
}

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
    expect(receiver.requests[0]?.headers['user-agent']).toBe('sts-alerts/1');
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

  it('with private networks allowed, reaches a literal loopback address, IPv4 or IPv6 in brackets', async () => {
    for (const url of [`https://127.0.0.1:${receiver.port}/`, `https://[::1]:${receiver.port}/`])
      expect(await open().send({ url, headers, body })).toMatchObject({ kind: 'answered', status: 200 });
    expect(receiver.requests).toHaveLength(2);
  });

  it('refuses a name that points inside by the time of the connection (rebinding after the check): the connection lookup checks again', async () => {
    const calls: string[] = [];
    const sender = httpsAlertSender({
      timeoutMs: 2_000,
      allowPrivateNetworks: false,
      extraCa: ca.certPem,
      // The check sees a public address among private ones; the connection's own lookup, only this machine.
      resolve: async (hostname) => {
        calls.push(hostname);
        return calls.length === 1
          ? [
              { address: '127.0.0.1', family: 4 },
              { address: '8.8.8.8', family: 4 },
            ]
          : [
              { address: '127.0.0.1', family: 4 },
              { address: '::1', family: 6 },
            ];
      },
    });
    const result = await sender.send({ url: `https://localhost:${receiver.port}/`, headers, body });
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
    expect(calls).toEqual(['localhost', 'localhost']);
    expect(receiver.requests).toHaveLength(0);
  });

  it('connects through its own lookup also when the runtime asks for one address only (no family autoselection)', async () => {
    const before = getDefaultAutoSelectFamily();
    setDefaultAutoSelectFamily(false);
    try {
      expect(await open().send({ url: receiver.url, headers, body })).toMatchObject({
        kind: 'answered',
        status: 200,
      });
      const rebinding = httpsAlertSender({
        timeoutMs: 2_000,
        allowPrivateNetworks: false,
        extraCa: ca.certPem,
        resolve: (() => {
          let calls = 0;
          return async () =>
            ++calls === 1 ? [{ address: '8.8.8.8', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
        })(),
      });
      expect(
        await rebinding.send({ url: `https://localhost:${receiver.port}/`, headers, body }),
      ).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
    } finally {
      setDefaultAutoSelectFamily(before);
    }
    expect(receiver.requests).toHaveLength(1);
  });

  describe('with private networks listed (CIDRs)', () => {
    const listing = (allowPrivateNetworks: readonly string[], resolve?: HttpsAlertSenderOptions['resolve']) =>
      httpsAlertSender({
        timeoutMs: 2_000,
        allowPrivateNetworks,
        extraCa: ca.certPem,
        ...(resolve ? { resolve } : {}),
      });

    it('reaches a receiver in a listed network, by literal address and by a name that resolves there', async () => {
      const sender = listing(['127.0.0.0/8'], async () => [{ address: '127.0.0.1', family: 4 }]);
      for (const url of [`https://127.0.0.1:${receiver.port}/`, `https://localhost:${receiver.port}/`])
        expect(await sender.send({ url, headers, body })).toMatchObject({ kind: 'answered', status: 200 });
      expect(
        await listing(['::1/128']).send({ url: `https://[::1]:${receiver.port}/`, headers, body }),
      ).toMatchObject({ kind: 'answered', status: 200 });
      expect(receiver.requests).toHaveLength(3);
    });

    it('refuses private addresses outside the list: by literal address, by name, and the other family', async () => {
      for (const [networks, url] of [
        [['10.0.0.0/8', 'fd00::/8'], `https://127.0.0.1:${receiver.port}/`],
        [['10.0.0.0/8', 'fd00::/8'], `https://[::1]:${receiver.port}/`],
        [['10.0.0.0/8', 'fd00::/8'], receiver.url],
        [['::1/128'], `https://127.0.0.1:${receiver.port}/`],
        [['127.0.0.0/8'], `https://[::1]:${receiver.port}/`],
      ] as const) {
        expect([networks, url, await listing(networks).send({ url, headers, body })]).toEqual([
          networks,
          url,
          expect.objectContaining({ kind: 'no-answer', reason: 'not-allowed' }),
        ]);
      }
      expect(receiver.requests).toHaveLength(0);
    });

    it('refuses a name that points outside the list by the time of the connection (rebinding after the check)', async () => {
      const calls: string[] = [];
      const sender = listing(['10.0.0.0/8'], async (hostname) => {
        calls.push(hostname);
        // The check sees an address of the listed network; the connection's own lookup, this machine.
        return calls.length === 1
          ? [{ address: '10.1.2.3', family: 4 }]
          : [{ address: '127.0.0.1', family: 4 }];
      });
      const result = await sender.send({ url: `https://localhost:${receiver.port}/`, headers, body });
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
      expect(calls).toEqual(['localhost', 'localhost']);
      expect(receiver.requests).toHaveLength(0);
    });
  });

  describe('on a receiver of its own', () => {
    let raw: Awaited<ReturnType<typeof startRawReceiver>>;
    beforeEach(async () => {
      raw = await startRawReceiver(ca);
    });
    afterEach(async () => {
      await raw.close();
    });

    it('keeps the connection between attempts, also after an answer of exactly the size limit', async () => {
      const sender = open();
      raw.answer((res) => res.end('ok'));
      await sender.send({ url: raw.url, headers, body });
      raw.answer((res) => res.end(Buffer.alloc(64 * 1024, 'a')));
      expect(await sender.send({ url: raw.url, headers, body })).toMatchObject({
        kind: 'answered',
        status: 200,
      });
      raw.answer((res) => res.end('ok'));
      expect(await sender.send({ url: raw.url, headers, body })).toMatchObject({
        kind: 'answered',
        status: 200,
      });
      expect(raw.served).toEqual([0, 0, 0]);
    });

    it('stops reading an answer past the size limit: reports the status at once and closes the connection', async () => {
      // Headers, 64 KiB and one byte, and the answer never ends: only the size limit ends the attempt.
      raw.answer((res) => {
        res.writeHead(200);
        res.write(Buffer.alloc(64 * 1024 + 1, 'a'));
      });
      const timeoutMs = 5_000;
      const result = await open({ timeoutMs }).send({ url: raw.url, headers, body });
      expect(result).toMatchObject({ kind: 'answered', status: 200 });
      expect(result.durationMs).toBeLessThan(timeoutMs);
      await eventually(() => raw.closed.has(0));
    }, 15_000);

    it('checks the name again before an attempt on a kept connection: a name that now points inside is refused', async () => {
      const options: HttpsAlertSenderOptions = {
        timeoutMs: 2_000,
        allowPrivateNetworks: true,
        extraCa: ca.certPem,
        resolve: async () => [{ address: '127.0.0.1', family: 4 }],
      };
      const sender = httpsAlertSender(options);
      const url = `https://localhost:${raw.port}/`;
      expect(await sender.send({ url, headers, body })).toMatchObject({ kind: 'answered', status: 200 });
      // The same receiver, its connection kept; the guard now on (the name points at this machine).
      options.allowPrivateNetworks = false;
      expect(await sender.send({ url, headers, body })).toMatchObject({
        kind: 'no-answer',
        reason: 'not-allowed',
      });
      expect(raw.served).toEqual([0]);
    });

    it('with networks listed, checks the name again on a kept connection: once the list no longer holds its address, it is refused', async () => {
      const options: HttpsAlertSenderOptions = {
        timeoutMs: 2_000,
        allowPrivateNetworks: ['127.0.0.0/8'],
        extraCa: ca.certPem,
        resolve: async () => [{ address: '127.0.0.1', family: 4 }],
      };
      const sender = httpsAlertSender(options);
      const url = `https://localhost:${raw.port}/`;
      for (let attempt = 0; attempt < 2; attempt++)
        expect(await sender.send({ url, headers, body })).toMatchObject({ kind: 'answered', status: 200 });
      options.allowPrivateNetworks = ['10.0.0.0/8'];
      expect(await sender.send({ url, headers, body })).toMatchObject({
        kind: 'no-answer',
        reason: 'not-allowed',
      });
      expect(raw.served).toEqual([0, 0]);
    });
  });
});
