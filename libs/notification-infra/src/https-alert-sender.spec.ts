import { httpsAlertSender, isForbiddenAddress } from './https-alert-sender';
import { inNetworks, type PrivateNetworks } from './private-networks';

/** The SSRF guard's decisions that need no network: the address classes, and names refused before any connection. */
describe('HTTPS alert sender, without a network', () => {
  const headers = { 'content-type': 'application/json' };
  const body = '{}';

  it.each([
    // Not an address for Node (so never connected to as one), though ipaddr.js reads them as 8.8.8.8.
    ['134744072', true],
    ['010.8.8.8', true],
    ['8.8.2056', true],
    // An address for Node that ipaddr.js cannot read (a zone it does not accept): refused, not let through.
    ['2606:4700:4700::1111%a-b', true],
    ['8.8.8.8', false],
    ['2606:4700:4700::1111', false],
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
    ['1.1.1.1', false],
    ['2a00:1450:4001:80b::200e', false],
    ['::ffff:8.8.8.8', false],
    // NAT64 (well-known prefix): a public IPv4 receiver reached from an IPv6-only network.
    ['64:ff9b::808:808', false],
    ['64:ff9b::10.0.0.1', true],
    ['64:ff9b::169.254.169.254', true],
  ])('%s is forbidden: %s', (address, forbidden) => {
    expect(isForbiddenAddress(address)).toBe(forbidden);
  });

  /** A sender whose name resolution is `answers`, one per call (the last repeated), counting the calls. */
  const resolving = (
    answers: (() => Promise<{ address: string; family: number }[]>)[],
    options: { allowPrivateNetworks?: PrivateNetworks; timeoutMs?: number } = {},
  ) => {
    const calls: string[] = [];
    const sender = httpsAlertSender({
      timeoutMs: options.timeoutMs ?? 2_000,
      allowPrivateNetworks: options.allowPrivateNetworks ?? false,
      resolve: (hostname) => {
        calls.push(hostname);
        return (answers[calls.length - 1] ?? answers[answers.length - 1]!)();
      },
    });
    return { sender, calls };
  };

  it('refuses a name that resolves only inside after one resolution, without attempting a connection, and times it', async () => {
    const { sender, calls } = resolving([
      async () => [
        { address: '10.0.0.5', family: 4 },
        { address: '::1', family: 6 },
      ],
    ]);
    const before = performance.now();
    const result = await sender.send({ url: 'https://alerts.example.com:8443/hooks', headers, body });
    const after = performance.now();
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
    // A connection would have asked the name again (its own checked lookup).
    expect(calls).toEqual(['alerts.example.com']);
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    expect(result.durationMs).toBeLessThanOrEqual(after - before);
  });

  it('refuses a name that does not resolve after one resolution, without attempting a connection', async () => {
    const { sender, calls } = resolving([
      async () => {
        throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
      },
    ]);
    const result = await sender.send({ url: 'https://nothing.example.com/', headers, body });
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
    expect(calls).toEqual(['nothing.example.com']);
  });

  it('reports a name resolution that never answers as a timeout, and asks no more', async () => {
    const { sender, calls } = resolving([() => new Promise(() => {})], { timeoutMs: 100 });
    const result = await sender.send({ url: 'https://slow.example.com/', headers, body });
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'timeout' });
    expect(result.durationMs).toBeGreaterThanOrEqual(100 - 1);
    expect(calls).toEqual(['slow.example.com']);
  });

  it('with private networks allowed, still reports a name that does not resolve as not allowed (the connection lookup fails)', async () => {
    const { sender, calls } = resolving(
      [
        async () => {
          throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
        },
      ],
      { allowPrivateNetworks: true },
    );
    const result = await sender.send({ url: 'https://nothing.example.com/', headers, body });
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
    expect(calls).toEqual(['nothing.example.com']);
  });

  describe('with private networks listed (ALERT_ALLOW_PRIVATE_NETWORKS as CIDRs)', () => {
    const listed = inNetworks(['10.20.0.0/16', '192.168.7.9/32', 'fd00:1::/64']);

    it.each([
      ['10.20.0.1', true],
      ['10.20.255.255', true],
      ['192.168.7.9', true],
      ['fd00:1::5', true],
      ['FD00:1:0:0::5', true],
      // The IPv4 a mapped or NAT64 address carries is judged by the IPv4 networks.
      ['::ffff:10.20.0.1', true],
      ['::ffff:a14:1', true],
      ['64:ff9b::10.20.0.1', true],
      ['10.21.0.1', false],
      ['10.0.0.1', false],
      ['192.168.7.10', false],
      ['127.0.0.1', false],
      ['169.254.169.254', false],
      ['fd00:2::5', false],
      ['::1', false],
      ['::ffff:127.0.0.1', false],
      // IPv4-compatible and 6to4 forms are not the IPv4 they embed.
      ['::10.20.0.1', false],
      ['2002:a14:1::1', false],
      // Not an address for Node, though ipaddr.js reads them as 10.20.0.1.
      ['169082881', false],
      ['012.20.0.1', false],
      ['not an address', false],
    ])('%s is in the listed networks: %s', (address, inside) => {
      expect(listed(address)).toBe(inside);
    });

    it('refuses a name that resolves only to private addresses outside the list, without attempting a connection', async () => {
      const { sender, calls } = resolving(
        [
          async () => [
            { address: '10.0.0.5', family: 4 },
            { address: '127.0.0.1', family: 4 },
            { address: '169.254.169.254', family: 4 },
            { address: '::1', family: 6 },
            { address: 'fd00:2::1', family: 6 },
          ],
        ],
        { allowPrivateNetworks: ['10.20.0.0/16', 'fd00:1::/64'] },
      );
      const result = await sender.send({ url: 'https://alerts.example.com/hooks', headers, body });
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
      expect(calls).toEqual(['alerts.example.com']);
    });

    it('refuses a literal private address outside the list without resolving anything', async () => {
      const { sender, calls } = resolving([async () => [{ address: '10.20.0.1', family: 4 }]], {
        allowPrivateNetworks: ['10.20.0.0/16'],
      });
      for (const url of [
        'https://127.0.0.1/',
        'https://10.21.0.1/',
        'https://[::1]/',
        'https://169.254.169.254/',
        'https://[::ffff:10.21.0.1]/',
      ]) {
        expect(await sender.send({ url, headers, body })).toMatchObject({
          kind: 'no-answer',
          reason: 'not-allowed',
          durationMs: 0,
        });
      }
      expect(calls).toEqual([]);
    });

    it('still reports a name that does not resolve as not allowed', async () => {
      const { sender, calls } = resolving(
        [
          async () => {
            throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
          },
        ],
        { allowPrivateNetworks: ['10.0.0.0/8'] },
      );
      const result = await sender.send({ url: 'https://nothing.example.com/', headers, body });
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'not-allowed' });
      expect(calls).toEqual(['nothing.example.com']);
    });
  });
});
