import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * scripts/ensure-deps.sh installs exactly the locked tree: a lock file that no longer matches package.json
 * stops `npm start` and `npm test` with a clear message instead of being re-resolved by `npm install`.
 */
describe('scripts/ensure-deps.sh', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sts-ensure-deps-'));
    mkdirSync(join(dir, 'scripts'));
    cpSync(join(__dirname, 'ensure-deps.sh'), join(dir, 'scripts', 'ensure-deps.sh'));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses a lock file out of step with package.json, installing nothing', () => {
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'stale', version: '1.0.0', dependencies: { 'left-pad': '1.3.0' } }),
    );
    writeFileSync(
      join(dir, 'package-lock.json'),
      JSON.stringify({
        name: 'stale',
        version: '1.0.0',
        lockfileVersion: 3,
        requires: true,
        packages: { '': { name: 'stale', version: '1.0.0' } },
      }),
    );
    const run = spawnSync('bash', [join(dir, 'scripts', 'ensure-deps.sh')], { encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('run `npm install` and commit package-lock.json');
    expect(existsSync(join(dir, 'node_modules', 'left-pad'))).toBe(false);
    // The lock file is left as it was.
    const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, unknown>;
    };
    expect(lock.packages['']).toEqual({
      name: 'stale',
      version: '1.0.0',
    });
  });
});
