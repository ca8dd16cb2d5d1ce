/**
 * Writes the configuration of the project's own NATS server for `npm start`: JetStream, and one user
 * per service allowed to publish only its own events (@sts/nats/nats-permissions). Passwords are
 * generated once into DIR/passwords.json (owner-only) and kept.
 *
 *   tsx scripts/nats-config.ts DIR PORT NAMESPACE
 *   prints nothing; DIR/nats.conf and DIR/passwords.json exist afterwards.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NATS_ADMIN_USER, natsAuthorizationConfig } from '@sts/nats/nats-permissions';
import { SERVICE_NAMES } from '@sts/vocabulary/services';

const [dir, port, namespace] = process.argv.slice(2);
if (!dir || !port || !namespace) throw new Error('usage: nats-config.ts DIR PORT NAMESPACE');
mkdirSync(dir, { recursive: true, mode: 0o700 });

const passwordsFile = join(dir, 'passwords.json');
const users = [...SERVICE_NAMES, NATS_ADMIN_USER];
const kept = existsSync(passwordsFile)
  ? (JSON.parse(readFileSync(passwordsFile, 'utf8')) as Record<string, string>)
  : {};
const passwords = Object.fromEntries(
  users.map((user) => [user, kept[user] ?? randomBytes(24).toString('base64url')]),
);
writeFileSync(passwordsFile, JSON.stringify(passwords, null, 2), { mode: 0o600 });

writeFileSync(
  join(dir, 'nats.conf'),
  `# Written by scripts/nats-config.ts at every npm start; edit that, not this.
host: 127.0.0.1
port: ${Number(port)}
jetstream { store_dir: ${JSON.stringify(join(dir, 'store'))} }
${natsAuthorizationConfig(namespace, passwords as Parameters<typeof natsAuthorizationConfig>[1])}`,
  { mode: 0o600 },
);
