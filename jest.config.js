// Three tiers, as in immich: unit (*.spec.ts, no I/O), integration (*.int-spec.ts: real PostgreSQL,
// NATS and ClickHouse, isolated per file) and end-to-end (*.e2e-spec.ts: real services over HTTP).
const { compilerOptions } = require('./tsconfig.base.json');

// '@sts/errors/*' -> '<rootDir>/libs/errors/src/*'
const moduleNameMapper = Object.fromEntries(
  Object.entries(compilerOptions.paths).map(([alias, [target]]) => [
    `^${alias.replace('/*', '/(.*)$')}`,
    `<rootDir>/${target.replace('*', '$1')}`,
  ]),
);

const swc = [
  '@swc/jest',
  { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } },
];

const common = {
  rootDir: __dirname,
  testEnvironment: 'node',
  moduleNameMapper,
  // jose, content-disposition and cookie are published as ESM only; swc turns it into CommonJS for jest's module system.
  transform: { '^.+\\.(t|j)s$': swc },
  transformIgnorePatterns: ['/node_modules/(?!(jose|content-disposition|cookie)/)'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  // The bundles' pruned package.json files would collide with the apps' own in jest's module map.
  modulePathIgnorePatterns: ['<rootDir>/dist/'],
};

module.exports = {
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/{apps,libs,scripts}/**/*.spec.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/{apps,libs,deploy,scripts}/**/*.int-spec.ts'],
      setupFilesAfterEnv: ['<rootDir>/tools/jest/slow-tests.setup.js'],
    },
    {
      // The analytics and events specs again, on the local cluster (tools/jest/cluster-topology.setup.js).
      ...common,
      displayName: 'cluster',
      testMatch: [
        '<rootDir>/libs/{analytics-infra,clickhouse}/**/*.int-spec.ts',
        '<rootDir>/libs/nats/src/{events,batch-consumer}.int-spec.ts',
        // Compares ClickHouse versions, not topologies: once is enough.
        '!**/current-clickhouse.int-spec.ts',
        // Cuts the one address analytics has of ClickHouse; on a cluster it writes to each shard's replicas
        // at their own addresses (docs/decisions.md), which analytics-faults.cluster-spec.ts takes down.
        '!**/device-purge-outage.int-spec.ts',
      ],
      setupFiles: ['<rootDir>/tools/jest/cluster-topology.setup.js'],
      setupFilesAfterEnv: ['<rootDir>/tools/jest/slow-tests.setup.js'],
    },
    {
      // Specs that kill the local cluster's nodes (*.cluster-spec.ts): a run of their own, one file at a
      // time, after the rest (scripts/test.sh), so that no other spec meets a node they took down.
      ...common,
      displayName: 'cluster-faults',
      testMatch: ['<rootDir>/{apps,libs,scripts}/**/*.cluster-spec.ts'],
      setupFiles: ['<rootDir>/tools/jest/cluster-topology.setup.js'],
      setupFilesAfterEnv: [
        '<rootDir>/tools/jest/slow-tests.setup.js',
        '<rootDir>/tools/jest/cluster-health.setup.js',
      ],
    },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/{apps,libs}/**/*.e2e-spec.ts'],
      setupFilesAfterEnv: ['<rootDir>/tools/jest/slow-tests.setup.js'],
    },
    {
      // The dashboard in a real browser (headless Debian chromium through playwright-core) against the
      // whole system, as the e2e tier starts it; needs the dashboard's build (npm run build).
      ...common,
      displayName: 'browser',
      testMatch: ['<rootDir>/apps/e2e/src/**/*.browser-spec.ts'],
      setupFilesAfterEnv: ['<rootDir>/tools/jest/slow-tests.setup.js'],
    },
  ],
};
