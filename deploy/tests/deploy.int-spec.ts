import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import { analyticsEnvSchema } from '@sts/analytics-infra/analytics-config';
import { billingEnvSchema } from '@sts/billing-infra/billing-config';
import { loadConfig } from '@sts/config/load-config';
import { enrollmentEnvSchema } from '@sts/enrollment-infra/enrollment-config';
import { TELEMETRY_CONSUMERS } from '@sts/events/event-consumers';
import { gatewayEnvSchema } from '@sts/gateway-http/gateway-config';
import { identityEnvSchema } from '@sts/identity-infra/identity-config';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { natsSetupEnvSchema } from '@sts/nats/nats-setup-config';
import { consumerBacklog } from '@sts/observability/metrics';
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
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
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
  volumes: { name: string; secret?: { secretName: string }; configMap?: { name: string } }[];
  initContainers?: Container[];
  securityContext: { runAsNonRoot?: boolean; seccompProfile?: { type: string } };
  automountServiceAccountToken?: boolean;
  affinity?: {
    podAntiAffinity?: {
      requiredDuringSchedulingIgnoredDuringExecution?: { topologyKey: string; labelSelector: Selector }[];
    };
  };
}
interface Selector {
  matchLabels?: Record<string, string>;
  matchExpressions?: unknown[];
}
/** A pod template: a workload's, or one of a ClickHouseInstallation's. */
interface PodTemplate {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: PodSpec;
}
/** The parts of the rendered objects these checks read; the schema check covers the rest. */
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec: {
    replicas?: number;
    template: PodTemplate;
    selector: Selector;
    scaleTargetRef: { kind?: string; name: string };
    minReplicas: number;
    maxUnavailable?: number;
    podSelector: Selector;
    policyTypes: string[];
    ingress?: {
      from?: { podSelector?: Selector; namespaceSelector?: Selector }[];
      ports?: { port: number }[];
    }[];
    // StatefulSet, Service
    serviceName?: string;
    podManagementPolicy?: string;
    volumeClaimTemplates?: { metadata: { name: string } }[];
    clusterIP?: string;
    publishNotReadyAddresses?: boolean;
  };
}
/** The parts of the ClickHouseInstallation these checks read (its CRD's schema checks the rest). */
interface ClickHouseInstallation {
  metadata: { name: string };
  spec: {
    defaults: { templates: { podTemplate: string; serviceTemplate: string } };
    configuration: {
      zookeeper: { nodes: { host: string; port: number }[] };
      users: Record<string, unknown>;
      clusters: {
        name: string;
        secret?: { auto?: string };
        layout: { shardsCount: number; replicasCount: number };
      }[];
    };
    templates: {
      podTemplates: (PodTemplate & { name: string; podDistribution?: { type: string }[] })[];
      serviceTemplates: { name: string; generateName?: string; spec: { type?: string } }[];
    };
  };
}
/** The parts of a KEDA ScaledObject these checks read (its CRD's schema checks the rest). */
interface ScaledObject {
  metadata: { name: string };
  spec: {
    scaleTargetRef: { apiVersion?: string; kind?: string; name: string };
    minReplicaCount: number;
    maxReplicaCount: number;
    advanced?: {
      horizontalPodAutoscalerConfig?: {
        behavior?: { scaleDown?: { stabilizationWindowSeconds?: number } };
      };
    };
    triggers: { type: string; metricType?: string; metadata: Record<string, string> }[];
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
  // The analytics user of the ClickHouseInstallation, at its Service (deploy/README.md).
  CLICKHOUSE_URL: 'http://analytics:secret@clickhouse-sts:8123',
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
  /** The workloads' ConfigMap (the others hold the servers' configuration files). */
  const config = () => {
    const found = ofKind('ConfigMap').filter((object) => /^sts-config-[a-z0-9]+$/.test(object.metadata.name));
    expect(found).toHaveLength(1);
    return found[0]!;
  };
  const customResources = <T>(kind: string) => ofKind(kind) as unknown as T[];
  const clickhouse = () => {
    const [installation, ...others] = customResources<ClickHouseInstallation>('ClickHouseInstallation');
    expect(others).toEqual([]);
    return installation!;
  };
  /** The HorizontalPodAutoscalers and KEDA ScaledObjects that scale the Deployment `name`, with their minimum. */
  const autoscalersOf = (name: string) => [
    ...ofKind('HorizontalPodAutoscaler')
      .filter((hpa) => hpa.spec.scaleTargetRef.name === name)
      .map((hpa) => ({ kind: hpa.kind, min: hpa.spec.minReplicas })),
    ...customResources<ScaledObject>('ScaledObject')
      .filter((scaled) => scaled.spec.scaleTargetRef.name === name)
      .map((scaled) => ({ kind: 'ScaledObject', min: scaled.spec.minReplicaCount })),
  ];
  /** What a container's process sees: the ConfigMap it takes, then its own variables (secrets as given). */
  const environmentOf = (container: Container): Record<string, string> => {
    const env: Record<string, string> = {};
    for (const source of container.envFrom ?? []) {
      const map = ofKind('ConfigMap').find((object) => object.metadata.name === source.configMapRef?.name);
      Object.assign(env, map?.data ?? {});
    }
    for (const variable of container.env ?? []) {
      const secret = variable.valueFrom?.secretKeyRef?.key;
      env[variable.name] = secret ? (SECRET_VALUES[secret] ?? `<${secret}>`) : variable.value!;
    }
    return env;
  };

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
    // The operators' resources are checked against their CRDs (deploy/tests/crds), an unknown field included,
    // and the ClickHouse servers' pod template against the Kubernetes schemas.
    expect(ofKind('ClickHouseInstallation')).toHaveLength(1);
    expect(ofKind('ScaledObject')).toHaveLength(1);
    for (const [from, to, error] of [
      [
        'shardsCount: 2',
        'shardCount: 2',
        /^ClickHouseInstallation\/sts: .*layout must NOT have additional properties \(shardCount\)/,
      ],
      [
        'minReplicaCount: 2',
        'minReplicaCount: two',
        /^ScaledObject\/analytics: \/spec\/minReplicaCount must be integer/,
      ],
      [
        'storage: 100Gi',
        'storage: plenty',
        /^ClickHouseInstallation\/sts: template PersistentVolumeClaim\/data: /,
      ],
    ] as const) {
      expect(production).toContain(from);
      expect(validate(production.replace(from, to)).errors).toEqual([expect.stringMatching(error)]);
    }
  });

  it('runs every service as a Deployment of two or more replicas with probes, resources and a locked-down pod', () => {
    expect(
      ofKind('Deployment')
        .map((object) => object.metadata.name)
        .sort(),
    ).toEqual([...WORKLOADS].sort());
    for (const deployment of ofKind('Deployment')) {
      const name = deployment.metadata.name;
      // Two or more replicas: set here, or (gateway, analytics) left to one autoscaler, whose minimum is 2.
      const autoscalers = autoscalersOf(name);
      if (autoscalers.length > 0) {
        expect([name, deployment.spec.replicas, autoscalers.length, autoscalers[0]!.min >= 2]).toEqual([
          name,
          undefined,
          1,
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
    expect(Object.keys(config().data ?? {}).filter((key) => SECRET_NAME.test(key))).toEqual([]);
    // The other ConfigMaps are the servers' configuration files, whose passwords are the servers' environment's.
    expect(
      ofKind('ConfigMap')
        .map((object) => object.metadata.name.replace(/-[a-z0-9]+$/, ''))
        .sort(),
    ).toEqual(['clickhouse-keeper-config', 'nats-config', 'sts-config']);
    for (const [name, pod] of podSpecs()) {
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        expect([name, container.envFrom]).toEqual([
          name,
          [{ configMapRef: { name: config().metadata.name } }],
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
    expect(config().data?.NATS_URL).toBeUndefined();
    for (const name of WORKLOADS) {
      const container = named('Deployment', name).spec.template.spec.containers[0]!;
      const nats = container.env?.find((variable) => variable.name === 'NATS_URL');
      expect([name, nats?.valueFrom?.secretKeyRef?.key]).toEqual([name, `NATS_URL_${name.toUpperCase()}`]);
    }
    const access = render('deploy/k8s/nats-access');
    expect(validate(access).errors).toEqual([]);
    const [policy] = objectsOf(access);
    expect(policy?.spec.ingress?.[0]).toEqual({
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
    // One autoscaler per Deployment: the gateway's on CPU, analytics' KEDA's (which makes its own HPA).
    expect(WORKLOADS.map((name) => [name, autoscalersOf(name).map((autoscaler) => autoscaler.kind)])).toEqual(
      WORKLOADS.map((name) => [
        name,
        name === 'gateway' ? ['HorizontalPodAutoscaler'] : name === 'analytics' ? ['ScaledObject'] : [],
      ]),
    );
  });

  it('lets only the gateway be reached, through the ingress controller alone, and each service only from those that call it', () => {
    const denyAll = named('NetworkPolicy', 'default-deny-ingress').spec;
    expect(denyAll).toEqual({ podSelector: {}, policyTypes: ['Ingress'] });
    const callersOf = (name: string) => {
      const policy = named('NetworkPolicy', `${name}-ingress`).spec;
      expect(policy.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': name });
      return (policy.ingress ?? []).flatMap((rule) =>
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
    expect(config().data?.TRUST_PROXY).toBe('1');
    expect(callersOf('gateway')).toEqual(['namespace ingress-nginx']);
    expect(callersOf('identity').sort()).toEqual(['gateway', 'notification']);
    for (const name of ['notification', 'billing', 'enrollment', 'analytics']) {
      expect([name, callersOf(name)]).toEqual([name, ['gateway']]);
    }
  });

  it('exports metrics from every workload to Prometheus in `monitoring` only, and traces to a collector', () => {
    const data = config().data ?? {};
    expect([data.METRICS_HOST, data.METRICS_PORT]).toEqual(['0.0.0.0', '9464']);
    expect(data.OTEL_EXPORTER_OTLP_ENDPOINT).toMatch(/^https?:\/\//);
    expect(data.OTEL_TRACES_SAMPLER).toBe('parentbased_traceidratio');
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
    const data = config().data ?? {};
    expect([data.GRPC_TLS_CA_FILE, data.GRPC_TLS_CERT_FILE, data.GRPC_TLS_KEY_FILE]).toEqual([
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
    const data = config().data ?? {};
    for (const [name, pod] of podSpecs()) {
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        const app = appOf(container.image);
        const env: Record<string, string> = Object.assign({}, data);
        for (const variable of container.env ?? []) {
          const secret = variable.valueFrom?.secretKeyRef?.key;
          env[variable.name] = secret ? SECRET_VALUES[secret]! : variable.value!;
        }
        expect([name, container.name, configProblem(app, env)]).toEqual([name, container.name, null]);
        // NATS_URL may also list the NATS cluster's servers (deploy/README.md).
        if (env.NATS_URL) {
          const list = [0, 1, 2]
            .map((index) => env.NATS_URL!.replace('@nats:4222', `@nats-${index}.nats-headless:4222`))
            .join(',');
          expect([name, container.name, configProblem(app, { ...env, NATS_URL: list })]).toEqual([
            name,
            container.name,
            null,
          ]);
        }
      }
    }
  });

  it('migrates once per release in a Job, and the replicas only check', () => {
    expect(config().data?.MIGRATIONS).toBe('check');
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

  /** The servers' pods: the StatefulSets' (NATS, Keeper), and the ClickHouse servers' the operator makes. */
  const serverPods = (): (readonly [string, PodTemplate])[] => [
    ...ofKind('StatefulSet').map((object) => [object.metadata.name, object.spec.template] as const),
    ...clickhouse().spec.templates.podTemplates.map(
      (template) => [`clickhouse/${template.name}`, template as PodTemplate] as const,
    ),
  ];
  /** The ConfigMap a pod mounts as its volume `volume`. */
  const mountedConfig = (pod: PodSpec, volume: string) => {
    const name = pod.volumes.find((candidate) => candidate.name === volume)?.configMap?.name;
    const found = ofKind('ConfigMap').find((object) => object.metadata.name === name);
    if (!found) throw new Error(`no ConfigMap mounted as ${volume}`);
    return found.data ?? {};
  };
  /** What a StatefulSet's pods need to survive a node: a quorum (3), one per node, one down at a time. */
  const expectQuorumStatefulSet = (name: string) => {
    const set = named('StatefulSet', name);
    expect([name, set.spec.replicas, set.spec.podManagementPolicy]).toEqual([name, 3, 'Parallel']);
    expect([
      name,
      set.spec.template.spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
    ]).toEqual([name, [{ topologyKey: 'kubernetes.io/hostname', labelSelector: set.spec.selector }]]);
    expect([name, named('PodDisruptionBudget', name).spec]).toEqual([
      name,
      { maxUnavailable: 1, selector: set.spec.selector },
    ]);
    // The servers' stable names resolve before they are ready: a quorum forms before any server is.
    const headless = named('Service', set.spec.serviceName!);
    expect([name, headless.spec.clusterIP, headless.spec.publishNotReadyAddresses]).toEqual([
      name,
      'None',
      true,
    ]);
    return set;
  };

  it('runs the servers (NATS, ClickHouse, Keeper) in locked-down pods with probes and resources, from images pinned by digest', () => {
    expect(
      ofKind('StatefulSet')
        .map((object) => object.metadata.name)
        .sort(),
    ).toEqual(['clickhouse-keeper', 'nats']);
    // The compose file's servers, at the same digests: one version of each to run and to test.
    const compose = parse(readFileSync(join(ROOT, 'deploy/compose.yaml'), 'utf8'), { merge: true }) as {
      services: Record<string, { image: string }>;
    };
    const images = new Set<string>();
    for (const [name, template] of serverPods()) {
      const pod = template.spec;
      // The restricted Pod Security Standard the namespace enforces.
      expect([
        name,
        pod.securityContext.runAsNonRoot,
        pod.securityContext.seccompProfile?.type,
        pod.automountServiceAccountToken,
      ]).toEqual([name, true, 'RuntimeDefault', false]);
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        expect([name, container.image]).toEqual([
          name,
          expect.stringMatching(/^[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}$/),
        ]);
        images.add(container.image);
        expect([name, container.securityContext]).toEqual([
          name,
          expect.objectContaining({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } }),
        ]);
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
      }
    }
    expect([...images].sort()).toEqual(
      [compose.services.clickhouse!.image, compose.services.nats!.image].sort(),
    );
  });

  it('runs NATS as a JetStream cluster of three servers, one per node, and every stream and bucket on all three', () => {
    const nats = expectQuorumStatefulSet('nats');
    const replicas = nats.spec.replicas!;
    expect(nats.spec.volumeClaimTemplates?.map((claim) => claim.metadata.name)).toEqual(['jetstream']);
    const pod = nats.spec.template.spec;
    const server = pod.containers[0]!;
    // Its configuration: routes to every server by its stable name, and the users of auth.conf, current.
    const files = mountedConfig(pod, 'config');
    expect(server.args).toEqual(['--config', '/etc/nats-config/nats-cluster.conf']);
    expect(server.volumeMounts).toContainEqual(
      expect.objectContaining({ name: 'config', mountPath: '/etc/nats-config' }),
    );
    expect(files['nats-cluster.conf']).toBe(
      readFileSync(join(ROOT, 'deploy/nats/nats-cluster.conf'), 'utf8'),
    );
    expect(files['auth.conf']).toBe(deployNatsAuthConfig());
    const conf = files['nats-cluster.conf']!;
    expect(conf).toMatch(/^include \.\/auth\.conf$/m);
    expect([...conf.matchAll(/nats:\/\/([\w.-]+):6222/g)].map((match) => match[1])).toEqual(
      Array.from(
        { length: replicas },
        (_, index) => `${nats.metadata.name}-${index}.${nats.spec.serviceName}`,
      ),
    );
    // Each user's password from the Secret sts-nats-users, in the variable auth.conf reads.
    const passwords = [
      ...new Set([...deployNatsAuthConfig().matchAll(/\$(NATS_PASSWORD_\w+)/g)].map((match) => match[1]!)),
    ];
    expect(passwords.length).toBe(WORKLOADS.length + 1);
    expect(
      (server.env ?? [])
        .filter((variable) => variable.name.startsWith('NATS_PASSWORD_'))
        .map((variable) => [variable.name, variable.valueFrom?.secretKeyRef])
        .sort(),
    ).toEqual(passwords.sort().map((name) => [name, { name: 'sts-nats-users', key: name }]));
    // nats-setup makes, and every service expects, each stream and bucket with a copy on every server.
    for (const [name, spec] of podSpecs()) {
      for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
        expect([name, container.name, environmentOf(container).NATS_STREAM_REPLICAS]).toEqual([
          name,
          container.name,
          String(replicas),
        ]);
      }
    }
    // A NATS server takes the configuration (this machine's, with the passwords and the server name set).
    const dir = mkdtempSync(join(tmpdir(), 'sts-nats-cluster-'));
    try {
      for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
      const binary =
        [process.env.NATS_SERVER_BIN, '/usr/sbin/nats-server', '/usr/bin/nats-server'].find(
          (path) => path && existsSync(path),
        ) ?? 'nats-server';
      const checked = spawnSync(binary, ['-t', '-c', join(dir, 'nats-cluster.conf')], {
        env: {
          PATH: process.env.PATH ?? '',
          SERVER_NAME: 'nats-0',
          ...Object.fromEntries(passwords.map((name) => [name, 'secret'])),
        },
        encoding: 'utf8',
      });
      expect([checked.status, `${checked.stdout}${checked.stderr}`]).toEqual([
        0,
        expect.stringContaining('is valid'),
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs ClickHouse as 2 shards × 2 replicas on ClickHouse Keeper, the cluster analytics migrates and queries', () => {
    const installation = clickhouse();
    const [cluster, ...otherClusters] = installation.spec.configuration.clusters;
    expect(otherClusters).toEqual([]);
    expect(cluster!.layout).toEqual({ shardsCount: 2, replicasCount: 2 });
    // Queries over the Distributed tables run on the other shards as their sender.
    expect(cluster!.secret).toEqual({ auto: 'true' });
    // The two replicas of a shard on two nodes.
    const template = installation.spec.templates.podTemplates.find(
      (candidate) => candidate.name === installation.spec.defaults.templates.podTemplate,
    )!;
    expect(template.podDistribution).toContainEqual(expect.objectContaining({ type: 'ShardAntiAffinity' }));
    expect(template.spec.containers.map((container) => container.name)).toEqual(['clickhouse']);
    // The analytics service and its migrations: that cluster, at the installation's Service, as its user.
    const job = named('Job', 'migrate').spec.template.spec;
    const analytics = [
      named('Deployment', 'analytics').spec.template.spec.containers[0]!,
      job.containers.find((container) => container.name === 'migrate-analytics')!,
    ];
    for (const container of analytics) {
      const env = environmentOf(container);
      expect([container.name, env.CLICKHOUSE_CLUSTER]).toEqual([container.name, cluster!.name]);
      expect([
        container.name,
        container.env?.find((variable) => variable.name === 'CLICKHOUSE_URL')?.valueFrom?.secretKeyRef,
      ]).toEqual([container.name, { name: 'sts-secrets', key: 'CLICKHOUSE_URL' }]);
    }
    // No other container is given the cluster or ClickHouse's address as its own variable.
    const service = installation.spec.templates.serviceTemplates.find(
      (candidate) => candidate.name === installation.spec.defaults.templates.serviceTemplate,
    )!;
    expect([service.generateName, service.spec.type]).toEqual(['clickhouse-{chi}', 'ClusterIP']);
    const host = `clickhouse-${installation.metadata.name}`;
    expect(new URL(SECRET_VALUES.CLICKHOUSE_URL!).hostname).toBe(host);
    const readme = readFileSync(join(ROOT, 'deploy/README.md'), 'utf8');
    const documented = `CLICKHOUSE_URL='http://analytics:…@${host}:8123'`;
    expect([documented, readme.includes(documented)]).toEqual([documented, true]);
    // The servers keep the analytics user's password hash only, from a Secret.
    expect(installation.spec.configuration.users['analytics/password_sha256_hex']).toEqual({
      valueFrom: { secretKeyRef: { name: 'sts-clickhouse-users', key: 'analytics_password_sha256_hex' } },
    });
    expect(Object.keys(installation.spec.configuration.users).filter((key) => /password/.test(key))).toEqual([
      'analytics/password_sha256_hex',
    ]);
    // Keeper: three servers the ClickHouse servers know, whose Raft group names the same three.
    const keeper = expectQuorumStatefulSet('clickhouse-keeper');
    const hosts = Array.from(
      { length: keeper.spec.replicas! },
      (_, index) => `${keeper.metadata.name}-${index}.${keeper.spec.serviceName}`,
    );
    expect(installation.spec.configuration.zookeeper.nodes).toEqual(
      hosts.map((name) => ({ host: name, port: 2181 })),
    );
    const xml = mountedConfig(keeper.spec.template.spec, 'config')['keeper_config.xml']!;
    expect(xml).toBe(readFileSync(join(ROOT, 'deploy/k8s/clickhouse-cluster/keeper_config.xml'), 'utf8'));
    expect(xml).toMatch(/<tcp_port>2181<\/tcp_port>/);
    const raft = [
      ...xml.matchAll(
        /<server>\s*<id>(\d+)<\/id>\s*<hostname>([^<]+)<\/hostname>\s*<port>(\d+)<\/port>\s*<\/server>/g,
      ),
    ].map((match) => [Number(match[1]), match[2], Number(match[3])]);
    expect(raft).toEqual(hosts.map((name, index) => [index + 1, name, 9234]));
    // Each pod runs as the server of its ordinal (clickhouse-keeper-N is server N+1), with that configuration.
    const [shell, flag, script] = keeper.spec.template.spec.containers[0]!.command!;
    expect([shell, flag]).toEqual(['/bin/sh', '-c']);
    expect(script).toMatch(
      /exec \/usr\/bin\/clickhouse-keeper --config-file=\/etc\/clickhouse-keeper\/keeper_config\.xml$/,
    );
    hosts.forEach((_, index) => {
      const ran = spawnSync('/bin/sh', ['-c', script!.replace(/exec .*$/, 'echo "$KEEPER_SERVER_ID"')], {
        env: { POD_NAME: `${keeper.metadata.name}-${index}` },
        encoding: 'utf8',
      });
      expect(ran.stdout.trim()).toBe(String(index + 1));
    });
  });

  it('scales analytics with KEDA on its telemetry backlog, the gauge its replicas export, and on CPU', () => {
    const [scaled, ...others] = customResources<ScaledObject>('ScaledObject');
    expect(others).toEqual([]);
    expect(scaled!.spec.scaleTargetRef).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: 'analytics',
    });
    expect(scaled!.spec.minReplicaCount).toBe(2);
    expect(scaled!.spec.maxReplicaCount).toBeGreaterThanOrEqual(2 * scaled!.spec.minReplicaCount);
    // The metric and the consumer as the code names them; every replica reports the consumer's one backlog.
    const gauge = consumerBacklog.gauges.pending as unknown as { name: string; labelNames: string[] };
    expect(gauge.labelNames).toEqual(['consumer']);
    const [consumer] = Object.entries(TELEMETRY_CONSUMERS)
      .filter(([, declaration]) => declaration.service === 'analytics')
      .map(([name]) => name);
    const namespace = named('Deployment', 'analytics').metadata.namespace;
    const backlog = scaled!.spec.triggers.filter((trigger) => trigger.type === 'prometheus');
    expect(backlog).toEqual([
      {
        type: 'prometheus',
        name: 'telemetry-backlog',
        metricType: 'AverageValue',
        metadata: expect.objectContaining({
          query: `max(${gauge.name}{namespace="${namespace}", consumer="${consumer}"})`,
          threshold: expect.stringMatching(/^[1-9]\d*$/),
          serverAddress: expect.stringMatching(/^https?:\/\//),
        }),
      },
    ]);
    expect(scaled!.spec.triggers.filter((trigger) => trigger.type === 'cpu')).toEqual([
      { type: 'cpu', metricType: 'Utilization', metadata: { value: expect.stringMatching(/^\d+$/) } },
    ]);
    // A drained backlog removes replicas slowly.
    expect(
      scaled!.spec.advanced?.horizontalPodAutoscalerConfig?.behavior?.scaleDown?.stabilizationWindowSeconds,
    ).toBeGreaterThanOrEqual(60);
  });

  it("admits the servers' own traffic (the NATS routes, replication, Keeper's quorum) and only the workloads that use them", () => {
    const NAMESPACE = named('Deployment', 'gateway').metadata.namespace!;
    type Peer = { namespace: string; labels: Record<string, string> };
    const matches = (selector: Selector | undefined, labels: Record<string, string>) => {
      expect(selector?.matchExpressions).toBeUndefined();
      return Object.entries(selector?.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
    };
    /** Whether the namespace's NetworkPolicies let `from` reach a pod labelled `to` on `port`. */
    const admitted = (from: Peer, to: Record<string, string>, port: number) => {
      const policies = ofKind('NetworkPolicy').filter(
        (policy) => policy.spec.policyTypes.includes('Ingress') && matches(policy.spec.podSelector, to),
      );
      expect(policies.length).toBeGreaterThan(0);
      return policies.some((policy) =>
        (policy.spec.ingress ?? []).some(
          (rule) =>
            (!rule.ports || rule.ports.some((allowed) => allowed.port === port)) &&
            (!rule.from ||
              rule.from.some((peer) =>
                peer.namespaceSelector
                  ? matches(peer.namespaceSelector, { 'kubernetes.io/metadata.name': from.namespace }) &&
                    (!peer.podSelector || matches(peer.podSelector, from.labels))
                  : from.namespace === NAMESPACE && matches(peer.podSelector, from.labels),
              )),
        ),
      );
    };
    const inside = (labels: Record<string, string>): Peer => ({ namespace: NAMESPACE, labels });
    const podLabels = (kind: string, name: string) => named(kind, name).spec.template.metadata?.labels ?? {};
    const nats = podLabels('StatefulSet', 'nats');
    const keeper = podLabels('StatefulSet', 'clickhouse-keeper');
    const server = clickhouse().spec.templates.podTemplates[0]!.metadata?.labels ?? {};
    const workloads = [
      ...WORKLOADS.map((name) => [name, podLabels('Deployment', name)] as const),
      ['migrate', podLabels('Job', 'migrate')] as const,
    ];
    for (const [name, labels] of workloads) {
      const client = inside(labels);
      const usesClickHouse = name === 'analytics' || name === 'migrate';
      expect([
        name,
        admitted(client, nats, 4222),
        admitted(client, nats, 6222),
        admitted(client, server, 8123),
        admitted(client, server, 9000),
        admitted(client, keeper, 2181),
      ]).toEqual([name, true, false, usesClickHouse, false, false]);
    }
    // The servers to each other: NATS routes, ClickHouse's distributed queries and replication, Keeper's Raft.
    expect([
      admitted(inside(nats), nats, 6222),
      admitted(inside(server), server, 9000),
      admitted(inside(server), server, 9009),
      admitted(inside(server), keeper, 2181),
      admitted(inside(keeper), keeper, 9234),
    ]).toEqual([true, true, true, true, true]);
    // The clickhouse-operator (its install bundle's namespace), and Prometheus on the metrics ports.
    const operator = { app: 'clickhouse-operator' };
    expect([
      admitted({ namespace: 'kube-system', labels: operator }, server, 8123),
      admitted({ namespace: 'elsewhere', labels: operator }, server, 8123),
    ]).toEqual([true, false]);
    const prometheus = { namespace: 'monitoring', labels: {} };
    expect([
      admitted(prometheus, server, 9464),
      admitted(prometheus, keeper, 9464),
      admitted(prometheus, nats, 8222),
    ]).toEqual([true, true, true]);
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
    // The release `npm start` and `npm test` run on (the devDependency `node`), so what runs is what was tested.
    const tested = (
      JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
        devDependencies: Record<string, string>;
      }
    ).devDependencies.node;
    expect(
      dockerfile.match(/^ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-bookworm-slim@sha256:[0-9a-f]{64}$/m)?.[1],
    ).toBe(tested);
    expect(dockerfile).not.toMatch(/:latest/);
    expect(dockerfile).toMatch(/^ARG APP$/m);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK .*healthcheck\.js/m);
    expect(dockerfile).toMatch(/^CMD \["node", "--enable-source-maps"/m);
  });
});
