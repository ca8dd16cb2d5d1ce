import { randomBytes } from 'node:crypto';
import { loadConfig } from '@sts/config/load-config';
import { testServiceAuth } from '@sts/testing/service-auth';
import { notificationEnvSchema } from './notification-config';
import { privateNetworksWarning } from './private-networks';

const required = {
  SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
  ...testServiceAuth().envOf('notification'),
};

describe('notification configuration', () => {
  it('defaults PUBLIC_API_URL to the local gateway', () => {
    expect(loadConfig(notificationEnvSchema, required).PUBLIC_API_URL).toBe('http://localhost:8080');
  });

  it('takes an http or https PUBLIC_API_URL and refuses anything else', () => {
    expect(
      loadConfig(notificationEnvSchema, { ...required, PUBLIC_API_URL: 'https://api.example.com' })
        .PUBLIC_API_URL,
    ).toBe('https://api.example.com');
    expect(() =>
      loadConfig(notificationEnvSchema, { ...required, PUBLIC_API_URL: 'ftp://api.example.com' }),
    ).toThrow(/PUBLIC_API_URL/);
    expect(() => loadConfig(notificationEnvSchema, { ...required, PUBLIC_API_URL: 'not a url' })).toThrow(
      /PUBLIC_API_URL/,
    );
  });
});

describe('ALERT_ALLOW_PRIVATE_NETWORKS', () => {
  const allowed = (value?: string) =>
    loadConfig(notificationEnvSchema, { ...required, ALERT_ALLOW_PRIVATE_NETWORKS: value })
      .ALERT_ALLOW_PRIVATE_NETWORKS;

  it('keeps true and false (false when unset)', () => {
    expect([allowed(), allowed('false'), allowed('true'), allowed('TRUE'), allowed('0')]).toEqual([
      false,
      false,
      true,
      true,
      false,
    ]);
  });

  it('takes networks as IPv4 and IPv6 CIDRs separated by commas, normalized, each once', () => {
    expect(
      allowed(' 10.20.0.0/16, FD00:1::/64 ,192.168.7.9/32,10.20.0.0/16,::1/128,::ffff:10.30.0.0/112'),
    ).toEqual(['10.20.0.0/16', 'fd00:1::/64', '192.168.7.9/32', '::1/128', '::ffff:a1e:0/112']);
  });

  it.each([
    ['10.0.0.0', /10\.0\.0\.0: needs a prefix length/],
    ['10.0.0.5/8', /10\.0\.0\.5\/8: host bits set \(the network is 10\.0\.0\.0\/8\)/],
    ['fd00::1/8', /host bits set \(the network is fd00::\/8\)/],
    ['10.0.0.0/33', /prefix length over 32/],
    ['fd00::/129', /prefix length over 128/],
    ['010.0.0.0/8', /not an IPv4 or IPv6 address/],
    ['167772160/8', /not an IPv4 or IPv6 address/],
    ['fe80::%eth0/64', /not an IPv4 or IPv6 address/],
    ['::10.0.0.0/104', /IPv4-compatible/],
    ['10.0.0.0/8/9', /needs a prefix length/],
    ['10.0.0.0/8,intranet', /intranet: not an IPv4 or IPv6 address/],
    ['yes please', /not an IPv4 or IPv6 address/],
    [',', /no network given/],
  ])('refuses %s, saying why', (value, why) => {
    expect(() => allowed(value)).toThrow(
      /ALERT_ALLOW_PRIVATE_NETWORKS: must be true, false, or networks as CIDRs/,
    );
    expect(() => allowed(value)).toThrow(why);
  });

  it('is warned about at start, naming what is allowed, unless false', () => {
    expect(privateNetworksWarning(false)).toBeUndefined();
    expect(privateNetworksWarning(true)).toMatch(
      /^ALERT_ALLOW_PRIVATE_NETWORKS=true: alert deliveries may reach every private, loopback and link-local address/,
    );
    expect(privateNetworksWarning(['10.20.0.0/16', 'fd00:1::/64'])).toBe(
      'ALERT_ALLOW_PRIVATE_NETWORKS: alert deliveries may reach these private networks besides public addresses: 10.20.0.0/16, fd00:1::/64',
    );
  });
});
