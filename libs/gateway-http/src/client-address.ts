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
