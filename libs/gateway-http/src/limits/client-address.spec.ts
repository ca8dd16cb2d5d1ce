import { clientAddressKey, clientNetworkKey } from './client-address';

describe('clientAddressKey', () => {
  it('keeps an IPv4 address, also one that arrives IPv4-mapped', () => {
    expect(clientAddressKey('203.0.113.7')).toBe('203.0.113.7');
    expect(clientAddressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
  });

  it('limits IPv6 clients by their /64: addresses of one subscriber share a key, other networks do not', () => {
    const a = clientAddressKey('2001:db8:1:2:aaaa::1');
    expect(a).toBe('2001:db8:1:2::/64');
    expect(clientAddressKey('2001:db8:1:2:ffff:ffff:ffff:fffe')).toBe(a);
    expect(clientAddressKey('2001:0db8:0001:0002::0042')).toBe(a);
    expect(clientAddressKey('2001:db8:1:3::1')).not.toBe(a);
  });

  it('leaves what is not an address as it is', () => {
    expect(clientAddressKey('unknown')).toBe('unknown');
  });
});

describe('clientNetworkKey', () => {
  it('groups IPv4 addresses by their /24, also those that arrive IPv4-mapped', () => {
    expect(clientNetworkKey('203.0.113.7')).toBe('203.0.113.0/24');
    expect(clientNetworkKey('::ffff:203.0.113.250')).toBe('203.0.113.0/24');
    expect(clientNetworkKey('203.0.114.7')).toBe('203.0.114.0/24');
  });

  it('groups IPv6 addresses by their /48: every /64 of one site shares a key, other sites do not', () => {
    const a = clientNetworkKey('2001:db8:1:2:aaaa::1');
    expect(a).toBe('2001:db8:1::/48');
    expect(clientNetworkKey('2001:db8:1:ffff:ffff:ffff:ffff:fffe')).toBe(a);
    expect(clientNetworkKey('2001:0db8:0001:0000::0042')).toBe(a);
    expect(clientNetworkKey('2001:db8:2::1')).not.toBe(a);
    // Coarser than the limit per address, which tells the /64s apart.
    expect(clientAddressKey('2001:db8:1:2::1')).not.toBe(clientAddressKey('2001:db8:1:3::1'));
  });

  it('leaves what is not an address as it is', () => {
    expect(clientNetworkKey('unknown')).toBe('unknown');
  });
});
