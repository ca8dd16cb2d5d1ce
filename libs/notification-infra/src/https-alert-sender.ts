import { lookup as dnsLookup } from 'node:dns/promises';
import { Agent, request, type RequestOptions } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import ipaddr from 'ipaddr.js';
import type { AttemptResult } from '@sts/notification-domain/alert-delivery-policy';
import type { AlertSender } from '@sts/notification-domain/notification-ports';
import { inNetworks, IPV4_COMPATIBLE, NAT64_WELL_KNOWN, type PrivateNetworks } from './private-networks';

export interface HttpsAlertSenderOptions {
  /** The whole attempt (DNS, connection, TLS, answer) at most. */
  timeoutMs: number;
  /**
   * ALERT_ALLOW_PRIVATE_NETWORKS: `true` lets deliveries reach forbidden addresses (tests); a list of
   * networks (CIDRs), only the forbidden addresses in them (on-premises receivers). Read at every attempt.
   */
  allowPrivateNetworks: PrivateNetworks;
  /** PEM certificates trusted besides the public roots (a private CA). */
  extraCa?: string;
  /** Name resolution (every address of a name); the system resolver unless replaced. */
  resolve?: (hostname: string) => Promise<{ address: string; family: number }[]>;
}

/** Bytes of a receiver's answer read (and thrown away) at most: only the status matters. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * Whether a delivery must never reach the address (unless private networks are allowed). Only global
 * unicast passes: ipaddr.js's table of special-purpose ranges (IANA's registries: this host, private and
 * shared networks, link-local with cloud metadata at 169.254.169.254, multicast, reserved, documentation,
 * benchmarking, unique-local, site-local, discard, 6to4, Teredo, local-use NAT64…) decides, not a list of
 * ours. IPv4-mapped and NAT64 (64:ff9b::/96) addresses, the ways an IPv4 receiver is reached over IPv6,
 * are judged as the IPv4 address they carry; the other forms that embed one (IPv4-compatible,
 * IPv4-translated, 6to4, Teredo, local-use NAT64 64:ff9b:1::/48) are refused whatever it is.
 */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  if (family === 6 && IPV4_COMPATIBLE.check(address, 'ipv6')) return true;
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return true;
  }
  const range = parsed.range();
  if (range === 'unicast') return false;
  if (parsed instanceof ipaddr.IPv6 && (range === 'ipv4Mapped' || parsed.match(NAT64_WELL_KNOWN)))
    return isForbiddenAddress(parsed.toByteArray().slice(12).join('.'));
  return true;
}

/**
 * No address the delivery may go to: the name does not resolve, or only to forbidden addresses. Both are
 * one case on purpose (the delivery log must not tell an unknown name from an internal one).
 */
class NotAllowed extends Error {}

/** Node's codes for a certificate that does not verify, or a TLS handshake that failed. */
const TLS_FAILURE =
  /^(ERR_SSL_|ERR_TLS_)|CERT|SELF_SIGNED|UNABLE_TO_|INVALID_CA|PATH_LENGTH_EXCEEDED|INVALID_PURPOSE|HOSTNAME_MISMATCH/;

/**
 * What a setting of ALERT_ALLOW_PRIVATE_NETWORKS lets a delivery reach: every address (`true`), or the
 * addresses that are not forbidden and, of the forbidden ones, those in the listed networks.
 */
function permittedBy(setting: PrivateNetworks): 'all' | ((address: string) => boolean) {
  if (setting === true) return 'all';
  if (setting === false) return (address) => !isForbiddenAddress(address);
  const listed = inNetworks(setting);
  return (address) => !isForbiddenAddress(address) || listed(address);
}

/**
 * Sends alerts over HTTPS, one POST per attempt. The receiver's name is resolved at every attempt and
 * each address checked (unless every private network is allowed; a list of networks lets through only
 * the forbidden addresses in them); the connection goes to an address that passed, through the request's
 * own `lookup`, so a DNS answer cannot change between the check and the connection (rebinding). Redirects
 * are never followed; certificates are always verified.
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

  /** The check of the setting as it is now (kept while the setting is the same value). */
  let policy: { setting: PrivateNetworks; permitted: ReturnType<typeof permittedBy> } | undefined;
  const permitted = () => {
    if (policy?.setting !== options.allowPrivateNetworks)
      policy = {
        setting: options.allowPrivateNetworks,
        permitted: permittedBy(options.allowPrivateNetworks),
      };
    return policy.permitted;
  };

  /** Whether the name resolves now to an address that may be reached. */
  const mayReach = async (host: string): Promise<boolean> => {
    const check = permitted();
    if (check === 'all' || isIP(host)) return true;
    try {
      const addresses = await resolve(host);
      return addresses.some((entry) => check(entry.address));
    } catch {
      return false; // a name that does not resolve reads as one that resolves inside
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
        const check = permitted();
        const passed = check === 'all' ? addresses : addresses.filter((entry) => check(entry.address));
        const chosen = passed[0];
        if (!chosen) {
          callback(new NotAllowed(), '', 4);
          return;
        }
        // Every address offered passed the check (the connection may try them in turn).
        if (lookupOptions.all)
          callback(
            null,
            passed.map(({ address, family }) => ({ address, family })),
          );
        else callback(null, chosen.address, chosen.family);
      },
      () => callback(new NotAllowed(), '', 4),
    );
  };

  return {
    send: ({ url, headers, body }) => {
      const started = performance.now();
      const elapsed = () => performance.now() - started;
      const target = new URL(url);
      const host = target.hostname.replace(/^\[|\]$/g, '');
      // A literal address is never looked up: check it here.
      const check = permitted();
      if (isIP(host) && check !== 'all' && !check(host))
        return Promise.resolve({ kind: 'no-answer', reason: 'not-allowed', durationMs: 0 });
      // One deadline for the whole attempt, name resolution included.
      const signal = AbortSignal.timeout(options.timeoutMs);
      const timedOut = new Promise<'timeout'>((resolve) =>
        signal.addEventListener('abort', () => resolve('timeout'), { once: true }),
      );
      return Promise.race([mayReach(host), timedOut]).then((reachable) => {
        if (reachable === 'timeout') return { kind: 'no-answer', reason: 'timeout', durationMs: elapsed() };
        if (!reachable) return { kind: 'no-answer', reason: 'not-allowed', durationMs: elapsed() };
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
          outgoing.once('error', (error: NodeJS.ErrnoException) => {
            // Classes only: the error's own message (names, addresses) stays out of the delivery log.
            const reason =
              error instanceof NotAllowed || error.cause instanceof NotAllowed
                ? 'not-allowed'
                : error.name === 'AbortError' || error.name === 'TimeoutError'
                  ? 'timeout'
                  : TLS_FAILURE.test(error.code ?? '')
                    ? 'tls'
                    : 'network';
            settle({ kind: 'no-answer', reason, durationMs: elapsed() });
          });
          outgoing.end(body);
        });
      }
    },
  };
}
