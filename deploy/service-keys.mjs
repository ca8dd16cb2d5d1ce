#!/usr/bin/env node
// The keys of the tokens the services present to each other (docs/decisions.md, "Trust between services"):
// a new Ed25519 key pair per calling service, printed as KEY=value lines,
//   SERVICE_SIGNING_KEY_GATEWAY, SERVICE_SIGNING_KEY_NOTIFICATION  each caller's private key (PKCS#8, base64),
//                                                                  for that service alone
//   SERVICE_TRUSTED_KEYS                                           their public keys by name (SPKI, base64),
//                                                                  for every service
// for deploy/.env (Compose) or the Secret sts-secrets (Kubernetes; deploy/README.md):
//   node deploy/service-keys.mjs >> deploy/.env
// Runs with Node alone (no dependencies).
import { generateKeyPairSync } from 'node:crypto';

/** The processes that call services over gRPC, and so sign tokens. */
const CALLERS = ['gateway', 'notification'];

const trusted = [];
for (const caller of CALLERS) {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const secret = privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64');
  process.stdout.write(`SERVICE_SIGNING_KEY_${caller.toUpperCase()}=${secret}\n`);
  trusted.push(`${caller}=${publicKey.export({ format: 'der', type: 'spki' }).toString('base64')}`);
}
process.stdout.write(`SERVICE_TRUSTED_KEYS=${trusted.join(',')}\n`);
