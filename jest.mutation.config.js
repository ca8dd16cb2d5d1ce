// The tiers mutation testing runs (stryker.config.mjs). The domain libraries are pure logic with unit
// specs of their own: a mutant there is judged by the unit tier (seconds a mutant); their integration
// specs start real servers for every mutant and made a run take hours on two cores. The adapters are
// judged by their integration specs too (their bugs show only against the real servers), but by their
// own: the services' specs run every relay and consumer in the background, so each such mutant would be
// run against all of them.
const { projects } = require('./jest.config');

const ADAPTER_SPECS = [
  'libs/notification-infra/src/https-alert-sender.int-spec.ts',
  'libs/notification-infra/src/alert-deliveries.int-spec.ts',
  'libs/billing-infra/src/billing-service.int-spec.ts',
  'libs/billing-infra/src/stripe-payment-provider.int-spec.ts',
  'libs/outbox/src/outbox.int-spec.ts',
  'libs/outbox/src/outbox-replicas.int-spec.ts',
  'libs/nats/src/batch-consumer.int-spec.ts',
];

const scope = process.env.STS_MUTATE ?? '';
const tiers = scope.endsWith('-domain') ? ['unit'] : ['unit', 'integration'];

module.exports = {
  projects: projects
    .filter((project) => tiers.includes(project.displayName))
    .map((project) =>
      project.displayName === 'integration' && scope === 'adapters'
        ? { ...project, testMatch: ADAPTER_SPECS.map((spec) => `<rootDir>/${spec}`) }
        : project,
    ),
};
