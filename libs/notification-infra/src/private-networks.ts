import { BlockList, isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * ALERT_ALLOW_PRIVATE_NETWORKS, parsed: `false`, deliveries reach public unicast addresses only; `true`, any
 * address (tests, a receiver on the same host); a list of networks (CIDR, `10.0.0.0/8`, `fd00::/8`), public
 * addresses and those of the listed networks only (on-premises receivers).
 */
export type PrivateNetworks = boolean | readonly string[];

/** The NAT64 well-known prefix (RFC 6052): a translator reaches the IPv4 address in its last 32 bits. */
export const NAT64_WELL_KNOWN: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('64:ff9b::'), 96];

/**
 * IPv4-compatible IPv6 (`::a.b.c.d`, deprecated by RFC 4291), `::` and `::1`: never a receiver. Node's
 * reading: ipaddr.js takes `::a.b.c.d` for IPv4-mapped.
 */
export const IPV4_COMPATIBLE = new BlockList();
IPV4_COMPATIBLE.addSubnet('::', 96, 'ipv6');

/**
 * The networks of a comma-separated list of CIDRs, each as `network/prefix` (normalized: `FD00::/8` is
 * `fd00::/8`), or what is wrong with the first bad one. A network must be written as its first address
 * (`10.0.0.5/8` is refused: it is `10.0.0.0/8` or a typo for `10.0.0.5/32`); no zone, no shortened IPv4.
 */
export function parsePrivateNetworks(text: string): { networks: string[] } | { error: string } {
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.length === 0) return { error: 'no network given' };
  const networks: string[] = [];
  for (const entry of entries) {
    const network = parseCidr(entry);
    if (typeof network === 'string') return { error: `${entry}: ${network}` };
    const written = `${network[0].toString()}/${network[1]}`;
    if (!networks.includes(written)) networks.push(written);
  }
  return { networks };
}

/** The network of one CIDR, or why it is not one. */
function parseCidr(entry: string): [ipaddr.IPv4 | ipaddr.IPv6, number] | string {
  const [address = '', prefix, ...rest] = entry.split('/');
  // Node's own reading of addresses (it never connects to `010.0.0.1` or `167772161` as an address).
  const family = isIP(address);
  if (family === 0 || address.includes('%')) return 'not an IPv4 or IPv6 address';
  // ipaddr.js would read it as IPv4-mapped (::ffff:a.b.c.d), another network.
  if (family === 6 && address.includes('.') && IPV4_COMPATIBLE.check(address, 'ipv6'))
    return 'IPv4-compatible (::a.b.c.d), deprecated: write the IPv4 network';
  if (prefix === undefined || rest.length > 0 || !/^\d{1,3}$/.test(prefix))
    return 'needs a prefix length (10.0.0.0/8; one address: /32 or /128)';
  const bits = Number(prefix);
  if (bits > (family === 4 ? 32 : 128)) return `prefix length over ${family === 4 ? 32 : 128}`;
  const network = ipaddr.parseCIDR(`${address}/${bits}`);
  const first =
    family === 4
      ? ipaddr.IPv4.networkAddressFromCIDR(`${address}/${bits}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${address}/${bits}`);
  if (first.toString() !== network[0].toString())
    return `host bits set (the network is ${first.toString()}/${bits})`;
  return network;
}

/**
 * Whether an address lies in one of `networks` (CIDRs as `parsePrivateNetworks` gives them). IPv4-mapped and
 * NAT64 (64:ff9b::/96) addresses are also judged as the IPv4 address they carry, as `isForbiddenAddress`
 * judges them; IPv4-compatible ones (`::a.b.c.d`) are not. Not an address for Node: no. Node's BlockList
 * matches (ipaddr.js reads `::10.0.0.1` as `::ffff:10.0.0.1`).
 */
export function inNetworks(networks: readonly string[]): (address: string) => boolean {
  const list = new BlockList();
  for (const network of networks) {
    const cidr = parseCidr(network);
    if (typeof cidr === 'string') throw new Error(`not a network: ${network} (${cidr})`);
    list.addSubnet(cidr[0].toString(), cidr[1], cidr[0].kind());
  }
  const listed = (address: string): boolean => {
    const family = isIP(address);
    if (family === 0) return false;
    try {
      return list.check(address, family === 4 ? 'ipv4' : 'ipv6');
    } catch {
      return false;
    }
  };
  return (address) => {
    if (listed(address)) return true;
    if (isIP(address) !== 6 || IPV4_COMPATIBLE.check(address, 'ipv6')) return false;
    let parsed: ipaddr.IPv6;
    try {
      parsed = ipaddr.IPv6.parse(address);
    } catch {
      return false;
    }
    return parsed.match(NAT64_WELL_KNOWN) && listed(parsed.toByteArray().slice(12).join('.'));
  };
}

/** What a process logs once at start (a warning) when deliveries may reach private networks; none if not. */
export function privateNetworksWarning(setting: PrivateNetworks): string | undefined {
  if (setting === false) return undefined;
  if (setting === true)
    return (
      'ALERT_ALLOW_PRIVATE_NETWORKS=true: alert deliveries may reach every private, loopback and link-local ' +
      'address (cloud metadata included); list the networks receivers are on instead (10.0.0.0/8,fd00::/8)'
    );
  return `ALERT_ALLOW_PRIVATE_NETWORKS: alert deliveries may reach these private networks besides public addresses: ${setting.join(', ')}`;
}
