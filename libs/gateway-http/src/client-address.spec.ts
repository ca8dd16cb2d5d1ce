import { clientAddressKey } from './client-address';

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
