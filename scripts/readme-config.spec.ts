import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { analyticsEnvSchema } from '@sts/analytics-infra/analytics-config';
import { billingEnvSchema } from '@sts/billing-infra/billing-config';
import { enrollmentEnvSchema } from '@sts/enrollment-infra/enrollment-config';
import { gatewayEnvSchema } from '@sts/gateway-http/gateway-config';
import { identityEnvSchema } from '@sts/identity-infra/identity-config';
import { natsSetupEnvSchema } from '@sts/nats/nats-setup-config';
import { notificationEnvSchema } from '@sts/notification-infra/notification-config';
import { devIdpEnvSchema } from '../apps/dev-idp/src/dev-idp-config';
import { devMailboxEnvSchema } from '../apps/dev-mailbox/src/dev-mailbox-config';
import { devStripeEnvSchema } from '../apps/dev-stripe/src/dev-stripe-config';
import { healthcheckEnvSchema } from '../apps/healthcheck/src/healthcheck-config';

/**
 * README.md's configuration tables are what operators set, by process: this spec fails when they and the
 * apps' zod schemas disagree, either way. Each `###` section of "## Configuration" applies to the apps
 * named here; an app's variables are exactly those of its sections, and a section lists only variables
 * that every app it applies to reads. `npm start`'s own (scripts/start.sh) have no schema.
 */
const ROOT = resolve(__dirname, '..');

const SERVICES = ['identity', 'enrollment', 'analytics', 'notification', 'billing'] as const;
const SCHEMAS: Record<string, { readonly shape: object }> = {
  gateway: gatewayEnvSchema,
  identity: identityEnvSchema,
  enrollment: enrollmentEnvSchema,
  analytics: analyticsEnvSchema,
  notification: notificationEnvSchema,
  billing: billingEnvSchema,
  'nats-setup': natsSetupEnvSchema,
  'dev-idp': devIdpEnvSchema,
  'dev-mailbox': devMailboxEnvSchema,
  'dev-stripe': devStripeEnvSchema,
  healthcheck: healthcheckEnvSchema,
};
const SECTIONS: Record<string, readonly string[]> = {
  'Every process': Object.keys(SCHEMAS).filter((app) => app !== 'healthcheck'),
  'Gateway and every service': ['gateway', ...SERVICES],
  'Every service': SERVICES,
  Gateway: ['gateway'],
  Identity: ['identity'],
  Enrollment: ['enrollment'],
  Analytics: ['analytics'],
  Notification: ['notification'],
  Billing: ['billing'],
  'nats-setup': ['nats-setup'],
  'Health check': ['healthcheck'],
  'Development tools: dev-idp': ['dev-idp'],
  'Development tools: dev-mailbox': ['dev-mailbox'],
  'Development tools: dev-stripe': ['dev-stripe'],
  'npm start': [],
};

/** The variables named in the first column of each table, by `###` heading of README's configuration. */
function configurationSections(readme: string): Map<string, string[]> {
  const start = readme.indexOf('\n## Configuration\n');
  if (start < 0) throw new Error('README.md has no "## Configuration" section');
  const end = readme.indexOf('\n## ', start + 1);
  const sections = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of readme.slice(start, end < 0 ? undefined : end).split('\n')) {
    const heading = /^### (.+)$/.exec(line);
    if (heading) {
      current = [];
      sections.set(heading[1]!.trim(), current);
      continue;
    }
    const firstCell = /^\|([^|]*)\|/.exec(line)?.[1];
    if (current && firstCell) {
      for (const match of firstCell.matchAll(/`([A-Z][A-Z0-9_]*)`/g)) current.push(match[1]!);
    }
  }
  return sections;
}

describe("README.md's configuration tables", () => {
  const sections = configurationSections(readFileSync(join(ROOT, 'README.md'), 'utf8'));

  it('has the sections this spec knows, each with a table', () => {
    expect([...sections.keys()]).toEqual(Object.keys(SECTIONS));
    expect([...sections].filter(([, names]) => names.length === 0).map(([heading]) => heading)).toEqual([]);
  });

  it.each(Object.keys(SCHEMAS))("lists every variable of %s's schema where it applies", (app) => {
    const documented = new Set(
      Object.entries(SECTIONS)
        .filter(([, apps]) => apps.includes(app))
        .flatMap(([heading]) => sections.get(heading) ?? []),
    );
    const missing = Object.keys(SCHEMAS[app]!.shape).filter((name) => !documented.has(name));
    expect(missing).toEqual([]);
  });

  it.each(Object.keys(SECTIONS).filter((heading) => SECTIONS[heading]!.length > 0))(
    'lists under "%s" only variables that every app it applies to reads',
    (heading) => {
      const stray = (sections.get(heading) ?? []).flatMap((name) =>
        SECTIONS[heading]!.filter((app) => !(name in SCHEMAS[app]!.shape)).map((app) => `${name} (${app})`),
      );
      expect(stray).toEqual([]);
    },
  );
});
