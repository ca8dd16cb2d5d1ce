import { parseArgs } from 'node:util';
import { ConfigError } from '@sts/config/load-config';
import { addClientToFile, CLIENT_ID_PATTERN } from '@sts/dev-oidc/client-registry';
import { isRole, ROLES } from '@sts/vocabulary/roles';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { loadDevIdpConfig } from './dev-idp-config';

export const USAGE = `Development tokens for the security telemetry service (dev-idp).

Usage:
  npm run token -- token <email> [--name NAME] [--expires-in SECONDS] [--unverified]
      Print a user access token (signed with the dev-idp key; the server need not run).
  npm run token -- client add --org ORG_ID [--role ${ROLES.join('|')}] [--id CLIENT_ID]
      Register a machine client with the dev-idp (picked up while it runs) and print its
      credentials and a curl command for POST /oauth/token.
  npm run token -- --help

Environment (same as dev-idp): DEV_IDP_PORT (4400), DEV_IDP_ISSUER (http://127.0.0.1:$DEV_IDP_PORT),
OIDC_AUDIENCE (https://api.security-telemetry.local), DEV_IDP_DATA_DIR (.dev/idp).
`;

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
}

class UsageError extends Error {}

const DEFAULT_USER_TOKEN_SECONDS = 24 * 3600;

/** Runs the CLI; resolves with the process exit code. */
export async function runCli(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  io: CliIo,
): Promise<number> {
  try {
    const { values, positionals } = parseArguments(argv);
    const [command, ...rest] = positionals;
    if (values.help || command === undefined || command === 'help') {
      io.out(USAGE);
      return command === undefined && !values.help ? 2 : 0;
    }
    const config = loadDevIdpConfig(env); // refuses NODE_ENV=production

    // `npm run token -- ada@example.com` is short for `token ada@example.com`.
    const [verb, args] = command.includes('@') ? ['token', [command, ...rest]] : [command, rest];
    switch (verb) {
      case 'token': {
        const [email, ...extra] = args;
        if (!email || extra.length > 0 || !/^[^@\s]+@[^@\s]+$/.test(email)) {
          throw new UsageError('token needs exactly one e-mail address');
        }
        const expiresIn =
          values['expires-in'] === undefined ? DEFAULT_USER_TOKEN_SECONDS : Number(values['expires-in']);
        if (!Number.isInteger(expiresIn) || expiresIn <= 0)
          throw new UsageError('--expires-in must be a positive integer');
        const provider = await DevOidcProvider.create({
          issuer: config.issuer,
          audience: config.audience,
          keyFile: config.keyFile,
        });
        io.out(
          await provider.issueUserToken({
            email,
            expiresIn,
            emailVerified: !values.unverified,
            ...(values.name ? { name: values.name } : {}),
          }),
        );
        return 0;
      }
      case 'client': {
        if (args[0] !== 'add' || args.length !== 1)
          throw new UsageError('the client command is "client add --org ORG_ID"');
        const orgId = values.org?.trim();
        if (!orgId) throw new UsageError('client add needs --org ORG_ID');
        if (values.role !== undefined && !isRole(values.role)) {
          throw new UsageError(`--role must be one of ${ROLES.join(', ')}`);
        }
        if (values.id !== undefined && !CLIENT_ID_PATTERN.test(values.id)) {
          throw new UsageError('--id may hold letters, digits, ".", "_" and "-" (at most 128)');
        }
        const client = await addClientToFile(config.clientsFile, {
          orgId,
          ...(values.role ? { role: values.role } : {}),
          ...(values.id ? { clientId: values.id } : {}),
        });
        const tokenEndpoint = `${config.issuer.replace(/\/+$/, '')}/oauth/token`;
        const body = JSON.stringify({
          client_id: client.clientId,
          client_secret: client.clientSecret,
          audience: config.audience,
          grant_type: 'client_credentials',
        });
        io.out(`client_id:     ${client.clientId}`);
        io.out(`client_secret: ${client.clientSecret}`);
        io.out(`org_id:        ${client.orgId}`);
        io.out(`role:          ${client.role ?? 'ANALYST (default)'}`);
        io.out('');
        io.out('The secret is shown once; only its hash is stored. Get an access token with:');
        io.out(
          `curl -sS -X POST ${shellQuote(tokenEndpoint)} -H 'content-type: application/json' -d ${shellQuote(body)}`,
        );
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${verb}"`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    if (error instanceof ConfigError) {
      io.err(error.message);
      return 1;
    }
    io.err(error instanceof Error ? error.message : String(error));
    return 1;
  }
}

function parseArguments(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        help: { type: 'boolean', short: 'h' },
        name: { type: 'string' },
        'expires-in': { type: 'string' },
        unverified: { type: 'boolean' },
        org: { type: 'string' },
        role: { type: 'string' },
        id: { type: 'string' },
      },
    });
  } catch (error) {
    // Unknown or malformed options (ERR_PARSE_ARGS_*).
    // Checked by shape: jest runs code in another realm, where `instanceof TypeError` fails.
    const message = (error as { message?: unknown } | null)?.message;
    throw new UsageError(typeof message === 'string' ? message : String(error));
  }
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

if (require.main === module) {
  runCli(process.argv.slice(2), process.env, {
    out: (line) => console.log(line),
    err: (line) => console.error(line),
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
