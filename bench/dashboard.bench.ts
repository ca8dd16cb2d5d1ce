/**
 * Dashboard benchmark (`npm run bench:dashboard [-- options]`), not a test: what a person waits for in
 * the browser, against a system started with `npm start` (the development identity provider signs in).
 *
 * In headless Debian chromium (playwright-core, as the browser tests), one admin signs in through the
 * provider's form, and then, round after round:
 * - overview: from a click on "Overview" in the navigation (from the Devices page, after the app's
 *   10 s staleTime, so the figures are fetched, not shown from its cache) until the four summary
 *   figures and the four charts are drawn, counting the API requests it made;
 * - cold: a new page load of `/` until the overview is drawn: tokens live in memory, so this includes
 *   the sign-in round trip through the provider (whose session answers without its form);
 * - baseline, in the same run: a new page load of the gateway's `/livez` (plain JSON, no script) until
 *   the load event: what any page of this origin costs on this machine.
 * Reports p50 and p99 of each and the overview's ratio to the baseline; the JavaScript the app loads
 * (gzipped, as the gateway sends it: dist/apps/dashboard/assets).
 * Target (issue 29): overview drawn ≤ 1 s after navigation; ≤ 4 API requests; JavaScript ≤ 250 kB gzipped.
 *
 * Options (flag or environment variable):
 *   --port N      BENCH_PORT      the gateway's port of npm start (8080)
 *   --rounds N    BENCH_ROUNDS    measured rounds of each scenario (10; a round takes some 13 s)
 *   --warmup N    BENCH_WARMUP    rounds before them, not counted (2)
 * Exit code 0 when the measurement completed (whether or not the target is met), 1 on any error.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import type { Page } from 'playwright-core';
import { launchBrowser, openPage, signIn } from '../apps/e2e/src/browser/dashboard-browser';
import { machineDescription, parseOptions, percentile, table } from './bench-harness';

const options = parseOptions(
  process.argv.slice(2),
  process.env,
  {
    port: { variable: 'BENCH_PORT', fallback: 8080, min: 1 },
    rounds: { variable: 'BENCH_ROUNDS', fallback: 10, min: 1 },
    warmup: { variable: 'BENCH_WARMUP', fallback: 2, min: 0 },
  },
  {},
);
const origin = `http://localhost:${options.port}`;

async function overviewDrawn(page: Page): Promise<void> {
  await page.locator('dl.figures dd').nth(3).waitFor({ timeout: 30_000 });
  await page.locator('figure.chart svg').nth(3).waitFor({ timeout: 30_000 });
}

async function timed(action: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await action();
  return performance.now() - started;
}

async function main(): Promise<void> {
  console.log(`dashboard benchmark at ${origin}; ${machineDescription()}`);
  const browser = await launchBrowser();
  try {
    const { page } = await openPage(browser);
    let apiRequests = 0;
    page.on('request', (request) => {
      if (new URL(request.url()).pathname.startsWith('/api/')) apiRequests++;
    });
    await page.goto(`${origin}/`);
    await signIn(page, 'bench-admin@dashboard.test', 'Bench Admin');
    await overviewDrawn(page);
    const nav = page.getByRole('navigation', { name: 'Main' });

    const samples = { overview: [] as number[], cold: [] as number[], baseline: [] as number[] };
    const requests: number[] = [];
    const coldRequests: number[] = [];
    for (let round = 0; round < options.warmup + options.rounds; round++) {
      const counted = round >= options.warmup;
      await nav.getByRole('link', { name: 'Devices' }).click();
      await page.getByRole('heading', { level: 1, name: 'Devices' }).waitFor();
      // Past the app's staleTime (10 s): the overview fetches its figures as a first visit would.
      await sleep(11_000);
      apiRequests = 0;
      const overview = await timed(async () => {
        await nav.getByRole('link', { name: 'Overview' }).click();
        await overviewDrawn(page);
      });
      const baseline = await timed(async () => {
        await page.goto(`${origin}/livez`, { waitUntil: 'load' });
      });
      const navigationRequests = apiRequests;
      apiRequests = 0;
      const cold = await timed(async () => {
        // Tokens live in memory: a new load signs in again, through the provider and back (its session
        // answers without the form).
        await page.goto(`${origin}/`);
        await overviewDrawn(page);
      });
      if (!counted) continue;
      samples.overview.push(overview);
      samples.cold.push(cold);
      samples.baseline.push(baseline);
      requests.push(navigationRequests);
      coldRequests.push(apiRequests);
    }

    const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
    const p50 = (values: number[]) => percentile(sorted(values), 50);
    const p99 = (values: number[]) => percentile(sorted(values), 99);
    const ms = (value: number) => value.toFixed(0);
    console.log(
      `\n${table(
        ['scenario', 'p50 ms', 'p99 ms', '× baseline p50'],
        [
          [
            'overview (navigation → figures and charts drawn)',
            ms(p50(samples.overview)),
            ms(p99(samples.overview)),
            (p50(samples.overview) / p50(samples.baseline)).toFixed(1),
          ],
          [
            'cold (page load, sign-in redirect → overview drawn)',
            ms(p50(samples.cold)),
            ms(p99(samples.cold)),
            (p50(samples.cold) / p50(samples.baseline)).toFixed(1),
          ],
          ['baseline (page load of /livez)', ms(p50(samples.baseline)), ms(p99(samples.baseline)), '1.0'],
        ],
        (column) => column > 0,
      )}`,
    );
    const assets = resolve(__dirname, '../dist/apps/dashboard/assets');
    const scripts = readdirSync(assets).filter((file) => file.endsWith('.js'));
    const gzipped = scripts.reduce(
      (sum, file) => sum + gzipSync(readFileSync(join(assets, file)), { level: 9 }).length,
      0,
    );
    console.log(
      `\noverview API requests: max ${Math.max(...requests)} per navigation, ${Math.max(...coldRequests)} per page load (target ≤ 4); JavaScript: ${scripts.length} file(s), ${(gzipped / 1024).toFixed(1)} kB gzipped (target ≤ 250 kB)`,
    );
  } finally {
    await browser.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
