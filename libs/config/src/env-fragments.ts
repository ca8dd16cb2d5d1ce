import { z } from 'zod';
import { httpsInProduction, loopbackHttpEnv } from './https-in-production';
import { parseSigningKey, parseTrustedKeys, reasonOf } from './service-keys';

/**
 * Environment variables shared by several apps, each defined once. An app composes the fragments it
 * needs: `loadConfig(z.object({ ...commonEnv, ...postgresEnv }))`. Names listed in DESIGN.md
 * section 5 are relied on by tooling outside the project and must not change.
 */

const url = (protocols: string[]) =>
  z.string().refine(
    (value) => {
      try {
        return protocols.includes(new URL(value).protocol);
      } catch {
        return false;
      }
    },
    `must be a URL with scheme ${protocols.join(' or ')}`,
  );

const port = z.coerce.number().int().min(0).max(65535);

export const commonEnv = {
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
};

export const postgresEnv = {
  DATABASE_URL: url(['postgres:', 'postgresql:']).default('postgresql://postgres@127.0.0.1:5432/sts'),
};

/** One URL, or several separated by commas (the servers of a cluster). */
const urlList = (protocols: string[]) =>
  z.string().refine(
    (value) =>
      value.split(',').every((item) => {
        try {
          return protocols.includes(new URL(item.trim()).protocol);
        } catch {
          return false;
        }
      }),
    `must be a URL with scheme ${protocols.join(' or ')}, or several separated by commas`,
  );

export const natsEnv = {
  /** The NATS server, or the servers of a NATS cluster separated by commas (the client rides out a node's loss). */
  NATS_URL: urlList(['nats:', 'tls:']).default('nats://127.0.0.1:4222'),
  /**
   * Copies a NATS cluster keeps of every stream and key-value bucket (1 on a single server; 3 on a
   * three-node cluster). Whoever makes or updates a stream or bucket uses it.
   */
  NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /**
   * How long a process waits at start for JetStream to answer (a restarted cluster elects its meta leader,
   * then each stream's) before it fails, naming what it waited for.
   */
  NATS_READY_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(120_000),
  /** Prefix of stream names and subjects, so that test runs (or tenants of one NATS) stay apart. */
  NATS_NAMESPACE: z
    .string()
    .regex(/^[a-z][a-z0-9_]{0,31}$/, 'lowercase letters, digits and _, starting with a letter')
    .default('sts'),
};

/**
 * The telemetry stream and its analytics consumer: read by the analytics service (which takes the
 * batches) and by nats-setup (which makes the stream and the consumer with these settings).
 */
export const telemetryStreamEnv = {
  /** Telemetry batches handed to ClickHouse together at most. */
  TELEMETRY_BATCH_MESSAGES: z.coerce.number().int().positive().default(200),
  /**
   * A batch pulled but not acknowledged in this time goes to another process (the holder is kept
   * alive while it works, so this is how long a crashed process's batches wait).
   */
  TELEMETRY_ACK_WAIT_MS: z.coerce.number().int().min(1_000).max(600_000).default(60_000),
  /**
   * Bytes the telemetry stream may hold before the gateway is refused (503). Always a cap: one device
   * token must not be able to fill the NATS server's disk. Default 8 GiB.
   */
  TELEMETRY_STREAM_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024, 'must be at least 1048576 (1 MiB): the stream always has a cap')
    .default(8 * 1024 ** 3),
};

/**
 * Mutual TLS between the services: PEM files of the CA, this process's certificate (server and client
 * use) and its key. All three or none (plaintext: one host, development).
 */
export const grpcTlsEnv = {
  GRPC_TLS_CA_FILE: z.string().min(1).optional(),
  GRPC_TLS_CERT_FILE: z.string().min(1).optional(),
  GRPC_TLS_KEY_FILE: z.string().min(1).optional(),
};

/** The values of `OTEL_TRACES_SAMPLER` that OpenTelemetry's JavaScript SDK implements. */
export const TRACES_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TracesSamplerName = (typeof TRACES_SAMPLERS)[number];
/** OpenTelemetry's default: a trace's root decides, and every new trace is recorded. */
export const DEFAULT_TRACES_SAMPLER: TracesSamplerName = 'parentbased_always_on';

/**
 * Metrics and traces (every process). `METRICS_PORT` unset: no metrics endpoint. No OTLP endpoint:
 * no tracing. The `OTEL_*` names are OpenTelemetry's own, and mean what its specification says, but
 * for one thing: a span whose parent sampling left out is never recorded, whatever the sampler
 * (trace-context.ts). The OTLP exporter also reads `OTEL_EXPORTER_OTLP_HEADERS` itself; the span batching's
 * `OTEL_BSP_*` are read here and passed to the span processor, which does not read them.
 */
export const observabilityEnv = {
  METRICS_PORT: port.optional(),
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  OTEL_EXPORTER_OTLP_ENDPOINT: url(['http:', 'https:']).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(['http:', 'https:']).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  OTEL_TRACES_SAMPLER: z.enum(TRACES_SAMPLERS).default(DEFAULT_TRACES_SAMPLER),
  /** The ratio of the `traceidratio` samplers; 1 when absent. */
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
  /** Milliseconds between two exports of the batched spans (the SDK's default: 5000). */
  OTEL_BSP_SCHEDULE_DELAY: z.coerce.number().int().min(0).optional(),
  /** Milliseconds an export may take (30000). */
  OTEL_BSP_EXPORT_TIMEOUT: z.coerce.number().int().min(1).optional(),
  /** Spans held for export at most; more are dropped (2048). */
  OTEL_BSP_MAX_QUEUE_SIZE: z.coerce.number().int().min(1).optional(),
  /** Spans in one export at most (512); not over the queue size. */
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: z.coerce.number().int().min(1).optional(),
};

/** A zod string turned into a key by `parse`, or one issue with `what` and the reason. */
const keyVariable = <Key>(parse: (text: string) => Key, what: string) =>
  z.string().transform((value, context): Key => {
    try {
      return parse(value);
    } catch (error) {
      context.issues.push({
        code: 'custom',
        input: '(not shown)',
        message: `must be ${what}: ${reasonOf(error)}`,
      });
      return z.NEVER;
    }
  });

/**
 * The private key (Ed25519, PKCS#8, base64 of the DER bytes or PEM) with which this process signs the
 * service tokens it presents on its gRPC calls (@sts/grpc/service-token): its own, held by no other
 * process. Only the processes that call services have one (the gateway, notification).
 */
export const serviceSigningEnv = {
  SERVICE_SIGNING_KEY: keyVariable(parseSigningKey, 'an Ed25519 private key (PKCS#8, base64 or PEM)'),
};

/**
 * The public keys of the services allowed to call this one, by name:
 * `gateway=<base64 SPKI>,notification=<base64 SPKI>` (a name twice while its key is rotated). A token
 * is accepted only when the key of the service it names (`sub`) verifies it.
 */
const serviceTrustEnv = {
  SERVICE_TRUSTED_KEYS: keyVariable(
    parseTrustedKeys,
    '<service>=<Ed25519 public key>, comma-separated (SPKI, base64 or PEM)',
  ),
};

export const grpcServerEnv = {
  ...serviceTrustEnv,
  ...grpcTlsEnv,
  ...observabilityEnv,
  GRPC_HOST: z.string().default('127.0.0.1'),
  GRPC_PORT: port,
  /**
   * `run`: apply pending migrations at start (one process at a time; development, single host).
   * `only`: apply them and exit 0 (a release's migration job). `check`: refuse to start while any is
   * pending (replicas of a release whose job migrates).
   */
  MIGRATIONS: z.enum(['run', 'only', 'check']).default('run'),
};

/** Addresses of the gRPC services, `host:port`, and the key that signs the tokens presented to them. */
export const grpcClientsEnv = {
  ...serviceSigningEnv,
  ...grpcTlsEnv,
  IDENTITY_GRPC_ADDRESS: z.string().default('127.0.0.1:50051'),
  NOTIFICATION_GRPC_ADDRESS: z.string().default('127.0.0.1:50052'),
  BILLING_GRPC_ADDRESS: z.string().default('127.0.0.1:50053'),
  ENROLLMENT_GRPC_ADDRESS: z.string().default('127.0.0.1:50054'),
  ANALYTICS_GRPC_ADDRESS: z.string().default('127.0.0.1:50055'),
  GRPC_DEADLINE_MS: z.coerce.number().int().min(50).max(60_000).default(5_000),
};

/** The web dashboard's public client id at the identity provider (DESIGN.md section 5). */
export const dashboardClientEnv = {
  DASHBOARD_OIDC_CLIENT_ID: z.string().min(1).max(200).default('sts-dashboard'),
};

/** The trusted identity tenant; its issuer and keys are https with NODE_ENV=production (`httpsInProduction`). */
export const oidcEnv = {
  OIDC_ISSUER: httpsInProduction(url(['https:', 'http:'])),
  OIDC_AUDIENCE: z.string().min(1),
  /** Defaults to `${OIDC_ISSUER}/.well-known/jwks.json`. */
  OIDC_JWKS_URL: httpsInProduction(url(['https:', 'http:'])).optional(),
  ...loopbackHttpEnv,
  /** Claim that names the organization of a client-credentials token. */
  OIDC_ORG_CLAIM: z.string().min(1).default('org_id'),
  /** Claim that names the role of a client-credentials token (least privilege when absent). */
  OIDC_ROLE_CLAIM: z.string().min(1).default('role'),
  OIDC_ALGORITHMS: z
    .string()
    .default('RS256,ES256,PS256,EdDSA')
    .transform((value) =>
      value
        .split(',')
        .map((alg) => alg.trim())
        .filter(Boolean),
    ),
  /** A user's e-mail counts as verified only with `email_verified: true`; `false` lets an absent claim count. */
  OIDC_REQUIRE_EMAIL_VERIFIED: z.stringbool().default(true),
  /** Client ids (`azp`/`client_id`) whose tokens are machine tokens, for providers that send no `gty`. */
  OIDC_CLIENT_IDS: z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(',')
        .map((id) => id.trim())
        .filter(Boolean),
    ),
  /** Longest accepted token lifetime (`exp - iat`). */
  OIDC_MAX_TOKEN_LIFETIME_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(30 * 86_400)
    .default(86_400),
};

export const smtpEnv = {
  SMTP_URL: url(['smtp:', 'smtps:']).default('smtp://127.0.0.1:1025'),
  MAIL_FROM: z.string().min(3).default('Security Telemetry <no-reply@localhost>'),
};

/**
 * 32-byte key (base64) that seals secrets which must travel to be e-mailed (invite tokens,
 * enrollment codes) while they sit in an outbox or a stream. Shared by producers and the notifier.
 */
export const sealingEnv = {
  SECRET_SEALING_KEY: z
    .string()
    .refine((value) => Buffer.from(value, 'base64').length === 32, 'must be 32 bytes, base64-encoded'),
};

/** Where people open links from e-mails (the dashboard). */
export const publicUrlEnv = {
  PUBLIC_APP_URL: url(['https:', 'http:']).default('http://localhost:8080'),
};

/** ClickHouse HTTP interface (analytics). Credentials and a database may be given in the URL. */
export const clickhouseEnv = {
  CLICKHOUSE_URL: url(['http:', 'https:']).default('http://127.0.0.1:8123'),
};

/** Stripe (billing). Without the keys, billing's payment endpoints answer 503 and the rest works. */
export const stripeEnv = {
  /** Secret or restricted API key (`sk_…`, `rk_…`): checkout, portal, and the facts webhooks lack. */
  STRIPE_SECRET_KEY: z
    .string()
    .regex(/^(sk|rk)_\w+$/, 'must be a Stripe secret or restricted key (sk_… or rk_…)')
    .optional(),
  /** The webhook endpoint's signing secret (`whsec_…`). */
  STRIPE_WEBHOOK_SECRET: z
    .string()
    .regex(/^whsec_\S+$/, 'must be a webhook signing secret (whsec_…)')
    .optional(),
  /** Where the Stripe SDK sends its requests: a local stand-in elsewhere (https with NODE_ENV=production). */
  STRIPE_API_BASE: httpsInProduction(url(['https:', 'http:'])).default('https://api.stripe.com'),
  ...loopbackHttpEnv,
  /** How long one request to Stripe may take (tried at most twice, within the gateway's 15 s for billing calls). */
  STRIPE_TIMEOUT_MS: z.coerce.number().int().min(100).max(7_000).default(5_000),
};
