/**
 * Writes the configuration of the project's own NATS for `npm start`: JetStream, and one user per service
 * allowed to publish only its own events (@sts/nats/nats-permissions). Passwords are generated once into
 * DIR/passwords.json (owner-only) and kept.
 *
 *   tsx scripts/nats-config.ts DIR PORT NAMESPACE           one server: DIR/nats.conf
 *   tsx scripts/nats-config.ts DIR PORT NAMESPACE NODES     a cluster (STS_CLUSTER=1): DIR/n1.conf … nN.conf,
 *                                                           clients on PORT…PORT+N-1, routes on PORT+2000…
 *   prints nothing; the configuration files and DIR/passwords.json exist afterwards.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NATS_ADMIN_USER, natsAuthorizationConfig } from '@sts/nats/nats-permissions';
import { SERVICE_NAMES } from '@sts/vocabulary/services';

const [dir, portArgument, namespace, nodesArgument] = process.argv.slice(2);
if (!dir || !portArgument || !namespace) throw new Error('usage: nats-config.ts DIR PORT NAMESPACE [NODES]');
const port = Number(portArgument);
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
const authorization = natsAuthorizationConfig(
  namespace,
  passwords as Parameters<typeof natsAuthorizationConfig>[1],
);
const header = '# Written by scripts/nats-config.ts at every npm start; edit that, not this.';

if (nodesArgument === undefined) {
  writeFileSync(
    join(dir, 'nats.conf'),
    `${header}
host: 127.0.0.1
port: ${port}
jetstream { store_dir: ${JSON.stringify(join(dir, 'store'))} }
${authorization}`,
    { mode: 0o600 },
  );
} else {
  const nodes = Number(nodesArgument);
  const routePort = (index: number) => port + 2000 + index;
  for (let index = 0; index < nodes; index++) {
    const name = `n${index + 1}`;
    writeFileSync(
      join(dir, `${name}.conf`),
      `${header}
server_name: sts-dev-${name}
host: 127.0.0.1
port: ${port + index}
jetstream { store_dir: ${JSON.stringify(join(dir, name, 'store'))} }
cluster {
  name: sts-dev
  host: 127.0.0.1
  port: ${routePort(index)}
  routes: [${Array.from({ length: nodes }, (_, other) => `nats-route://127.0.0.1:${routePort(other)}`).join(', ')}]
}
${authorization}`,
      { mode: 0o600 },
    );
  }
}
