import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import { analyticsEnvSchema } from '@sts/analytics-infra/analytics-config';
import { billingEnvSchema } from '@sts/billing-infra/billing-config';
import { loadConfig } from '@sts/config/load-config';
import { enrollmentEnvSchema } from '@sts/enrollment-infra/enrollment-config';
import { gatewayEnvSchema } from '@sts/gateway-http/gateway-config';
import { identityEnvSchema } from '@sts/identity-infra/identity-config';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { natsSetupEnvSchema } from '@sts/nats/nats-setup-config';
import { startNatsServer } from '@sts/testing/nats-server';
import { notificationEnvSchema } from '@sts/notification-infra/notification-config';
import { deployNatsAuthConfig } from '../../scripts/nats-deploy-config';

/**
 * deploy/ checked offline (no daemon, no cluster): kustomize renders, every rendered object is valid
 * against the Kubernetes schemas, the production overlay holds the properties a platform team relies on,
 * and docker-compose accepts the compose file only with its secrets given.
 */
const ROOT = join(__dirname, '..', '..');
const SERVICES = ['identity', 'notification', 'billing', 'enrollment', 'analytics'] as const;
const WORKLOADS = [...SERVICES, 'gateway'] as const;
/**
 * Names of variables whose values are secrets: they must come from a Secret, never from a literal. A
 * `_FILE` variable holds the path of a mounted secret, not the secret.
 */
const SECRET_NAME =
  /^(?!.*_FILE$).*(KEY|SECRET|PASSWORD|TOKEN|DATABASE_URL|SMTP_URL|CLICKHOUSE_URL|NATS_URL)/;

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Container {
  name: string;
  image: string;
  env?: EnvVar[];
  envFrom?: unknown[];
  ports?: { name?: string; containerPort: number }[];
  readinessProbe?: { grpc?: { port: number }; httpGet?: { path: string } };
  livenessProbe?: { httpGet?: { path: string }; grpc?: { port: number; service?: string } };
  volumeMounts?: { name: string; mountPath: string }[];
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  securityContext?: Record<string, unknown>;
}
interface PodSpec {
  containers: Container[];
  volumes: { name: string; secret?: { secretName: string } }[];
  initContainers?: Container[];
  securityContext: { runAsNonRoot?: boolean };
  automountServiceAccountToken?: boolean;
}
interface Selector {
  matchLabels?: Record<string, string>;
}
/** The parts of the rendered objects these checks read; the schema check covers the rest. */
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec: {
    replicas?: number;
    template: { metadata?: { annotations?: Record<string, string> }; spec: PodSpec };
    selector: Selector;
    scaleTargetRef: { name: string };
    minReplicas: number;
    podSelector: Selector;
    policyTypes: string[];
    ingress: {
      from?: { podSelector?: Selector; namespaceSelector?: Selector }[];
      ports?: { port: number }[];
    }[];
  };
}

/** Each app's configuration schema: what its process checks at start. */
const SCHEMAS: Record<(typeof WORKLOADS)[number] | 'nats-setup', z.ZodObject> = {
  'nats-setup': natsSetupEnvSchema,
  gateway: gatewayEnvSchema,
  identity: identityEnvSchema,
  notification: notificationEnvSchema,
  billing: billingEnvSchema,
  enrollment: enrollmentEnvSchema,
  analytics: analyticsEnvSchema,
};
/** Values of the right shape for every secret the manifests and compose file name. */
const KEY = Buffer.alloc(32, 7).toString('base64');
/** The services whose schema is in PostgreSQL, each with a role of its own. */
const DATABASE_USERS = ['identity', 'notification', 'billing', 'enrollment'] as const;
/** The processes that call services, each signing its tokens with a key of its own. */
const CALLERS = ['gateway', 'notification'] as const;
/** What `node deploy/service-keys.mjs` prints: a private key per caller, and their public keys by name. */
const SERVICE_KEYS = Object.fromEntries(
  execFileSync(process.execPath, [join(ROOT, 'deploy/service-keys.mjs')], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
) as Record<string, string>;
const SECRET_VALUES: Record<string, string> = {
  ...Object.fromEntries(
    DATABASE_USERS.map((user) => [
      `DATABASE_URL_${user.toUpperCase()}`,
      `postgresql://${user}:secret@postgres:5432/sts`,
    ]),
  ),
  CLICKHOUSE_URL: 'http://sts:secret@clickhouse:8123',
  SMTP_URL: 'smtps://user:secret@smtp.example.com:465',
  ...SERVICE_KEYS,
  SECRET_SEALING_KEY: KEY,
  ENROLLMENT_KEY_ENCRYPTION_KEY: KEY,
  STRIPE_SECRET_KEY: 'sk_live_secret',
  STRIPE_WEBHOOK_SECRET: 'whsec_secret',
  ...Object.fromEntries(
    [...WORKLOADS, 'admin'].map((user) => [
      `NATS_URL_${user.toUpperCase()}`,
      `nats://${user}:secret@nats:4222`,
    ]),
  ),
};
/** The app a container runs, from its image (`…/sts/<app>:tag` or `sts-<app>`). */
/** Why an app would refuse this environment at start; null when it takes it. */
const configProblem = (app: keyof typeof SCHEMAS, env: Record<string, string>) => {
  try {
    loadConfig(SCHEMAS[app], env);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
};
const appOf = (image: string) =>
  image
    .replace(/:[^/]*$/, '')
    .split('/')
    .pop()!
    .replace(/^sts-/, '') as keyof typeof SCHEMAS;

const render = (path: string) =>
  execFileSync('kubectl', ['kustomize', join(ROOT, path)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
const objectsOf = (yaml: string) =>
  parseAllDocuments(yaml)
    .map((document) => document.toJS() as K8sObject)
    .filter(Boolean);
const validate = (yaml: string) =>
  JSON.parse(
    execFileSync(process.execPath, [join(__dirname, 'validate-objects.mjs')], {
      input: yaml,
      encoding: 'utf8',
    }),
  ) as { objects: number; errors: string[] };

describe('deploy/k8s', () => {
  const production = render('deploy/k8s/overlays/production');
  const objects = objectsOf(production);
  const ofKind = (kind: string) => objects.filter((object) => object.kind === kind);
  const named = (kind: string, name: string) => {
    const found = ofKind(kind).find((object) => object.metadata.name === name);
    if (!found) throw new Error(`no ${kind} ${name}`);
    return found;
  };
  const podSpecs = () => [
    ...ofKind('Deployment').map((object) => [object.metadata.name, object.spec.template.spec] as const),
    ...ofKind('Job').map((object) => [object.metadata.name, object.spec.template.spec] as const),
  ];

  it('renders the base and the production overlay into objects valid against the Kubernetes schemas', () => {
    for (const yaml of [render('deploy/k8s/base'), production]) {
      const result = validate(yaml);
      expect(result.errors).toEqual([]);
      expect(result.objects).toBeGreaterThan(20);
    }
    // The check itself rejects what the schemas reject.
    const broken = production.replace('containerPort: 8080', 'containerPort: eighty');
    expect(validate(broken).errors).toEqual([
      expect.stringMatching(/^Deployment\/gateway: .*containerPort must be integer/),
    ]);
  });

  it('runs every service as a Deployment of two or more replicas with probes, resources and a locked-down pod', () => {
    expect(
      ofKind('Deployment')
        .map((object) => object.metadata.name)
        .sort(),
    ).toEqual([...WORKLOADS].sort());
    for (const deployment of ofKind('Deployment')) {
      const name = deployment.metadata.name;
      // Two or more replicas: set here, or (gateway, analytics) left to the autoscaler, whose minimum is 2.
      const autoscaled = ofKind('HorizontalPodAutoscaler').find(
        (hpa) => hpa.spec.scaleTargetRef.name === name,
      );
      if (autoscaled) {
        expect([name, deployment.spec.replicas, autoscaled.spec.minReplicas >= 2]).toEqual([
          name,
          undefined,
          true,
        ]);
      } else {
        expect([name, (deployment.spec.replicas ?? 1) >= 2]).toEqual([name, true]);
      }
      const pod = deployment.spec.template.spec;
      expect([name, pod.securityContext.runAsNonRoot, pod.automountServiceAccountToken]).toEqual([
        name,
        true,
        false,
      ]);
      for (const container of pod.containers) {
        expect([name, Boolean(container.readinessProbe), Boolean(container.livenessProbe)]).toEqual([
          name,
          true,
          true,
        ]);
        for (const bound of ['requests', 'limits'] as const) {
          expect([name, bound, Object.keys(container.resources[bound]).sort()]).toEqual([
            name,
            bound,
            ['cpu', 'memory'],
          ]);
        }
        expect([name, container.securityContext]).toEqual([
          name,
          expect.objectContaining({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false }),
        ]);
        expect(container.image).toMatch(/^registry\.example\.com\/sts\/[a-z]+:1\.0\.0$/);
        // Load balancers stop sending to a terminating pod before it stops serving.
        expect([name, container.lifecycle?.preStop?.exec?.command]).toEqual([name, ['sleep', '5']]);
      }
    }
    // Without TLS (the base), Kubernetes' own gRPC probe asks each service; HTTP for the gateway.
    const base = objectsOf(render('deploy/k8s/base'));
    for (const name of SERVICES) {
      const deployment = base.find(
        (object) => object.kind === 'Deployment' && object.metadata.name === name,
      )!;
      const container = deployment.spec.template.spec.containers[0]!;
      expect([name, container.readinessProbe?.grpc?.port]).toEqual([
        name,
        container.ports?.[0]?.containerPort,
      ]);
      // Alive whatever the dependencies do: a restart would not bring PostgreSQL back.
      expect([name, container.livenessProbe?.grpc?.service]).toEqual([name, 'liveness']);
    }
    // The gateway: ready when NATS and every service answer, alive while it serves HTTP.
    const gateway = named('Deployment', 'gateway').spec.template.spec.containers[0]!;
    expect([gateway.readinessProbe?.httpGet?.path, gateway.livenessProbe?.httpGet?.path]).toEqual([
      '/readyz',
      '/livez',
    ]);
  });

  it('takes configuration from the ConfigMap and every secret from a Secret reference, never a literal', () => {
    expect(ofKind('Secret')).toEqual([]);
    const config = ofKind('ConfigMap');
    expect(config).toHaveLength(1);
    expect(Object.keys(config[0]!.data ?? {}).filter((key) => SECRET_NAME.test(key))).toEqual([]);
    for (const [name, pod] of podSpecs()) {
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        expect([name, container.envFrom]).toEqual([
          name,
          [{ configMapRef: { name: config[0]!.metadata.name } }],
        ]);
        for (const variable of container.env ?? []) {
          if (!SECRET_NAME.test(variable.name)) continue;
          expect([name, variable.name, variable.value, variable.valueFrom?.secretKeyRef?.name]).toEqual([
            name,
            variable.name,
            undefined,
            'sts-secrets',
          ]);
        }
      }
    }
  });

  it("connects every workload to NATS as its own user, and only the NATS servers' namespace policy lets the system in", () => {
    expect(ofKind('ConfigMap')[0]!.data?.NATS_URL).toBeUndefined();
    for (const name of WORKLOADS) {
      const container = named('Deployment', name).spec.template.spec.containers[0]!;
      const nats = container.env?.find((variable) => variable.name === 'NATS_URL');
      expect([name, nats?.valueFrom?.secretKeyRef?.key]).toEqual([name, `NATS_URL_${name.toUpperCase()}`]);
    }
    const access = render('deploy/k8s/nats-access');
    expect(validate(access).errors).toEqual([]);
    const [policy] = objectsOf(access);
    expect(policy?.spec.ingress[0]).toEqual({
      from: [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'sts' } },
          podSelector: { matchLabels: { 'app.kubernetes.io/part-of': 'sts' } },
        },
      ],
      ports: [{ protocol: 'TCP', port: 4222 }],
    });
  });

  it("gives each workload its own signing key and database role, and none another's", () => {
    const isCaller = (app: string) => (CALLERS as readonly string[]).includes(app);
    const keepsSchema = (app: string) => (DATABASE_USERS as readonly string[]).includes(app);
    let containers = 0;
    for (const [, pod] of podSpecs()) {
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        const app = appOf(container.image);
        const secrets = Object.fromEntries(
          (container.env ?? []).flatMap((variable) => {
            const key = variable.valueFrom?.secretKeyRef?.key;
            return key ? [[variable.name, key]] : [];
          }),
        );
        const keys = Object.values(secrets);
        // A caller's own private key, and no other private key.
        const ownKey = isCaller(app) ? `SERVICE_SIGNING_KEY_${app.toUpperCase()}` : undefined;
        expect([
          container.name,
          secrets.SERVICE_SIGNING_KEY,
          keys.filter((key) => key.includes('SIGNING')),
        ]).toEqual([container.name, ownKey, ownKey ? [ownKey] : []]);
        // The role of its own schema, and no other's (none at all without a schema).
        const ownDatabase = keepsSchema(app) ? `DATABASE_URL_${app.toUpperCase()}` : undefined;
        expect([
          container.name,
          secrets.DATABASE_URL,
          keys.filter((key) => key.includes('DATABASE')),
        ]).toEqual([container.name, ownDatabase, ownDatabase ? [ownDatabase] : []]);
        // A service checks its callers' tokens with their public keys.
        const trusts = (SERVICES as readonly string[]).includes(app) ? 'SERVICE_TRUSTED_KEYS' : undefined;
        expect([container.name, secrets.SERVICE_TRUSTED_KEYS]).toEqual([container.name, trusts]);
        containers += 1;
      }
    }
    // The Deployments, and the migrate Job's steps (nats-setup and one per service).
    expect(containers).toBe(WORKLOADS.length + 1 + SERVICES.length);
  });

  it('keeps each workload available through voluntary disruptions and scales the gateway and analytics', () => {
    for (const name of WORKLOADS) {
      expect(named('PodDisruptionBudget', name).spec.selector.matchLabels).toEqual({
        'app.kubernetes.io/name': name,
      });
    }
    expect(
      ofKind('HorizontalPodAutoscaler')
        .map((hpa) => [hpa.spec.scaleTargetRef.name, hpa.spec.minReplicas >= 2])
        .sort(),
    ).toEqual([
      ['analytics', true],
      ['gateway', true],
    ]);
  });

  it('lets only the gateway be reached, through the ingress controller alone, and each service only from those that call it', () => {
    const denyAll = named('NetworkPolicy', 'default-deny-ingress').spec;
    expect(denyAll).toEqual({ podSelector: {}, policyTypes: ['Ingress'] });
    const callersOf = (name: string) => {
      const policy = named('NetworkPolicy', `${name}-ingress`).spec;
      expect(policy.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': name });
      return policy.ingress.flatMap((rule) =>
        rule.from
          ? rule.from.map(
              (peer) =>
                peer.podSelector?.matchLabels?.['app.kubernetes.io/name'] ??
                `namespace ${peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name']}`,
            )
          : ['anyone'],
      );
    };
    // TRUST_PROXY=1 believes the last X-Forwarded-For hop: only the ingress controller may make it.
    expect(ofKind('ConfigMap')[0]!.data?.TRUST_PROXY).toBe('1');
    expect(callersOf('gateway')).toEqual(['namespace ingress-nginx']);
    expect(callersOf('identity').sort()).toEqual(['gateway', 'notification']);
    for (const name of ['notification', 'billing', 'enrollment', 'analytics']) {
      expect([name, callersOf(name)]).toEqual([name, ['gateway']]);
    }
  });

  it('exports metrics from every workload to Prometheus in `monitoring` only, and traces to a collector', () => {
    const config = ofKind('ConfigMap')[0]!.data ?? {};
    expect([config.METRICS_HOST, config.METRICS_PORT]).toEqual(['0.0.0.0', '9464']);
    expect(config.OTEL_EXPORTER_OTLP_ENDPOINT).toMatch(/^https?:\/\//);
    expect(config.OTEL_TRACES_SAMPLER).toBe('parentbased_traceidratio');
    for (const deployment of ofKind('Deployment')) {
      const name = deployment.metadata.name;
      const ports = deployment.spec.template.spec.containers[0]!.ports ?? [];
      expect([name, ports.find((port) => port.name === 'metrics')?.containerPort]).toEqual([name, 9464]);
      expect([name, deployment.spec.template.metadata?.annotations]).toEqual([
        name,
        { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9464', 'prometheus.io/path': '/metrics' },
      ]);
    }
    const scrape = named('NetworkPolicy', 'allow-metrics-scrape').spec;
    expect(scrape.podSelector).toEqual({});
    expect(scrape.ingress).toEqual([
      {
        from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
        ports: [{ protocol: 'TCP', port: 9464 }],
      },
    ]);
  });

  it('speaks gRPC over mutual TLS between every workload, probing the services with a certificate', () => {
    const config = ofKind('ConfigMap')[0]!.data ?? {};
    expect([config.GRPC_TLS_CA_FILE, config.GRPC_TLS_CERT_FILE, config.GRPC_TLS_KEY_FILE]).toEqual([
      '/etc/sts/grpc-tls/ca.crt',
      '/etc/sts/grpc-tls/tls.crt',
      '/etc/sts/grpc-tls/tls.key',
    ]);
    for (const deployment of ofKind('Deployment')) {
      const name = deployment.metadata.name;
      const pod = deployment.spec.template.spec;
      const volume = pod.volumes.find((candidate) => candidate.secret?.secretName === 'sts-grpc-tls');
      expect([name, volume?.name]).toEqual([name, 'grpc-tls']);
      const mount = pod.containers[0]!.volumeMounts?.find((candidate) => candidate.name === 'grpc-tls');
      expect([name, mount?.mountPath]).toEqual([name, '/etc/sts/grpc-tls']);
    }
    for (const name of SERVICES) {
      const container = named('Deployment', name).spec.template.spec.containers[0]!;
      expect([name, container.readinessProbe]).toEqual([
        name,
        expect.objectContaining({ exec: { command: ['node', 'healthcheck.js'] } }),
      ]);
      expect([name, container.livenessProbe]).toEqual([
        name,
        expect.objectContaining({ exec: { command: ['node', 'healthcheck.js', '--liveness'] } }),
      ]);
    }
  });

  it("gives every container the configuration its app requires at start (each app's own schema)", () => {
    const config = ofKind('ConfigMap')[0]!.data ?? {};
    for (const [name, pod] of podSpecs()) {
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        const app = appOf(container.image);
        const env: Record<string, string> = Object.assign({}, config);
        for (const variable of container.env ?? []) {
          const secret = variable.valueFrom?.secretKeyRef?.key;
          env[variable.name] = secret ? SECRET_VALUES[secret]! : variable.value!;
        }
        expect([name, container.name, configProblem(app, env)]).toEqual([name, container.name, null]);
      }
    }
  });

  it('migrates once per release in a Job, and the replicas only check', () => {
    expect(ofKind('ConfigMap')[0]!.data?.MIGRATIONS).toBe('check');
    const pod = named('Job', 'migrate').spec.template.spec;
    const steps = [...(pod.initContainers ?? []), ...pod.containers];
    expect(steps.map((container) => container.image.split('/').pop()!.split(':')[0]).sort()).toEqual(
      [...SERVICES, 'nats-setup'].sort(),
    );
    // NATS first: its streams and consumers exist before any service of the release starts.
    expect(steps[0]!.name).toBe('nats-setup');
    expect(
      steps[0]!.env?.find((variable) => variable.name === 'NATS_URL')?.valueFrom?.secretKeyRef?.key,
    ).toBe('NATS_URL_ADMIN');
    for (const step of steps.slice(1)) {
      expect([step.name, step.env?.find((variable) => variable.name === 'MIGRATIONS')?.value]).toEqual([
        step.name,
        'only',
      ]);
    }
  });
});

describe('deploy/compose.yaml and deploy/Dockerfile', () => {
  const secrets = {
    POSTGRES_PASSWORD: 'p',
    CLICKHOUSE_PASSWORD: 'c',
    ...SERVICE_KEYS,
    ...Object.fromEntries(
      DATABASE_USERS.map((user) => [`DATABASE_PASSWORD_${user.toUpperCase()}`, `db${user}`]),
    ),
    SECRET_SEALING_KEY: KEY,
    ENROLLMENT_KEY_ENCRYPTION_KEY: KEY,
    ...Object.fromEntries(
      [...WORKLOADS, 'admin'].map((user) => [`NATS_PASSWORD_${user.toUpperCase()}`, `pw${user}`]),
    ),
    SMTP_URL: 'smtp://mail.example.com',
    OIDC_ISSUER: 'https://login.example.com/',
    OIDC_AUDIENCE: 'https://api.example.com',
  };
  const compose = (env: Record<string, string>) =>
    spawnSync('docker-compose', ['-f', join(ROOT, 'deploy/compose.yaml'), 'config'], {
      env: Object.assign({ PATH: process.env.PATH ?? '' }, env),
      encoding: 'utf8',
    });

  it('pins every image it does not build by digest, so a pushed-again tag cannot change what runs', () => {
    const rendered = parseAllDocuments(compose(secrets).stdout)[0]!.toJS() as {
      services: Record<string, { image?: string }>;
    };
    const foreign = Object.values(rendered.services)
      .map((service) => service.image ?? '')
      .filter((image) => !image.startsWith('sts-'));
    expect(foreign.length).toBeGreaterThanOrEqual(3);
    for (const image of foreign) expect(image).toMatch(/^[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}$/);
  });

  it('is a valid compose file with the whole system, and refuses to render without its secrets', () => {
    const valid = compose(secrets);
    expect(valid.stderr).toBe('');
    expect(valid.status).toBe(0);
    const services = Object.keys(
      (parseAllDocuments(valid.stdout)[0]!.toJS() as { services: Record<string, unknown> }).services,
    ).sort();
    expect(services).toEqual(
      [
        'postgres',
        'nats',
        'nats-setup',
        'clickhouse',
        ...WORKLOADS,
        ...SERVICES.map((name) => `migrate-${name}`),
      ].sort(),
    );
    // Every app service's environment passes its app's own schema.
    const rendered = parseAllDocuments(valid.stdout)[0]!.toJS() as {
      services: Record<string, { image?: string; environment?: Record<string, string> }>;
    };
    for (const [name, service] of Object.entries(rendered.services)) {
      if (!service.image?.startsWith('sts-')) continue;
      expect([name, configProblem(appOf(service.image), service.environment ?? {})]).toEqual([name, null]);
    }
    for (const missing of Object.keys(secrets)) {
      const without = Object.fromEntries(Object.entries(secrets).filter(([key]) => key !== missing));
      const refused = compose(without);
      expect([missing, refused.status]).toEqual([missing, 1]);
      expect(refused.stderr).toContain(`set ${missing}`);
    }
  });

  it('runs NATS with a user per service: deploy/nats/auth.conf is current, and the server reads each password from its environment', async () => {
    const auth = readFileSync(join(ROOT, 'deploy/nats/auth.conf'), 'utf8');
    expect(auth).toBe(deployNatsAuthConfig());
    const rendered = parseAllDocuments(compose(secrets).stdout)[0]!.toJS() as {
      services: Record<string, { image?: string; environment?: Record<string, string> }>;
    };
    for (const [name, service] of Object.entries(rendered.services)) {
      const url = service.environment?.NATS_URL;
      if (!service.image?.startsWith('sts-') || name.startsWith('migrate-')) continue;
      const user = name === 'nats-setup' ? 'admin' : name;
      expect([name, url]).toEqual([name, `nats://${user}:pw${user}@nats:4222`]);
    }
    const env = Object.fromEntries(
      Object.entries(secrets).filter(([key]) => key.startsWith('NATS_PASSWORD_')),
    );
    const server = await startNatsServer('include ./auth.conf\n', { files: { 'auth.conf': auth }, env });
    try {
      const logger = createLogger('deploy', 'silent');
      const identity = await connectJetStream({
        url: server.url('identity', 'pwidentity'),
        name: 'deploy-identity',
        logger,
        initialConnectTimeoutMs: 2_000,
      });
      await identity.close();
      await expect(
        connectJetStream({
          url: server.url('identity', 'pwgateway'),
          name: 'x',
          logger,
          initialConnectTimeoutMs: 500,
        }),
      ).rejects.toThrow();
    } finally {
      await server.stop();
    }
  });

  it('gives each service its own signing key and database role, the roles made at PostgreSQL first start', () => {
    const rendered = parseAllDocuments(compose(secrets).stdout)[0]!.toJS() as {
      services: Record<
        string,
        {
          image?: string;
          environment?: Record<string, string>;
          volumes?: unknown[];
        }
      >;
    };
    const privateKeys = CALLERS.map((caller) => SERVICE_KEYS[`SERVICE_SIGNING_KEY_${caller.toUpperCase()}`]!);
    let apps = 0;
    for (const [name, service] of Object.entries(rendered.services)) {
      if (!service.image?.startsWith('sts-')) continue;
      const app = appOf(service.image);
      const env = service.environment ?? {};
      const ownKey = (CALLERS as readonly string[]).includes(app)
        ? SERVICE_KEYS[`SERVICE_SIGNING_KEY_${app.toUpperCase()}`]
        : undefined;
      expect([name, env.SERVICE_SIGNING_KEY]).toEqual([name, ownKey]);
      expect([name, Object.values(env).filter((value) => privateKeys.includes(String(value)))]).toEqual([
        name,
        ownKey ? [ownKey] : [],
      ]);
      const ownRole = (DATABASE_USERS as readonly string[]).includes(app) ? app : undefined;
      expect([name, env.DATABASE_URL]).toEqual([
        name,
        ownRole ? `postgresql://${ownRole}:db${ownRole}@postgres:5432/sts` : undefined,
      ]);
      // Nothing of PostgreSQL's admin, nor another role's password.
      const passwords = [
        secrets.POSTGRES_PASSWORD,
        ...DATABASE_USERS.filter((user) => user !== ownRole).map((user) => `db${user}`),
      ];
      expect([
        name,
        Object.values(env).filter((value) =>
          passwords.some((password) => String(value).includes(`:${password}@`)),
        ),
      ]).toEqual([name, []]);
      apps += 1;
    }
    expect(apps).toBeGreaterThanOrEqual(WORKLOADS.length + SERVICES.length);
    const postgres = rendered.services.postgres!;
    expect(postgres.environment).toMatchObject(
      Object.fromEntries(
        DATABASE_USERS.map((user) => [`DATABASE_PASSWORD_${user.toUpperCase()}`, `db${user}`]),
      ),
    );
    // docker-compose renders a bind mount as `source:target:mode`.
    const mounts = (postgres.volumes ?? []).map((volume) => String(volume).replace(/:(ro|rw)$/, ''));
    expect(mounts).toEqual(
      expect.arrayContaining([
        `${join(ROOT, 'deploy/postgres/service-roles.sql')}:/etc/sts/service-roles.sql`,
        `${join(ROOT, 'deploy/postgres/init-service-roles.sh')}:/docker-entrypoint-initdb.d/10-service-roles.sh`,
      ]),
    );
    // The init script hands each password to service-roles.sql (tested in database-roles.int-spec.ts) by its name there.
    const init = readFileSync(join(ROOT, 'deploy/postgres/init-service-roles.sh'), 'utf8');
    for (const user of DATABASE_USERS) {
      expect(init).toContain(`-v ${user}_password="$DATABASE_PASSWORD_${user.toUpperCase()}"`);
    }
    expect(init).toContain('-f /etc/sts/service-roles.sql');
  });

  it('builds one image per app from a pinned Node, with production dependencies only, as a non-root user, with a health check', () => {
    const dockerfile = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:\d+\.\d+\.\d+-bookworm-slim@sha256:[0-9a-f]{64}$/m);
    expect(dockerfile).not.toMatch(/:latest/);
    expect(dockerfile).toMatch(/^ARG APP$/m);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK .*healthcheck\.js/m);
    expect(dockerfile).toMatch(/^CMD \["node", "--enable-source-maps"/m);
  });
});
