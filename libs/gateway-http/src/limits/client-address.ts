import ipaddr from 'ipaddr.js';

/**
 * The key a client's address is limited by: an IPv4 address as it is (also when it arrives IPv4-mapped),
 * an IPv6 address by its /64. One subscriber usually holds a whole /64 and picks addresses in it at
 * will (privacy extensions), so a limit per address would be a limit per request for them.
 */
export function clientAddressKey(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `${parts.map((part) => part.toString(16)).join(':')}::/64`;
}

/**
 * The network a client's address belongs to, coarser than `clientAddressKey`: an IPv4 address by its /24
 * (also when it arrives IPv4-mapped), an IPv6 address by its /48. For bookkeeping that one subscriber must
 * not multiply by spreading over its addresses: a site commonly gets a whole IPv6 /48 (65,536 /64s), and
 * rented IPv4 addresses come in neighbouring blocks. Too coarse for a limit that legitimate clients meet
 * (a /24 may hold a whole office); meant for what only failures count.
 */
export function clientNetworkKey(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return `${(parsed as ipaddr.IPv4).octets.slice(0, 3).join('.')}.0/24`;
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 3);
  return `${parts.map((part) => part.toString(16)).join(':')}::/48`;
}
