// @ts-check
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

// @nx/enforce-module-boundaries reads Nx's cached project graph and, without one, skips itself with a
// warning. Outside an Nx task (plain `npx eslint`, an editor, a fresh clone) bring the graph up to date first;
// building it loads this file again (Nx's ESLint plugin reads the configuration), hence the guard. Inside
// any Nx process (a task, or Nx's plugin worker building the graph) this must not run: the child would wait
// for the graph its parent is building.
const insideNx = process.argv.some((arg) => /[\\/]nx[\\/](dist|bin)[\\/]/.test(arg));
if (!insideNx && !process.env.NX_TASK_TARGET_PROJECT && !process.env.STS_BUILDING_PROJECT_GRAPH) {
  execFileSync(process.execPath, [createRequire(import.meta.url).resolve('nx/bin/nx'), 'show', 'projects'], {
    cwd: import.meta.dirname,
    env: { ...process.env, NX_DAEMON: 'false', STS_BUILDING_PROJECT_GRAPH: '1' },
    stdio: 'ignore',
  });
}

/**
 * Module boundaries. Scopes keep each service's code to itself; types keep layers honest:
 * domain code may use only plain utilities (no transports, drivers or generated contracts),
 * adapters translate between the domain and the outside world, apps only compose.
 */
const typeConstraints = [
  { sourceTag: 'type:util', onlyDependOnLibsWithTags: ['type:util'] },
  { sourceTag: 'type:contract', onlyDependOnLibsWithTags: [] },
  { sourceTag: 'type:domain', onlyDependOnLibsWithTags: ['type:util'] },
  { sourceTag: 'type:transport', onlyDependOnLibsWithTags: ['type:util', 'type:contract'] },
  { sourceTag: 'type:driver', onlyDependOnLibsWithTags: ['type:util'] },
  // The one way a service process runs (database, NATS, outbox, consumers, gRPC server).
  {
    sourceTag: 'type:host',
    onlyDependOnLibsWithTags: ['type:util', 'type:contract', 'type:transport', 'type:driver'],
  },
  {
    sourceTag: 'type:adapter',
    onlyDependOnLibsWithTags: [
      'type:domain',
      'type:util',
      'type:contract',
      'type:transport',
      'type:driver',
      'type:host',
    ],
  },
  {
    sourceTag: 'type:testing',
    onlyDependOnLibsWithTags: ['type:util', 'type:contract', 'type:transport', 'type:driver', 'type:testing'],
  },
  { sourceTag: 'type:e2e', onlyDependOnLibsWithTags: ['*'] },
  {
    sourceTag: 'type:app',
    onlyDependOnLibsWithTags: [
      'type:adapter',
      'type:host',
      'type:domain',
      'type:util',
      'type:contract',
      'type:transport',
      'type:driver',
      'type:testing',
    ],
  },
];
const scopeConstraints = [
  { sourceTag: 'scope:shared', onlyDependOnLibsWithTags: ['scope:shared'] },
  { sourceTag: 'scope:gateway', onlyDependOnLibsWithTags: ['scope:gateway', 'scope:shared'] },
  { sourceTag: 'scope:identity', onlyDependOnLibsWithTags: ['scope:identity', 'scope:shared'] },
  { sourceTag: 'scope:notification', onlyDependOnLibsWithTags: ['scope:notification', 'scope:shared'] },
  { sourceTag: 'scope:billing', onlyDependOnLibsWithTags: ['scope:billing', 'scope:shared'] },
  { sourceTag: 'scope:enrollment', onlyDependOnLibsWithTags: ['scope:enrollment', 'scope:shared'] },
  { sourceTag: 'scope:agent', onlyDependOnLibsWithTags: ['scope:agent', 'scope:shared'] },
  { sourceTag: 'scope:analytics', onlyDependOnLibsWithTags: ['scope:analytics', 'scope:shared'] },
  { sourceTag: 'scope:dev', onlyDependOnLibsWithTags: ['scope:dev', 'scope:shared'] },
  // End-to-end tests start every service in one process, so they may reach every scope.
  { sourceTag: 'scope:e2e', onlyDependOnLibsWithTags: ['*'] },
];
// Tests may additionally use the testing libraries; production code may not.
const withTesting = (constraints) =>
  constraints.map((c) =>
    c.sourceTag.startsWith('type:') && c.sourceTag !== 'type:contract'
      ? {
          ...c,
          onlyDependOnLibsWithTags: [
            ...new Set([
              ...c.onlyDependOnLibsWithTags,
              'type:testing',
              'type:transport',
              'type:driver',
              'type:contract',
            ]),
          ],
        }
      : c,
  );
const testFiles = [
  '**/*.spec.ts',
  '**/*.int-spec.ts',
  '**/*.e2e-spec.ts',
  '**/*.cluster-spec.ts',
  '**/test/**/*.ts',
];

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', 'libs/proto/src/gen/**', '.nx/**', '.dev/**', 'tmp/**'] },
  ...nx.configs['flat/base'],
  ...tseslint.configs.recommendedTypeChecked,
  prettier,
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // Fastify plugins and async handlers are async by contract even when they do not await.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          banTransitiveDependencies: false,
          depConstraints: [...typeConstraints, ...scopeConstraints],
        },
      ],
    },
  },
  {
    files: testFiles,
    rules: {
      '@typescript-eslint/unbound-method': 'off',
      // jest's asymmetric matchers (expect.any, expect.objectContaining) are typed `any`.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@nx/enforce-module-boundaries': [
        'error',
        { depConstraints: [...withTesting(typeConstraints), ...scopeConstraints] },
      ],
    },
  },
  {
    // Command-line programs and benchmarks talk to a terminal.
    files: ['apps/dev-idp/src/cli.ts', 'bench/**/*.ts', 'scripts/**/*.ts', 'apps/*/src/main.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    // The web dashboard runs in a browser (its own tsconfig: DOM, JSX).
    files: ['apps/dashboard/**/*.ts', 'apps/dashboard/**/*.tsx', 'apps/dashboard/**/*.mts'],
    languageOptions: {
      globals: { ...globals.browser },
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
  },
  {
    files: ['**/*.mjs', '**/*.js', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
  },
);
