import { lookup as dnsLookup } from 'node:dns/promises';
import { Agent, request, type RequestOptions } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import type { AttemptResult } from '@sts/notification-domain/alert-delivery-policy';
import type { AlertSender } from '@sts/notification-domain/notification-ports';

export interface HttpsAlertSenderOptions {
  /** The whole attempt (DNS, connection, TLS, answer) at most. */
  timeoutMs: number;
  /** ALERT_ALLOW_PRIVATE_NETWORKS: let deliveries reach the addresses below (tests, on-premises receivers). */
  allowPrivateNetworks: boolean;
  /** PEM certificates trusted besides the public roots (a private CA). */
  extraCa?: string;
  /** Name resolution (every address of a name); the system resolver unless replaced. */
  resolve?: (hostname: string) => Promise<{ address: string; family: number }[]>;
}

/** Bytes of a receiver's answer read (and thrown away) at most: only the status matters. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * Addresses a delivery must never reach unless private networks are allowed: this host, private and
 * shared networks, link-local (cloud metadata at 169.254.169.254), multicast, reserved and
 * documentation ranges, unique-local and link-local IPv6. IPv4-mapped and NAT64 IPv6 addresses are
 * checked as the IPv4 address they carry.
 */
const FORBIDDEN = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  FORBIDDEN.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  FORBIDDEN.addSubnet(network, prefix, 'ipv6');
}

/** The IPv4 address an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) IPv6 address carries. */
function embeddedIpv4(address: string): string | null {
  const groups = expandIpv6(address);
  if (!groups) return null;
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  const nat64 = groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((g) => g === 0);
  if (!mapped && !nat64) return null;
  const [high = 0, low = 0] = groups.slice(6);
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

function expandIpv6(address: string): number[] | null {
  let text = address.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const missing = 8 - left.length - right.length;
  if (tail === undefined ? left.length !== 8 : missing < 0) return null;
  const groups = [...left, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...right].map((g) =>
    parseInt(g, 16),
  );
  return groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/** Why an address may not be reached, or null when it may. */
export function forbiddenAddress(address: string): string | null {
  const family = isIP(address);
  if (family === 4)
    return FORBIDDEN.check(address, 'ipv4') ? `${address} is a private or reserved address` : null;
  if (family !== 6) return `${address} is not an IP address`;
  const carried = embeddedIpv4(address);
  if (carried) return forbiddenAddress(carried) ? `${address} carries the private address ${carried}` : null;
  return FORBIDDEN.check(address, 'ipv6') ? `${address} is a private or reserved address` : null;
}

class RefusedAddress extends Error {}

/**
 * The recorded reason of a refusal: names the host, never the addresses it resolved to (the delivery
 * log is shown to the organization, and internal addresses are none of its business).
 */
function refusalOf(host: string, addresses: number): string {
  return addresses === 0
    ? `${host} has no address`
    : `${host} resolves only to private or reserved addresses`;
}

/**
 * Sends alerts over HTTPS, one POST per attempt. The receiver's name is resolved at every attempt and
 * each address checked (unless private networks are allowed); the connection goes to an address that
 * passed, through the request's own `lookup`, so a DNS answer cannot change between the check and the
 * connection (rebinding). Redirects are never followed; certificates are always verified.
 */
export function httpsAlertSender(options: HttpsAlertSenderOptions): AlertSender {
  const resolve =
    options.resolve ?? ((hostname: string) => dnsLookup(hostname, { all: true, verbatim: true }));
  /**
   * Connections are kept between attempts (a TLS handshake per message cost more than the rest of an
   * attempt; bench/alert-fanout.bench.ts). No limit per origin: many endpoints may share one host, and
   * a silent one must not queue the others behind its connections (the worker bounds concurrency).
   * A new connection goes only to addresses `checkedLookup` passed; the name is also checked again
   * before every attempt, so a receiver whose name now points inside is refused even on a kept connection.
   */
  const agent = new Agent({ keepAlive: true, maxFreeSockets: 8, timeout: 30_000, scheduling: 'lifo' });

  /** Why the name may not be reached now (every address it resolves to is forbidden), or null. */
  const checkName = async (host: string): Promise<string | null> => {
    if (options.allowPrivateNetworks || isIP(host)) return null;
    try {
      const addresses = await resolve(host);
      if (addresses.some((entry) => forbiddenAddress(entry.address) === null)) return null;
      return refusalOf(host, addresses.length);
    } catch {
      return null; // the connection's own lookup reports it
    }
  };

  // Built once: a `ca` option on each request would parse every root certificate again per connection
  // (about 25 ms of CPU each; bench/alert-fanout.bench.ts).
  const secureContext = options.extraCa
    ? createSecureContext({ ca: [...rootCertificates, options.extraCa] })
    : undefined;

  /** Resolves and checks; only permitted addresses are handed to the connection. */
  const checkedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const permitted = options.allowPrivateNetworks
          ? addresses
          : addresses.filter((entry) => forbiddenAddress(entry.address) === null);
        const chosen = permitted[0];
        if (!chosen) {
          callback(new RefusedAddress(refusalOf(hostname, addresses.length)), '', 4);
          return;
        }
        // Every address offered passed the check (the connection may try them in turn).
        if (lookupOptions.all)
          callback(
            null,
            permitted.map(({ address, family }) => ({ address, family })),
          );
        else callback(null, chosen.address, chosen.family);
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, '', 4),
    );
  };

  return {
    send: ({ url, headers, body }) => {
      const started = performance.now();
      const elapsed = () => performance.now() - started;
      const target = new URL(url);
      const host = target.hostname.replace(/^\[|\]$/g, '');
      // A literal address is never looked up: check it here.
      if (isIP(host) && !options.allowPrivateNetworks) {
        const reason = forbiddenAddress(host);
        if (reason)
          return Promise.resolve({ kind: 'no-answer', reason: 'refused', error: reason, durationMs: 0 });
      }
      // One deadline for the whole attempt, name resolution included.
      const signal = AbortSignal.timeout(options.timeoutMs);
      const timedOut = new Promise<'timeout'>((resolve) =>
        signal.addEventListener('abort', () => resolve('timeout'), { once: true }),
      );
      return Promise.race([checkName(host), timedOut]).then((refusal) => {
        if (refusal === 'timeout') {
          return {
            kind: 'no-answer',
            reason: 'timeout',
            error: `no answer within ${options.timeoutMs} ms`,
            durationMs: elapsed(),
          };
        }
        if (refusal) return { kind: 'no-answer', reason: 'refused', error: refusal, durationMs: elapsed() };
        return attempt();
      });

      function attempt(): Promise<AttemptResult> {
        return new Promise<AttemptResult>((settle) => {
          const outgoing = request(
            <RequestOptions & { secureContext?: SecureContext }>{
              protocol: 'https:',
              hostname: host,
              port: target.port || 443,
              path: `${target.pathname}${target.search}`,
              method: 'POST',
              headers: {
                ...headers,
                'content-length': Buffer.byteLength(body),
                'user-agent': 'sts-alerts/1',
              },
              lookup: checkedLookup,
              secureContext,
              signal,
              agent,
            },
            (response) => {
              let read = 0;
              response.on('data', (chunk: Buffer) => {
                read += chunk.length;
                if (read > MAX_ANSWER_BYTES) response.destroy();
              });
              const answered = () =>
                settle({
                  kind: 'answered',
                  status: response.statusCode ?? 0,
                  durationMs: elapsed(),
                  retryAfter:
                    typeof response.headers['retry-after'] === 'string'
                      ? response.headers['retry-after']
                      : null,
                });
              response.once('end', answered);
              response.once('close', answered);
              response.once('error', answered);
            },
          );
          outgoing.once('error', (error: Error) => {
            if (error instanceof RefusedAddress || error.cause instanceof RefusedAddress) {
              settle({ kind: 'no-answer', reason: 'refused', error: error.message, durationMs: elapsed() });
            } else if (error.name === 'AbortError' || error.name === 'TimeoutError') {
              settle({
                kind: 'no-answer',
                reason: 'timeout',
                error: `no answer within ${options.timeoutMs} ms`,
                durationMs: elapsed(),
              });
            } else {
              settle({ kind: 'no-answer', reason: 'network', error: error.message, durationMs: elapsed() });
            }
          });
          outgoing.end(body);
        });
      }
    },
  };
}
