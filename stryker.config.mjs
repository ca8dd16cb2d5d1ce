// Mutation testing (`npm run test:mutation`): plants small bugs in the domain libraries and the
// security-critical adapters, one at a time, and runs the tests that cover each; a mutant no test
// kills is a bug the suite would let through. Not part of `npm test` (too slow for every commit on two
// cores); incremental, so a re-run after a small change tests only the mutants it touches.
// Scores and the mutants judged equivalent: docs/testing.md.

/** The domain libraries, whole, and the adapters where a bug is a security hole or lost data. */
const SCOPES = {
  'analytics-domain': domain('analytics'),
  'billing-domain': domain('billing'),
  'enrollment-domain': domain('enrollment'),
  'identity-domain': domain('identity'),
  'notification-domain': domain('notification'),
  adapters: [
    'libs/notification-infra/src/https-alert-sender.ts',
    'libs/billing-infra/src/stripe-payment-provider.ts',
    'libs/gateway-http/src/auth/caller-context.ts',
    'libs/outbox/src/outbox-relay.ts',
    'libs/nats/src/batch-consumer.ts',
    'libs/nats/src/retry-delay.ts',
  ],
};

function domain(name) {
  return [
    `libs/${name}-domain/src/**/*.ts`,
    `!libs/${name}-domain/src/**/*.spec.ts`,
    `!libs/${name}-domain/src/test/**`,
  ];
}

// STS_MUTATE=<scope> (a key of SCOPES) mutates one scope, with its own reports and incremental file,
// so the scopes can be run one at a time (a whole run takes hours on two cores) and re-run apart.
const scope = process.env.STS_MUTATE;
if (scope !== undefined && !(scope in SCOPES))
  throw new Error(`STS_MUTATE must be one of ${Object.keys(SCOPES).join(', ')}; got ${scope}`);
const reportName = scope ?? 'all';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: scope ? SCOPES[scope] : Object.values(SCOPES).flat(),
  testRunner: 'jest',
  jest: {
    projectType: 'custom',
    configFile: 'jest.mutation.config.js',
    // Only the specs that load a mutated file run against it.
    enableFindRelatedTests: true,
  },
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.mutation.json',
  coverageAnalysis: 'perTest',
  // The adapters' static mutants (module-level constants: the zod schemas of Stripe's payloads, the SSRF
  // guard's fixed ranges) would each run every related integration spec, about 30 s a mutant and 80 % of
  // the scope's time (over two hours on two cores); they are reported as ignored, not counted.
  ignoreStatic: scope === 'adapters',
  incremental: true,
  incrementalFile: `reports/mutation/${reportName}.incremental.json`,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: `reports/mutation/${reportName}.html` },
  jsonReporter: { fileName: `reports/mutation/${reportName}.json` },
  // Two cores: one test process per core.
  concurrency: 2,
  // The integration specs start real servers: give a mutant's run room before calling it a timeout.
  timeoutMS: 30_000,
  tempDirName: 'tmp/stryker',
  cleanTempDir: 'always',
};
