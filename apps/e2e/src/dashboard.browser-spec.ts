import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page, Request } from 'playwright-core';
import {
  launchBrowser,
  openPage,
  screenshot,
  seriousAccessibilityViolations,
  signIn,
  SCREENSHOT_DIR,
} from './browser/dashboard-browser';
import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
} from '@sts/stand-ins/https-receiver';
import {
  enrollAgent,
  enrollDevice,
  eventually,
  runAgent,
  startSystem,
  type SystemUnderTest,
} from './system-under-test';

/** A browser test waits for what a person would see; a page that never shows it fails within this. */
const SHOWN_MS = 15_000;

describe('the dashboard in a real browser', () => {
  let system: SystemUnderTest;
  let browser: Browser;
  let admin: Page;
  let adminProblems: string[];
  let agentDir: string;
  let receiver: HttpsReceiver;
  const timings: Record<string, number> = {};

  beforeAll(async () => {
    agentDir = await mkdtemp(join(tmpdir(), 'sts-dashboard-agent-'));
    // An alert receiver over HTTPS with a certificate of a test authority the notification service trusts.
    const ca = await testCertificateAuthority();
    receiver = await startHttpsReceiver(ca);
    await writeFile(join(agentDir, 'ca.pem'), ca.certPem);
    [system, browser] = await Promise.all([
      startSystem({
        dashboard: true,
        // Access tokens of 75 s: the dashboard renews them (a minute before they expire) while it runs.
        tokenTtlSeconds: 75,
        notificationEnv: {
          ALERT_ALLOW_PRIVATE_NETWORKS: 'true',
          ALERT_EXTRA_CA_FILE: join(agentDir, 'ca.pem'),
        },
      }),
      launchBrowser(),
    ]);
  }, 120_000);

  afterAll(async () => {
    await writeFile(join(SCREENSHOT_DIR, 'timings.json'), `${JSON.stringify(timings, null, 2)}\n`).catch(
      () => undefined,
    );
    await browser?.close();
    await system?.stop();
    await receiver?.close();
    if (agentDir) await rm(agentDir, { recursive: true, force: true });
  });

  afterEach(() => {
    // No page may break the Content-Security-Policy or throw.
    expect(adminProblems ?? []).toEqual([]);
  });

  const mainNav = (page: Page) => page.getByRole('navigation', { name: 'Main' });

  /** The overview's four figures and its four charts are on screen. */
  async function overviewDrawn(page: Page): Promise<void> {
    await page.locator('dl.figures dd').nth(3).waitFor({ timeout: SHOWN_MS });
    await page.locator('figure.chart svg').nth(3).waitFor({ timeout: SHOWN_MS });
  }

  function apiRequests(page: Page): string[] {
    const seen: string[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.pathname.startsWith('/api/')) seen.push(`${request.method()} ${url.pathname}`);
    });
    return seen;
  }

  it('signs an admin in through the identity provider and draws the overview (figures and a chart per metric) with at most 4 API requests', async () => {
    ({ page: admin, problems: adminProblems } = await openPage(browser));
    await admin.goto(`${system.gateway.url}/`);
    // Not signed in: the dashboard sends the browser to the provider's sign-in form (PKCE).
    await admin.waitForURL((url) => url.href.startsWith(`${system.idp.issuer}/authorize`), {
      timeout: SHOWN_MS,
    });
    expect(new URL(admin.url()).searchParams.get('code_challenge_method')).toBe('S256');
    const requests = apiRequests(admin);
    await signIn(admin, 'ada@dashboard.test', 'Ada Admin');
    await admin.waitForURL((url) => url.pathname === '/auth/callback', { timeout: SHOWN_MS });
    const landed = Date.now();
    await overviewDrawn(admin);
    timings.overviewAfterSignInMs = Date.now() - landed;
    await admin.waitForLoadState('networkidle');
    expect(new URL(admin.url()).pathname).toBe('/');
    expect(await admin.getByRole('heading', { level: 1 }).innerText()).toBe('Overview');
    expect(requests.length).toBeLessThanOrEqual(4);
    timings.overviewApiRequests = requests.length;
    // The session is the user's own: their name in the header.
    await admin.getByText('Ada Admin').first().waitFor({ timeout: SHOWN_MS });
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'overview');
  });

  it('renews its access token silently with the refresh token, and goes on calling the API with the new one', async () => {
    const bearers = new Set<string>();
    let refreshed = false;
    const watch = (request: Request) => {
      const url = new URL(request.url());
      if (url.pathname.startsWith('/api/')) bearers.add(request.headers().authorization ?? '');
      if (
        url.href === `${system.idp.issuer}/oauth/token` &&
        request.postData()?.includes('grant_type=refresh_token')
      )
        refreshed = true;
    };
    admin.on('request', watch);
    try {
      // Sign-in was a few seconds ago; the renewal is due 15 s after it. The bell polls every 15 s.
      await eventually(() => refreshed && bearers.size >= 2, 45_000);
      expect(admin.url().startsWith(system.gateway.url)).toBe(true);
    } finally {
      admin.off('request', watch);
    }
  });

  it('enrolls a device with the agent and a code from the Enrollment page, and lists it', async () => {
    await admin.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Enrollment' }).click();
    await admin.getByRole('heading', { name: 'Enrollment key' }).waitFor({ timeout: SHOWN_MS });
    // A new organization has no key: create one, then show it.
    const keyAction = admin.getByRole('button', { name: /^(Create enrollment key|Show key)$/ });
    await keyAction.waitFor({ timeout: SHOWN_MS });
    if ((await keyAction.innerText()) === 'Create enrollment key') await keyAction.click();
    // A key just created is shown; one that existed is masked until asked.
    const visibility = admin.getByRole('button', { name: /^(Show|Hide) key$/ });
    await visibility.waitFor({ timeout: SHOWN_MS });
    if ((await visibility.innerText()) === 'Show key') await visibility.click();
    const key = (await admin.locator('code[aria-label="Enrollment key"]').innerText()).trim();
    expect(key).toMatch(/^sts_ek_/);
    await admin.getByLabel('Number of codes').fill('2');
    await admin.getByRole('button', { name: /generate/i }).click();
    const code = (await admin.locator('text=/^[A-Z0-9]{4}-[A-Z0-9]{4}$/').first().innerText()).trim();
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'enrollment');

    const config = join(agentDir, 'agent.json');
    const enrolled = await enrollAgent(system, {
      key,
      code,
      config,
      machineId: 'dashboard-laptop-1',
      hostname: 'laptop-ada',
    });
    expect(enrolled.stderr).toBe('');
    expect(enrolled.code).toBe(0);

    await admin.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Devices' }).click();
    await admin.getByRole('row').filter({ hasText: 'laptop-ada' }).waitFor({ timeout: SHOWN_MS });
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'devices');
  });

  it("shows what the agent reports in the figures, which it reads again every 15 s, and on the device's own page", async () => {
    const config = join(agentDir, 'agent.json');
    const simulated = await runAgent(
      'simulate',
      '--events',
      '200',
      '--hours',
      '2',
      '--seed',
      '3',
      '--config',
      config,
    );
    expect(simulated.code).toBe(0);
    const deviceId = (JSON.parse(await readFile(config, 'utf8')) as { device_id: string }).device_id;
    await eventually(async () => {
      const summary = await system.api<{ total_analyzed: number }>(
        'GET',
        '/api/analytics/summary?window=24h',
        {
          token: await system.tokenFor('ada@dashboard.test', { name: 'Ada Admin' }),
        },
      );
      return summary.body.total_analyzed === 200;
    });
    expect(deviceId).toBeTruthy();

    const requests = apiRequests(admin);
    const started = Date.now();
    await admin.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Overview' }).click();
    await overviewDrawn(admin);
    timings.overviewNavigationMs = Date.now() - started;
    await admin
      .locator('.figure-total_analyzed dd')
      .filter({ hasText: '200' })
      // The figures are read again every 15 s.
      .waitFor({ timeout: 20_000 });
    expect(requests.length).toBeLessThanOrEqual(4);
    await screenshot(admin, 'overview-with-traffic');

    // The device's own page: its details and its own figures.
    await mainNav(admin).getByRole('link', { name: 'Devices' }).click();
    await admin.getByRole('link', { name: 'laptop-ada' }).click();
    await admin.getByRole('heading', { level: 1, name: 'Device laptop-ada' }).waitFor({ timeout: SHOWN_MS });
    await admin
      .locator('.figure-total_analyzed dd')
      .filter({ hasText: '200' })
      .waitFor({ timeout: SHOWN_MS });
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'device');

    // Opened by its address (a bookmark, a reload), the page asks for this one device, not the list.
    const direct = apiRequests(admin);
    await admin.reload();
    await admin.getByRole('heading', { level: 1, name: 'Device laptop-ada' }).waitFor({ timeout: SHOWN_MS });
    expect(direct).toContain(`GET /api/devices/${deviceId}`);
    expect(direct).not.toContain('GET /api/devices');
  });

  it('disables, enables and deletes a device, deleting only after confirmation', async () => {
    await admin.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Devices' }).click();
    const row = admin.getByRole('row').filter({ hasText: 'laptop-ada' });
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByRole('button', { name: 'Enable' }).waitFor({ timeout: SHOWN_MS });
    await row.getByRole('button', { name: 'Enable' }).click();
    await row.getByRole('button', { name: 'Disable' }).waitFor({ timeout: SHOWN_MS });

    const page = await row.getByRole('link', { name: 'laptop-ada' }).getAttribute('href');
    expect(page).toMatch(/^\/devices\/[0-9a-f-]{36}$/);
    await row.getByRole('button', { name: 'Delete device' }).click();
    const dialog = admin.getByRole('dialog', { name: 'Delete laptop-ada?' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await row.count()).toBe(1);
    await row.getByRole('button', { name: 'Delete device' }).click();
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await row.waitFor({ state: 'detached', timeout: SHOWN_MS });
    const listed = await system.api<unknown[]>('GET', '/api/devices', {
      token: await system.tokenFor('ada@dashboard.test', { name: 'Ada Admin' }),
    });
    expect(listed.body).toEqual([]);
    // Its page, opened by its address, says it is not there.
    await admin.goto(`${system.gateway.url}${page!}`);
    await admin.getByRole('alert').filter({ hasText: 'Not found' }).waitFor({ timeout: SHOWN_MS });
    await mainNav(admin).getByRole('link', { name: 'Devices' }).click();
  });

  const adminToken = () => system.tokenFor('ada@dashboard.test', { name: 'Ada Admin' });

  it('invites an analyst, who accepts through the e-mail link, signs in, is offered only what an analyst may do, and sees a plain page once an admin turns their dashboard access off', async () => {
    await enrollDevice(system, await adminToken(), 'dashboard-kiosk-7', 'kiosk-7');
    await mainNav(admin).getByRole('link', { name: 'Members' }).click();
    await admin.getByLabel('E-mail address').fill('ana@dashboard.test');
    await admin.getByLabel('Role', { exact: true }).selectOption('ANALYST');
    await admin.getByRole('button', { name: 'Send invite' }).click();
    await admin.getByText('Invitation sent to ana@dashboard.test').waitFor({ timeout: SHOWN_MS });
    await admin
      .getByRole('region', { name: 'Pending invites' })
      .getByText('ana@dashboard.test')
      .waitFor({ timeout: SHOWN_MS });
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'members');

    // The e-mail links to the dashboard's accept page, the token in the fragment (never sent to a server).
    const mail = await system.mail.waitFor((m) => m.to.includes('ana@dashboard.test'), 10_000);
    const link = /https?:\/\/\S+\/invites\/accept#token=\S+/.exec(mail.text ?? '')?.[0];
    expect(link?.startsWith(`${system.gateway.url}/invites/accept#token=`)).toBe(true);
    const token = new URLSearchParams(new URL(link!).hash.slice(1)).get('token')!;
    const analyst = await openPage(browser);
    try {
      const requested: string[] = [];
      analyst.page.on('request', (request) => requested.push(request.url()));
      await analyst.page.goto(link!);
      // Who invites, and as what, shows before anything is accepted.
      await analyst.page
        .getByText(/invites ana@dashboard\.test to join it as Analyst/)
        .waitFor({ timeout: SHOWN_MS });
      // The page took the token out of its address (and so out of history) as soon as it had read it.
      expect(analyst.page.url()).toBe(`${system.gateway.url}/invites/accept`);
      expect(requested.filter((url) => url.includes(token))).toEqual([]);
      expect(await seriousAccessibilityViolations(analyst.page)).toEqual([]);
      await analyst.page.getByRole('button', { name: 'Accept invitation' }).click();
      await analyst.page.getByText('Invitation accepted').waitFor({ timeout: SHOWN_MS });
      // Until Ana signs in, her admin sees the invite as accepted, not joined, and could still revoke it.
      await admin.reload();
      await admin
        .getByRole('region', { name: 'Accepted, not joined yet' })
        .getByRole('row')
        .filter({ hasText: 'ana@dashboard.test' })
        .getByRole('button', { name: 'Revoke' })
        .waitFor({ timeout: SHOWN_MS });
      // The link, opened again, says the invitation is spent, and offers no accept. Opened in the form
      // of links sent before (the token in the query), so that those still work, and leave the address too.
      const again = await openPage(browser);
      try {
        await again.page.goto(link!.replace('#token=', '?token='));
        await again.page
          .getByRole('alert')
          .filter({ hasText: 'This invitation cannot be opened' })
          .waitFor({ timeout: SHOWN_MS });
        expect(await again.page.getByRole('button', { name: 'Accept invitation' }).count()).toBe(0);
        expect(again.page.url()).toBe(`${system.gateway.url}/invites/accept`);
      } finally {
        await again.context.close();
      }
      await analyst.page.getByRole('button', { name: 'Sign in' }).click();
      // While the provider's form is open, the sign-in request's state waits in the tab's sessionStorage:
      // the dashboard's origin has nothing in localStorage (which every tab shares, and which outlives them).
      await analyst.page.getByLabel('E-mail', { exact: true }).waitFor({ timeout: SHOWN_MS });
      const stored = await analyst.context.storageState();
      expect(
        stored.origins
          .filter((origin) => origin.origin === new URL(system.gateway.url).origin)
          .flatMap((origin) => origin.localStorage),
      ).toEqual([]);
      await signIn(analyst.page, 'ana@dashboard.test', 'Ana Analyst');
      await overviewDrawn(analyst.page);
      expect(await analyst.page.getByText('Analyst', { exact: true }).count()).toBeGreaterThan(0);

      // No enrollment page, no deletion; disabling and enabling devices stay an analyst's.
      const links = await mainNav(analyst.page).getByRole('link').allInnerTexts();
      expect(links).not.toContain('Enrollment');
      await mainNav(analyst.page).getByRole('link', { name: 'Devices' }).click();
      const row = analyst.page.getByRole('row').filter({ hasText: 'kiosk-7' });
      await row.getByRole('button', { name: 'Disable' }).waitFor({ timeout: SHOWN_MS });
      expect(await row.getByRole('button', { name: 'Delete device' }).count()).toBe(0);
      await mainNav(analyst.page).getByRole('link', { name: 'Members' }).click();
      await analyst.page.getByRole('heading', { name: 'Members' }).first().waitFor({ timeout: SHOWN_MS });
      expect(await analyst.page.getByRole('button', { name: 'Send invite' }).count()).toBe(0);
      expect(await analyst.page.getByRole('button', { name: 'Remove' }).count()).toBe(0);
      expect(await seriousAccessibilityViolations(analyst.page)).toEqual([]);
      await screenshot(analyst.page, 'analyst-members');

      // The admin turns the analyst's dashboard access off: the analyst's next load shows a plain page.
      // (A reload: the admin's member list was read before the analyst joined; the provider's session
      // signs the admin in again without the form.)
      await admin.reload();
      const access = admin.getByRole('checkbox', { name: 'Dashboard access for Ana Analyst' });
      // A click, not uncheck(): the box shows the server's state, so it changes only once the change is saved
      // (uncheck() fails when the box has not changed right after its click, as on a loaded machine).
      await access.click();
      await eventually(async () => !(await access.isChecked()) && !(await access.isDisabled()));
      await analyst.page.reload();
      await analyst.page
        .getByRole('heading', { name: 'Your dashboard access is turned off' })
        .waitFor({ timeout: SHOWN_MS });
      expect(await seriousAccessibilityViolations(analyst.page)).toEqual([]);
      expect(analyst.problems).toEqual([]);
    } finally {
      await analyst.context.close();
    }
  });

  it('adds an alert endpoint, shows its secret once, and lists a test delivery in its log', async () => {
    await mainNav(admin).getByRole('link', { name: 'Alerts' }).click();
    await admin.getByLabel('URL (https://)').fill(`${receiver.url}/siem`);
    await admin.getByLabel('Description (optional)').fill('SIEM');
    await admin.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = admin.locator('code.secret');
    await secret.waitFor({ timeout: SHOWN_MS });
    expect(await secret.innerText()).toMatch(/^whsec_/);
    await admin.getByRole('button', { name: 'I have saved the secret' }).click();
    expect(await admin.locator('code.secret').count()).toBe(0);

    await admin.getByRole('button', { name: 'Send test' }).click();
    // Sending a test opens the endpoint's delivery log.
    await admin.getByText('Test message queued').waitFor({ timeout: SHOWN_MS });
    const log = admin.getByRole('table', { name: /Recent deliveries/ });
    await log
      .getByRole('row')
      .filter({ hasText: /delivered/i })
      .waitFor({ timeout: 20_000 });
    expect(receiver.requests.some((request) => request.path === '/siem')).toBe(true);
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'alerts');
  });

  it('checks out on Stripe and shows the license the payment brought', async () => {
    await mainNav(admin).getByRole('link', { name: 'Billing' }).click();
    await admin.getByRole('heading', { name: 'License' }).waitFor({ timeout: SHOWN_MS });
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'billing');
    await admin.getByLabel('Pro', { exact: true }).check();
    await admin.getByText('Annual', { exact: true }).click();
    await admin.getByRole('button', { name: 'Continue to checkout' }).click();
    // Stripe's hosted checkout (the stand-in's page): paying sends the signed event to the webhook and
    // the browser back to the success URL.
    await admin.waitForURL((url) => url.href.startsWith(`${system.stripe.url}/checkout/`), {
      timeout: SHOWN_MS,
    });
    await admin.getByRole('button', { name: /^Pay / }).click();
    // Back from Stripe: a new page load, and tokens live in memory only, so the dashboard signs in
    // again; the provider's session (its cookie) sends the browser straight back, without the form.
    await admin.waitForURL((url) => url.pathname === '/billing' && url.search === '?checkout=success', {
      timeout: SHOWN_MS,
    });
    await admin.getByText('Payment received').waitFor({ timeout: SHOWN_MS });
    const license = admin.getByRole('region', { name: 'License' });
    await license.getByText('Active', { exact: true }).waitFor({ timeout: SHOWN_MS });
    expect(await license.getByText('Pro', { exact: true }).count()).toBe(1);
    await screenshot(admin, 'billing-active');
  });

  it('lists the notifications newest first with the unread count in the bell, and marks them all read', async () => {
    await mainNav(admin).getByRole('link', { name: 'Notifications' }).click();
    // The checkout, the payment and the analyst who joined are in the feed, unread.
    await admin.getByText(/Subscription active: Pro/).waitFor({ timeout: SHOWN_MS });
    const bell = admin.getByRole('link', { name: /^\d+ unread$/ });
    await bell.waitFor({ timeout: SHOWN_MS });
    expect(await seriousAccessibilityViolations(admin)).toEqual([]);
    await screenshot(admin, 'notifications');
    await admin.getByRole('button', { name: 'Mark all read' }).click();
    await admin.getByRole('link', { name: 'None unread' }).waitFor({ timeout: SHOWN_MS });
  });

  it('is usable at phone width: nothing wider than the screen, the navigation behind a button', async () => {
    const phone = await openPage(browser, { width: 375, height: 800 });
    try {
      await phone.page.goto(`${system.gateway.url}/devices`);
      await signIn(phone.page, 'ada@dashboard.test', 'Ada Admin');
      await phone.page.getByRole('heading', { level: 1, name: 'Devices' }).waitFor({ timeout: SHOWN_MS });
      const width = Number(await phone.page.evaluate('document.scrollingElement.scrollWidth'));
      expect(width).toBeLessThanOrEqual(375);
      expect(await seriousAccessibilityViolations(phone.page)).toEqual([]);
      await screenshot(phone.page, 'devices-phone');
      expect(phone.problems).toEqual([]);
    } finally {
      await phone.context.close();
    }
  });

  it('is reachable from the keyboard: a skip link first, then the navigation', async () => {
    // A page load (after a navigation inside the app the focus goes to the new page's heading).
    await admin.goto(`${system.gateway.url}/`);
    await overviewDrawn(admin);
    await admin.keyboard.press('Tab');
    expect(await admin.evaluate('document.activeElement.textContent.trim()')).toBe('Skip to main content');
    await admin.keyboard.press('Enter');
    expect(new URL(admin.url()).hash).toBe('#main');
    // Every link of the navigation takes the focus in turn, and Enter follows it.
    await mainNav(admin).getByRole('link', { name: 'Devices' }).focus();
    await admin.keyboard.press('Enter');
    await admin.getByRole('heading', { level: 1, name: 'Devices' }).waitFor({ timeout: SHOWN_MS });
  });

  it('signs out at the identity provider: the next visit asks again', async () => {
    await admin.getByRole('button', { name: 'Sign out' }).click();
    // Back at the dashboard without a session, which sends the browser to the provider's form.
    await admin.getByLabel('E-mail', { exact: true }).waitFor({ timeout: SHOWN_MS });
    expect(admin.url().startsWith(system.idp.issuer)).toBe(true);
  });
});
