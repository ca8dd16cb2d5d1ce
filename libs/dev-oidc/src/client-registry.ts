import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { generateSecret, hashSecret } from '@sts/crypto/secrets';
import { isRole, ROLES, type Role } from '@sts/vocabulary/roles';

/**
 * Machine clients of the development identity provider and the JSON file that holds them, shared by
 * the provider (which re-reads the file on every token request) and the `client add` CLI.
 *
 * File shape: `{ "clients": [{ "clientId", "clientSecretSha256", "orgId", "role"?, "createdAt" }] }`.
 * Only the SHA-256 of a secret is stored; a hand-edited entry may give `clientSecret` in plain text instead.
 */

export interface StoredClient {
  readonly clientId: string;
  /** Hex SHA-256 of the client secret. */
  readonly clientSecretSha256: string;
  readonly orgId: string;
  readonly role?: Role;
  readonly createdAt?: string;
}

export interface ClientRegistration {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly orgId: string;
  readonly role?: Role;
}

export const CLIENT_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

export function generateClientId(): string {
  return `dev_${randomBytes(12).toString('hex')}`;
}

export function generateClientSecret(): string {
  return generateSecret('sts_dev_cs');
}

export function toStoredClient(registration: ClientRegistration): StoredClient {
  assertRegistration(registration);
  return {
    clientId: registration.clientId,
    clientSecretSha256: hashSecret(registration.clientSecret),
    orgId: registration.orgId,
    ...(registration.role ? { role: registration.role } : {}),
    createdAt: new Date().toISOString(),
  };
}

function assertRegistration(registration: ClientRegistration): void {
  if (!CLIENT_ID_PATTERN.test(registration.clientId)) {
    throw new Error('client id must be 1-128 characters of letters, digits, ".", "_" or "-"');
  }
  if (registration.clientSecret.length < 16) throw new Error('client secret must be at least 16 characters');
  if (registration.orgId.trim().length === 0) throw new Error('organization id must not be empty');
  if (registration.role !== undefined && !isRole(registration.role)) {
    throw new Error(`role must be one of ${ROLES.join(', ')}`);
  }
}

/** The clients of a file; none when it does not exist. Malformed entries are skipped. */
export async function readClientsFile(path: string): Promise<StoredClient[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  if (text.trim() === '') return [];
  const parsed = JSON.parse(text) as unknown;
  const entries = Array.isArray(parsed) ? parsed : (parsed as { clients?: unknown } | null)?.clients;
  if (!Array.isArray(entries)) throw new Error(`${path}: expected {"clients": [...]}`);
  return entries.flatMap((entry: unknown) => {
    const client = parseEntry(entry);
    return client ? [client] : [];
  });
}

function parseEntry(entry: unknown): StoredClient | undefined {
  if (typeof entry !== 'object' || entry === null) return undefined;
  const record = entry as Record<string, unknown>;
  const { clientId, orgId, role, createdAt } = record;
  if (typeof clientId !== 'string' || typeof orgId !== 'string' || orgId.length === 0) return undefined;
  if (role !== undefined && !isRole(role)) return undefined;
  let clientSecretSha256: string;
  if (
    typeof record['clientSecretSha256'] === 'string' &&
    /^[0-9a-f]{64}$/i.test(record['clientSecretSha256'])
  ) {
    clientSecretSha256 = record['clientSecretSha256'].toLowerCase();
  } else if (typeof record['clientSecret'] === 'string' && record['clientSecret'].length > 0) {
    clientSecretSha256 = hashSecret(record['clientSecret']);
  } else {
    return undefined;
  }
  return {
    clientId,
    clientSecretSha256,
    orgId,
    ...(role ? { role } : {}),
    ...(typeof createdAt === 'string' ? { createdAt } : {}),
  };
}

/**
 * Adds a client to the file (created with its directory when missing, written atomically, mode 0600)
 * and returns its credentials; the secret is not stored and cannot be shown again.
 */
export async function addClientToFile(
  path: string,
  input: { orgId: string; role?: Role; clientId?: string; clientSecret?: string },
): Promise<ClientRegistration> {
  const registration: ClientRegistration = {
    clientId: input.clientId ?? generateClientId(),
    clientSecret: input.clientSecret ?? generateClientSecret(),
    orgId: input.orgId,
    ...(input.role ? { role: input.role } : {}),
  };
  const stored = toStoredClient(registration);
  const clients = await readClientsFile(path);
  if (clients.some((client) => client.clientId === registration.clientId)) {
    throw new Error(`client ${registration.clientId} already exists in ${path}`);
  }
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temporary, `${JSON.stringify({ clients: [...clients, stored] }, null, 2)}\n`, {
    mode: 0o600,
  });
  await rename(temporary, path);
  return registration;
}
