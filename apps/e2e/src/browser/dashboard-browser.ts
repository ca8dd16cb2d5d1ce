import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

/** Where the browser tests save a screenshot of each page (docs/ takes a few of them). */
export const SCREENSHOT_DIR = resolve(__dirname, '../../../../tmp/screenshots');

/**
 * Debian's chromium (scripts/infra/ensure-chromium.sh installs it), headless, started the way a CI
 * container needs: no sandbox (no user namespaces there), no GPU, nothing fetched in the background.
 */
export async function launchBrowser(): Promise<Browser> {
  const executablePath =
    process.env.STS_CHROMIUM ??
    execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-default-apps',
      '--disable-sync',
      '--no-first-run',
      '--metrics-recording-only',
    ],
  });
}

/** A page that records what the browser refused or failed at: CSP violations, script errors. */
export async function openPage(
  browser: Browser,
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport, timezoneId: 'Europe/Berlin', locale: 'en-GB' });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy|Refused to/i.test(message.text()))
      problems.push(`console: ${message.text()}`);
  });
  return { context, page, problems };
}

/** Signs in through the development provider's form, from wherever the dashboard sent the browser. */
export async function signIn(page: Page, email: string, name: string): Promise<void> {
  await page.getByLabel('E-mail', { exact: true }).fill(email);
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown[] }[];
}

/**
 * The serious and critical accessibility violations axe-core finds on the page as it is now. axe is
 * evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern.
 */
export async function seriousAccessibilityViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map(
      (violation) =>
        `${violation.id} (${violation.impact}): ${violation.help} at ${violation.nodes
          .map((node) => JSON.stringify(node.target))
          .join(', ')}`,
    );
}
