import { initialLicense, type LicenseRecord } from './billing-model';
import { decideLicense, type PaymentFact, type SubscriptionFacts } from './license-transitions';

const t = (minute: number) => new Date(Date.UTC(2026, 10, 25, 12, minute));
const now = t(59);

const pending = (): LicenseRecord => ({ ...initialLicense('org-1', t(0)), status: 'onboarding' });

const subscription = (extra: Partial<SubscriptionFacts> = {}): SubscriptionFacts => ({
  id: 'sub_1',
  plan: 'pro',
  cycle: 'annual',
  status: 'active',
  currentPeriodEnd: new Date('2027-11-25T12:00:00Z'),
  endsAt: null,
  ...extra,
});

/** Applies facts in the order given; returns the license and what each decision was. */
function run(facts: [PaymentFact, Date][], start = pending()) {
  let license = start;
  const kinds: string[] = [];
  for (const [fact, created] of facts) {
    const decision = decideLicense(license, fact, created, now);
    kinds.push(decision.kind);
    if (decision.kind === 'change') license = decision.license;
  }
  return { license, kinds };
}

describe('license transitions (contract section 3)', () => {
  it('activates on checkout.session.completed with the plan, cycle and period end of the subscription', () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
    ]);
    expect(kinds).toEqual(['change']);
    expect(license).toMatchObject({
      status: 'active',
      plan: 'pro',
      billingCycle: 'annual',
      expiresAt: new Date('2027-11-25T12:00:00Z'),
      subscriptionId: 'sub_1',
      factsAsOf: t(1),
    });
  });

  it('renews on invoice.payment_succeeded, never backwards, and only an active license of the same subscription', () => {
    const renewed = subscription({ currentPeriodEnd: new Date('2028-11-25T12:00:00Z') });
    const { license, kinds } = run([
      [{ type: 'invoice.payment_succeeded', subscription: subscription() }, t(1)], // before the checkout: onboarding
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [{ type: 'invoice.payment_succeeded', subscription: renewed }, t(2)],
      [{ type: 'invoice.payment_succeeded', subscription: subscription() }, t(3)], // an older period: no
      [
        {
          type: 'invoice.payment_succeeded',
          subscription: subscription({ id: 'sub_other', currentPeriodEnd: t(58) }),
        },
        t(4),
      ],
    ]);
    expect(kinds).toEqual(['ignore', 'change', 'change', 'ignore', 'ignore']);
    expect(license.expiresAt).toEqual(new Date('2028-11-25T12:00:00Z'));
  });

  it('cancels on customer.subscription.deleted; a renewal or a late checkout after it changes nothing', () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_1' }, t(5)],
      [
        {
          type: 'invoice.payment_succeeded',
          subscription: subscription({ currentPeriodEnd: new Date('2029-01-01') }),
        },
        t(6),
      ],
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(2)], // delivered late
    ]);
    expect(kinds).toEqual(['change', 'change', 'ignore', 'ignore']);
    expect(license.status).toBe('canceled');
  });

  it('a new checkout after a cancellation activates the new subscription; deleting the old one again leaves it alone', () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_1' }, t(5)],
      [
        {
          type: 'checkout.session.completed',
          subscription: subscription({ id: 'sub_2', plan: 'basic', cycle: 'monthly' }),
        },
        t(10),
      ],
      [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_1' }, t(11)],
    ]);
    expect(kinds).toEqual(['change', 'change', 'change', 'ignore']);
    expect(license).toMatchObject({
      status: 'active',
      subscriptionId: 'sub_2',
      plan: 'basic',
      billingCycle: 'monthly',
    });
  });

  it('keeps plan, cycle, period end and a pending cancellation in step with subscription updates, newest wins', () => {
    const { license, kinds } = run([
      // Before the checkout completed (out of order): a live subscription activates the onboarding
      // license, and the late checkout finds it so.
      [{ type: 'customer.subscription.updated', subscription: subscription({ plan: 'enterprise' }) }, t(2)],
      [{ type: 'checkout.session.completed', subscription: subscription({ plan: 'enterprise' }) }, t(1)],
      [
        {
          type: 'customer.subscription.updated',
          subscription: subscription({ plan: 'basic', endsAt: new Date('2027-11-25T12:00:00Z') }),
        },
        t(4),
      ],
      [{ type: 'customer.subscription.updated', subscription: subscription({ plan: 'pro' }) }, t(3)], // older: no
      [
        {
          type: 'customer.subscription.updated',
          subscription: subscription({ plan: 'basic', endsAt: new Date('2027-11-25T12:00:00Z') }),
        },
        t(5),
      ],
    ]);
    expect(kinds).toEqual(['change', 'ignore', 'change', 'ignore', 'ignore']);
    expect(license).toMatchObject({
      status: 'active',
      plan: 'basic',
      cancelAtPeriodEnd: true,
      factsAsOf: t(4),
    });
  });

  it('tells the organization of a failed payment without changing the license', () => {
    const active = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
    ]).license;
    expect(
      decideLicense(active, { type: 'invoice.payment_failed', subscriptionId: 'sub_1' }, t(2), now),
    ).toEqual({
      kind: 'notify-payment-failed',
    });
    expect(
      decideLicense(active, { type: 'invoice.payment_failed', subscriptionId: 'sub_9' }, t(2), now).kind,
    ).toBe('ignore');
  });

  it('ignores an older checkout of another subscription, so the current one keeps the license', () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription({ id: 'sub_b' }) }, t(10)],
      [
        { type: 'checkout.session.completed', subscription: subscription({ id: 'sub_a', plan: 'basic' }) },
        t(5),
      ],
      [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_b' }, t(20)],
    ]);
    expect(kinds).toEqual(['change', 'ignore', 'change']);
    expect(license).toMatchObject({ status: 'canceled', subscriptionId: 'sub_b', plan: 'pro' });
  });

  it("never cancels for a subscription that is not the license's, nor activates one Stripe ended", () => {
    const { license, kinds } = run([
      [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_dashboard' }, t(1)],
      [{ type: 'checkout.session.completed', subscription: subscription({ status: 'canceled' }) }, t(2)],
      [{ type: 'checkout.session.completed', subscription: subscription({ status: 'incomplete' }) }, t(2)],
      [{ type: 'customer.subscription.updated', subscription: subscription({ status: 'incomplete' }) }, t(2)],
    ]);
    expect(kinds).toEqual(['ignore', 'ignore', 'ignore', 'ignore']);
    expect(license.status).toBe('onboarding');
  });

  it('does not revive a license whose deletion came in the same second as a late checkout (Stripe says canceled)', () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_1' }, t(2)],
      [{ type: 'checkout.session.completed', subscription: subscription({ status: 'canceled' }) }, t(2)],
    ]);
    expect(kinds).toEqual(['change', 'change', 'ignore']);
    expect(license.status).toBe('canceled');
  });

  it('says when a scheduled cancellation takes effect', () => {
    const active = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
    ]).license;
    const decision = decideLicense(
      active,
      {
        type: 'customer.subscription.updated',
        subscription: subscription({ endsAt: new Date('2027-03-01T00:00:00Z') }),
      },
      t(2),
      now,
    );
    expect(decision).toMatchObject({
      kind: 'change',
      summary: 'Subscription ends on 2027-03-01',
      license: { cancelAtPeriodEnd: true, status: 'active' },
    });
  });

  describe('unpaid and paused subscriptions (audit issue 26)', () => {
    const checkout = (): [PaymentFact, Date] => [
      { type: 'checkout.session.completed', subscription: subscription() },
      t(1),
    ];
    const updated = (status: SubscriptionFacts['status'], minute: number): [PaymentFact, Date] => [
      { type: 'customer.subscription.updated', subscription: subscription({ status }) },
      t(minute),
    ];
    const summaries = (facts: [PaymentFact, Date][]) => {
      let license = pending();
      return facts.map(([fact, created]) => {
        const decision = decideLicense(license, fact, created, now);
        if (decision.kind !== 'change') return decision.kind;
        license = decision.license;
        return `${license.status}: ${decision.summary}`;
      });
    };

    it('an unpaid subscription takes the active license out of service; paid again, it is active again', () => {
      expect(
        summaries([
          checkout(),
          updated('past_due', 2), // Stripe still retries: the license stays active (nothing else changed)
          updated('unpaid', 3),
          [{ type: 'invoice.payment_succeeded', subscription: subscription({ status: 'unpaid' }) }, t(4)],
          updated('active', 5),
        ]),
      ).toEqual([
        'active: Subscription active: Pro, billed yearly',
        'ignore',
        'canceled: Subscription suspended: Pro, billed yearly is unpaid; pay the open invoice in the billing portal',
        'ignore',
        'active: Subscription active again: Pro, billed yearly',
      ]);
      const { license } = run([checkout(), updated('unpaid', 3)]);
      expect(license).toMatchObject({
        status: 'canceled',
        subscriptionId: 'sub_1',
        subscriptionStatus: 'unpaid',
      });
    });

    it('a paused subscription takes the active license out of service; a payment of it when live reactivates it', () => {
      expect(
        summaries([
          checkout(),
          updated('paused', 2),
          updated('paused', 3), // still paused: nothing changed
          [{ type: 'invoice.payment_succeeded', subscription: subscription({ status: 'active' }) }, t(4)],
        ]),
      ).toEqual([
        'active: Subscription active: Pro, billed yearly',
        'canceled: Subscription paused: Pro, billed yearly; resume it in the billing portal',
        'ignore',
        'active: Subscription active again: Pro, billed yearly',
      ]);
    });

    it('a renewal whose subscription Stripe now reports unpaid or paused does not keep the license active', () => {
      for (const status of ['unpaid', 'paused'] as const) {
        const { license, kinds } = run([
          checkout(),
          [
            {
              type: 'invoice.payment_succeeded',
              subscription: subscription({ status, currentPeriodEnd: new Date('2028-11-25T12:00:00Z') }),
            },
            t(2),
          ],
        ]);
        expect(kinds).toEqual(['change', 'change']);
        expect(license.status).toBe('canceled');
      }
      expect(
        summaries([
          checkout(),
          [
            {
              type: 'invoice.payment_succeeded',
              subscription: subscription({
                status: 'unpaid',
                currentPeriodEnd: new Date('2028-11-25T12:00:00Z'),
              }),
            },
            t(2),
          ],
        ]),
      ).toEqual([
        'active: Subscription active: Pro, billed yearly',
        'canceled: Subscription suspended: Pro, billed yearly is unpaid; pay the open invoice in the billing portal',
      ]);
    });

    it('an older update from before the suspension does not make the license active again', () => {
      const { license, kinds } = run([checkout(), updated('unpaid', 5), updated('active', 3)]);
      expect(kinds).toEqual(['change', 'change', 'ignore']);
      expect(license.status).toBe('canceled');
    });

    it('a deleted subscription cancels a suspended license for good', () => {
      const { license, kinds } = run([
        checkout(),
        updated('unpaid', 2),
        [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_1' }, t(3)],
        updated('active', 4),
        [{ type: 'invoice.payment_succeeded', subscription: subscription() }, t(5)],
      ]);
      expect(kinds).toEqual(['change', 'change', 'change', 'ignore', 'ignore']);
      expect(license).toMatchObject({ status: 'canceled', subscriptionStatus: 'canceled' });
    });

    it('a suspended subscription Stripe ends is canceled for good; an active one reported ended tells no one until its deletion', () => {
      expect(
        summaries([checkout(), updated('unpaid', 2), updated('canceled', 3), updated('active', 4)]),
      ).toEqual([
        'active: Subscription active: Pro, billed yearly',
        'canceled: Subscription suspended: Pro, billed yearly is unpaid; pay the open invoice in the billing portal',
        'canceled: Subscription canceled',
        'ignore',
      ]);
      expect(summaries([checkout(), updated('canceled', 2)])).toEqual([
        'active: Subscription active: Pro, billed yearly',
        'ignore',
      ]);
    });

    it('an unpaid or paused subscription never activates an onboarding license', () => {
      for (const status of ['unpaid', 'paused'] as const) {
        const { license, kinds } = run([
          [{ type: 'checkout.session.completed', subscription: subscription({ status }) }, t(1)],
          updated(status, 2),
        ]);
        expect(kinds).toEqual(['ignore', 'ignore']);
        expect(license.status).toBe('onboarding');
      }
    });

    it('a late checkout of the suspended subscription, paid since, makes the license active again and keeps the newest facts time', () => {
      // The update activated the onboarding license before the checkout's event arrived; the checkout
      // reads the subscription from Stripe now, so its facts are current although the event is older.
      const { license, kinds } = run([
        updated('active', 2),
        updated('unpaid', 5),
        [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      ]);
      expect(kinds).toEqual(['change', 'change', 'change']);
      expect(license).toMatchObject({ status: 'active', subscriptionStatus: 'active', factsAsOf: t(5) });
    });

    it('a payment of another subscription does not make a suspended license active', () => {
      const { license, kinds } = run([
        checkout(),
        updated('unpaid', 2),
        [{ type: 'invoice.payment_succeeded', subscription: subscription({ id: 'sub_2' }) }, t(3)],
      ]);
      expect(kinds).toEqual(['change', 'change', 'ignore']);
      expect(license).toMatchObject({ status: 'canceled', subscriptionId: 'sub_1' });
    });

    it('the paused subscription of an organization checking out anew neither cancels its onboarding license nor is told as canceled', () => {
      const paused = run([checkout(), updated('paused', 2)]).license;
      const onboarding: LicenseRecord = { ...paused, status: 'onboarding' }; // a new checkout started
      expect(decideLicense(onboarding, updated('paused', 3)[0], t(3), now).kind).toBe('ignore');
      const ended = decideLicense(onboarding, updated('canceled', 4)[0], t(4), now);
      expect(ended).toMatchObject({ kind: 'change', license: { status: 'onboarding' } });
      expect(ended.kind === 'change' && ended.summary).not.toBe('Subscription canceled');
    });
  });

  it.each([
    ['plan (to Basic)', { plan: 'basic' }, 'Subscription changed: Basic, billed yearly'],
    ['plan (to Enterprise)', { plan: 'enterprise' }, 'Subscription changed: Enterprise, billed yearly'],
    ['cycle', { cycle: 'monthly' }, 'Subscription changed: Pro, billed monthly'],
    [
      'period end',
      { currentPeriodEnd: new Date('2028-02-01T00:00:00Z') },
      'Subscription changed: Pro, billed yearly',
    ],
  ] as const)(
    "an update that changes only the subscription's %s is applied and told",
    (_field, extra: Partial<SubscriptionFacts>, summary) => {
      const active = run([
        [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      ]).license;
      const decision = decideLicense(
        active,
        { type: 'customer.subscription.updated', subscription: subscription(extra) },
        t(2),
        now,
      );
      expect(decision).toMatchObject({
        kind: 'change',
        summary,
        license: { status: 'active', ...renamed(extra) },
      });
    },
  );

  it('a checkout of another subscription with the same plan, cycle and period moves the license to it', () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [{ type: 'checkout.session.completed', subscription: subscription({ id: 'sub_2' }) }, t(2)],
      [{ type: 'customer.subscription.deleted', subscriptionId: 'sub_1' }, t(3)],
    ]);
    expect(kinds).toEqual(['change', 'change', 'ignore']);
    expect(license).toMatchObject({ status: 'active', subscriptionId: 'sub_2' });
  });

  it("an update from the same second as the facts applied is not older (Stripe's created has whole seconds): it applies", () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [{ type: 'customer.subscription.updated', subscription: subscription({ plan: 'basic' }) }, t(1)],
    ]);
    expect(kinds).toEqual(['change', 'change']);
    expect(license.plan).toBe('basic');
  });

  it("a late checkout of the license's own subscription applies the facts Stripe has now", () => {
    // The update activated the onboarding license first; the checkout's subscription is read from
    // Stripe when it arrives, after a plan change in the portal whose update is still on its way.
    const { license, kinds } = run([
      [{ type: 'customer.subscription.updated', subscription: subscription() }, t(2)],
      [{ type: 'checkout.session.completed', subscription: subscription({ plan: 'basic' }) }, t(1)],
    ]);
    expect(kinds).toEqual(['change', 'change']);
    expect(license).toMatchObject({ status: 'active', plan: 'basic', factsAsOf: t(2) });
  });

  it('an update of another subscription changes nothing', () => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [
        {
          type: 'customer.subscription.updated',
          subscription: subscription({ id: 'sub_2', plan: 'basic', status: 'unpaid' }),
        },
        t(2),
      ],
    ]);
    expect(kinds).toEqual(['change', 'ignore']);
    expect(license).toMatchObject({ status: 'active', plan: 'pro', subscriptionId: 'sub_1' });
  });

  it('an update of a live subscription activates an onboarding license only, not a pending one that never checked out', () => {
    const { license, kinds } = run(
      [[{ type: 'customer.subscription.updated', subscription: subscription() }, t(1)]],
      initialLicense('org-1', t(0)),
    );
    expect(kinds).toEqual(['ignore']);
    expect(license.status).toBe('pending');
  });

  it('says until when a renewal runs', () => {
    const active = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
    ]).license;
    const decision = decideLicense(
      active,
      {
        type: 'invoice.payment_succeeded',
        subscription: subscription({ currentPeriodEnd: new Date('2028-11-25T12:00:00Z') }),
      },
      t(2),
      now,
    );
    expect(decision).toMatchObject({
      kind: 'change',
      summary: 'Subscription renewed until 2028-11-25',
      license: { status: 'active', expiresAt: new Date('2028-11-25T12:00:00Z') },
    });
  });

  it.each([
    ['the first invoice of the period the checkout applied', subscription()],
    [
      'another subscription, even for a later period',
      subscription({ id: 'sub_2', currentPeriodEnd: new Date('2028-11-25T12:00:00Z') }),
    ],
  ])('a payment of %s renews nothing', (_case, paid) => {
    const { license, kinds } = run([
      [{ type: 'checkout.session.completed', subscription: subscription() }, t(1)],
      [{ type: 'invoice.payment_succeeded', subscription: paid }, t(2)],
    ]);
    expect(kinds).toEqual(['change', 'ignore']);
    expect(license).toMatchObject({ subscriptionId: 'sub_1', expiresAt: new Date('2027-11-25T12:00:00Z') });
  });

  it.each([
    ["the license's subscription", 'notify-payment-failed', 'sub_1', true],
    ['no subscription (a one-off invoice)', 'notify-payment-failed', null, true],
    ['a subscription, the license having none yet', 'notify-payment-failed', 'sub_1', false],
    ['another subscription', 'ignore', 'sub_9', true],
  ] as const)('a failed payment of %s: %s', (_case, kind, subscriptionId, subscribed) => {
    const license = subscribed
      ? run([[{ type: 'checkout.session.completed', subscription: subscription() }, t(1)]]).license
      : pending();
    expect(decideLicense(license, { type: 'invoice.payment_failed', subscriptionId }, t(2), now).kind).toBe(
      kind,
    );
  });

  it('a deletion ends a pending cancellation and says the subscription is canceled; a second one tells no one', () => {
    const ending = run([
      [
        {
          type: 'checkout.session.completed',
          subscription: subscription({ endsAt: new Date('2027-11-25T12:00:00Z') }),
        },
        t(1),
      ],
    ]).license;
    expect(ending.cancelAtPeriodEnd).toBe(true);
    const deleted = decideLicense(
      ending,
      { type: 'customer.subscription.deleted', subscriptionId: 'sub_1' },
      t(2),
      now,
    );
    expect(deleted).toMatchObject({
      kind: 'change',
      summary: 'Subscription canceled',
      license: { status: 'canceled', cancelAtPeriodEnd: false },
    });
    if (deleted.kind !== 'change') throw new Error('expected a change');
    expect(
      decideLicense(
        deleted.license,
        { type: 'customer.subscription.deleted', subscriptionId: 'sub_1' },
        t(3),
        now,
      ).kind,
    ).toBe('ignore');
  });
});

/** Subscription facts under the license's field names. */
function renamed(facts: Partial<SubscriptionFacts>): Partial<LicenseRecord> {
  const { plan, cycle, currentPeriodEnd } = facts;
  return {
    ...(plan && { plan }),
    ...(cycle && { billingCycle: cycle }),
    ...(currentPeriodEnd && { expiresAt: currentPeriodEnd }),
  };
}
