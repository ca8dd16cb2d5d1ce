import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * Every file or folder of the repository that README.md and docs/ name exists: docs that point at a
 * deleted bench script or a renamed module mislead the next reader. A path counts when it starts at one
 * of the repository's top-level folders; patterns (`*`, `<app>`, `{a,b}`, `X-domain`) are not paths.
 */
const ROOT = resolve(__dirname, '..');
const TOP_LEVEL = ['apps', 'libs', 'scripts', 'bench', 'deploy', 'docs', 'tools', '.ci'];
const PATH = new RegExp(
  `(?<![\\w./-])(?:${TOP_LEVEL.map((dir) => dir.replace('.', '\\.')).join('|')})/[\\w./-]*`,
  'g',
);
const PATTERN_MARKS = /[*<>{}$]|(^|\/|-)X(-|\/|$)/;

function documents(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join('docs', name));
  return ['README.md', ...docs];
}

function namedPaths(text: string): { line: number; path: string }[] {
  const found: { line: number; path: string }[] = [];
  text.split('\n').forEach((content, index) => {
    for (const match of content.matchAll(PATH)) {
      const end = match.index + match[0].length;
      // `libs/<name>/src`, `apps/*`: a pattern, not a path.
      if (PATTERN_MARKS.test(content.slice(match.index, end + 1))) continue;
      const path = match[0].replace(/[.:]+$/, '');
      found.push({ line: index + 1, path });
    }
  });
  return found;
}

describe('paths named in README.md and docs/', () => {
  it('finds paths in prose, code spans and links, and leaves patterns alone', () => {
    expect(
      namedPaths(
        'see `libs/db/src/x.ts`, [guide](deploy/README.md) and libs/a/b.ts.\nlibs/X-infra, apps/<app>/main.js',
      ),
    ).toEqual([
      { line: 1, path: 'libs/db/src/x.ts' },
      { line: 1, path: 'deploy/README.md' },
      { line: 1, path: 'libs/a/b.ts' },
    ]);
  });

  it.each(documents())('%s names only paths that exist', (document) => {
    const missing = namedPaths(readFileSync(join(ROOT, document), 'utf8'))
      .filter(({ path }) => !existsSync(join(ROOT, path)))
      .map(({ line, path }) => `${document}:${line} ${path}`);
    expect(missing).toEqual([]);
  });
});

describe("README's layout block", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const layout = readme.slice(
    readme.indexOf('## Layout'),
    readme.indexOf('```\n', readme.indexOf('## Layout') + 12),
  );
  /** The names the block lists under apps/ and libs/ (`<service>-domain` stands for every `*-domain` lib). */
  const listed = new Set([...layout.matchAll(/^ {2}(\S+)/gm)].map((match) => match[1]!));
  const services = ['identity', 'enrollment', 'analytics', 'notification', 'billing'];
  const covered = (name: string) =>
    listed.has(name) ||
    services.some((service) => name === `${service}-domain` || name === `${service}-infra`);

  it.each(['apps', 'libs'])('lists every folder of %s/', (folder) => {
    const folders = readdirSync(join(ROOT, folder), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    expect(folders.filter((name) => !covered(name))).toEqual([]);
  });
});
