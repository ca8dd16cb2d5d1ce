import { randomUUID } from 'node:crypto';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import { failureOf } from '@sts/testing/failure-of';
import { billingUpdatedData, initialLicense, type LicenseRecord } from '../billing-model';
import type { BillingRepositories, BillingStore } from '../billing-ports';

/** A store to check, and what the contract must see of it that the ports do not show. */
export interface BillingStoreUnderTest {
  store: BillingStore;
  /** How many outbox events (committed) name the organization in their data. */
  outboxEvents(orgId: string): Promise<number>;
  close?(): Promise<void>;
}

/**
 * The behaviour every `BillingStore` owes its callers, run against the in-memory store
 * (`in-memory-billing-store.spec.ts`) and the PostgreSQL store (billing-infra's
 * `postgres-billing-store.int-spec.ts`) alike. The domain's unit tests trust the in-memory store to
 * behave as PostgreSQL does (one license and one account per organization, ledgers that answer once,
 * licenses locked for update, transactions that commit or leave nothing); this suite is what holds the
 * two to one contract, so that a check written for one is never missing from the other.
 * Each check works in an organization of its own, so one store serves the whole suite.
 */
export function describeBillingStoreContract(name: string, open: () => Promise<BillingStoreUnderTest>): void {
  describe(`BillingStore contract: ${name}`, () => {
    let subject: BillingStoreUnderTest;
    let store: BillingStore;

    beforeAll(async () => {
      subject = await open();
      store = subject.store;
    });

    afterAll(async () => {
      await subject?.close?.();
    });

    const at = (iso: string) => new Date(iso);
    const NOW = at('2026-03-01T12:00:00.000Z');
    const LATER = at('2026-03-01T13:00:00.000Z');
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    const license = (orgId: string, overrides: Partial<LicenseRecord> = {}): LicenseRecord => ({
      ...initialLicense(orgId, NOW),
      ...overrides,
    });

    /** An active license, with every field away from its initial value. */
    const active = (orgId: string, overrides: Partial<LicenseRecord> = {}): LicenseRecord => ({
      ...license(orgId),
      plan: 'pro',
      status: 'active',
      billingCycle: 'annual',
      expiresAt: at('2027-03-01T12:00:00.123Z'),
      updatedAt: LATER,
      subscriptionId: `sub_${randomUUID()}`,
      subscriptionStatus: 'past_due',
      cancelAtPeriodEnd: true,
      factsAsOf: at('2026-03-01T12:30:00.000Z'),
      ...overrides,
    });

    const findLicense = (orgId: string) => store.read((repos) => repos.findLicense(orgId));
    const findAccount = (orgId: string) => store.read((repos) => repos.findAccount(orgId));
    const customer = () => `cus_${randomUUID()}`;
    const emitUpdated = (repos: BillingRepositories, record: LicenseRecord) =>
      repos.emit('billing.updated', billingUpdatedData(record, 'contract'));

    describe('licenses', () => {
      it('are inserted once per organization, the first of concurrent inserts winning whole', async () => {
        const orgId = randomUUID();
        const candidates = (['basic', 'pro', 'enterprise', 'none', 'basic'] as const).map((plan, index) =>
          license(orgId, { plan, createdAt: new Date(NOW.getTime() + index * 1000) }),
        );
        await Promise.all(
          candidates.map((candidate) => store.transaction((repos) => repos.insertLicenseIfAbsent(candidate))),
        );
        const stored = await findLicense(orgId);
        expect(candidates).toContainEqual(stored);
        // A later insert leaves it as it is.
        await store.transaction((repos) => repos.insertLicenseIfAbsent(active(orgId)));
        expect(await findLicense(orgId)).toEqual(stored);
      });

      it('are read back field for field, alike in reads and under lock; an unknown organization has none', async () => {
        const orgId = randomUUID();
        const inserted = active(orgId, { subscriptionStatus: 'unpaid' });
        await store.transaction((repos) => repos.insertLicenseIfAbsent(inserted));
        expect(await findLicense(orgId)).toEqual(inserted);
        expect(await store.transaction((repos) => repos.findLicenseForUpdate(orgId))).toEqual(inserted);
        expect(await findLicense(randomUUID())).toBeNull();
        expect(await store.transaction((repos) => repos.findLicenseForUpdate(randomUUID()))).toBeNull();
        // What a caller holds is its own copy: changing it changes nothing stored.
        const held = (await findLicense(orgId))!;
        held.status = 'canceled';
        held.expiresAt.setTime(0);
        expect(await findLicense(orgId)).toEqual(inserted);
      });

      it('are saved whole but for the organization and the creation time, and only where one exists', async () => {
        const orgId = randomUUID();
        const created = license(orgId);
        await store.transaction((repos) => repos.insertLicenseIfAbsent(created));
        const saved = active(orgId);
        await store.transaction((repos) =>
          repos.saveLicense({ ...saved, createdAt: at('2020-01-01T00:00:00.000Z') }),
        );
        expect(await findLicense(orgId)).toEqual({ ...saved, createdAt: created.createdAt });
        // And back to the initial values, nulls included.
        await store.transaction((repos) => repos.saveLicense(created));
        expect(await findLicense(orgId)).toEqual(created);
        // Saving creates no license: that is `insertLicenseIfAbsent`'s.
        const stranger = randomUUID();
        await store.transaction((repos) => repos.saveLicense(active(stranger)));
        expect(await findLicense(stranger)).toBeNull();
      });

      it('are locked for update: an older fact read under the lock never overwrites a newer one saved concurrently', async () => {
        const orgId = randomUUID();
        await store.transaction((repos) => repos.insertLicenseIfAbsent(license(orgId)));
        /** What a webhook does with a fact: apply it under the lock unless the license has newer ones. */
        const apply = (factsAsOf: Date, plan: LicenseRecord['plan'], holdMs: number, locked = () => {}) =>
          store.transaction(async (repos) => {
            const current = (await repos.findLicenseForUpdate(orgId))!;
            locked();
            await sleep(holdMs);
            if (current.factsAsOf !== null && current.factsAsOf >= factsAsOf) return 'skipped';
            await repos.saveLicense({ ...current, plan, factsAsOf, updatedAt: factsAsOf });
            return 'applied';
          });
        let newerLocked!: () => void;
        const lockTaken = new Promise<void>((resolve) => (newerLocked = resolve));
        const newer = apply(at('2026-03-01T12:10:00.000Z'), 'enterprise', 150, newerLocked);
        await lockTaken;
        // Without the lock this one reads the license before the newer fact, and saves after it.
        const older = apply(at('2026-03-01T12:05:00.000Z'), 'basic', 300);
        expect(await Promise.all([newer, older])).toEqual(['applied', 'skipped']);
        expect(await findLicense(orgId)).toMatchObject({
          plan: 'enterprise',
          factsAsOf: at('2026-03-01T12:10:00.000Z'),
        });
      });
    });

    describe('ledgers of handled events', () => {
      it('record a payment event once, also among concurrent transactions, and tell whether it is recorded', async () => {
        const eventId = `evt_${randomUUID()}`;
        expect(await store.read((repos) => repos.isPaymentEventRecorded(eventId))).toBe(false);
        const firsts = await Promise.all(
          Array.from({ length: 5 }, () =>
            store.transaction((repos) => repos.recordPaymentEventOnce(eventId, 'invoice.paid')),
          ),
        );
        expect(firsts.sort()).toEqual([false, false, false, false, true]);
        expect(await store.read((repos) => repos.isPaymentEventRecorded(eventId))).toBe(true);
        expect(
          await store.transaction((repos) =>
            repos.recordPaymentEventOnce(eventId, 'customer.subscription.updated'),
          ),
        ).toBe(false);
        expect(await store.read((repos) => repos.isPaymentEventRecorded(`evt_${randomUUID()}`))).toBe(false);
      });

      it('keep handled events and payment events apart, each recorded once', async () => {
        const eventId = randomUUID();
        expect(await store.transaction((repos) => repos.recordEventOnce(eventId, 'org.created'))).toBe(true);
        expect(await store.transaction((repos) => repos.recordEventOnce(eventId, 'org.created'))).toBe(false);
        expect(await store.read((repos) => repos.isPaymentEventRecorded(eventId))).toBe(false);
        expect(
          await store.transaction((repos) => repos.recordPaymentEventOnce(eventId, 'invoice.paid')),
        ).toBe(true);
        expect(await store.transaction((repos) => repos.recordEventOnce(randomUUID(), 'org.created'))).toBe(
          true,
        );
      });
    });

    describe('accounts', () => {
      it('are inserted once per organization, found by organization and by customer', async () => {
        const orgId = randomUUID();
        const customers = Array.from({ length: 4 }, customer);
        await Promise.all(
          customers.map((customerId) =>
            store.transaction((repos) =>
              repos.insertAccountIfAbsent({ orgId, customerId, checkoutSessionId: null }),
            ),
          ),
        );
        const stored = (await findAccount(orgId))!;
        expect(customers).toContain(stored.customerId);
        expect(stored).toEqual({ orgId, customerId: stored.customerId, checkoutSessionId: null });
        expect(await store.read((repos) => repos.findAccountByCustomer(stored.customerId))).toEqual(stored);
        for (const loser of customers.filter((customerId) => customerId !== stored.customerId)) {
          expect(await store.read((repos) => repos.findAccountByCustomer(loser))).toBeNull();
        }
        await store.transaction((repos) =>
          repos.insertAccountIfAbsent({ orgId, customerId: customer(), checkoutSessionId: 'cs_other' }),
        );
        expect(await findAccount(orgId)).toEqual(stored);
        expect(await findAccount(randomUUID())).toBeNull();
        expect(await store.read((repos) => repos.findAccountByCustomer(customer()))).toBeNull();
      });

      it("refuses another organization's customer (UniqueConflict), leaving nothing of the transaction", async () => {
        const orgId = randomUUID();
        const customerId = customer();
        await store.transaction((repos) =>
          repos.insertAccountIfAbsent({ orgId, customerId, checkoutSessionId: null }),
        );
        const other = randomUUID();
        expect(
          await failureOf(
            store.transaction(async (repos) => {
              await repos.insertLicenseIfAbsent(license(other));
              await repos.insertAccountIfAbsent({ orgId: other, customerId, checkoutSessionId: null });
            }),
          ),
        ).toBeInstanceOf(UniqueConflict);
        expect(await findAccount(other)).toBeNull();
        expect(await findLicense(other)).toBeNull();
        expect(await store.read((repos) => repos.findAccountByCustomer(customerId))).toMatchObject({ orgId });
      });

      it('keep the latest checkout session, of their own organization only', async () => {
        const orgId = randomUUID();
        const neighbour = randomUUID();
        for (const id of [orgId, neighbour]) {
          await store.transaction((repos) =>
            repos.insertAccountIfAbsent({ orgId: id, customerId: customer(), checkoutSessionId: null }),
          );
        }
        await store.transaction((repos) => repos.saveCheckoutSession(orgId, 'cs_first'));
        expect(await findAccount(orgId)).toMatchObject({ checkoutSessionId: 'cs_first' });
        await store.transaction((repos) => repos.saveCheckoutSession(orgId, 'cs_second'));
        const account = (await findAccount(orgId))!;
        expect(account.checkoutSessionId).toBe('cs_second');
        expect(await store.read((repos) => repos.findAccountByCustomer(account.customerId))).toEqual(account);
        expect(await findAccount(neighbour)).toMatchObject({ checkoutSessionId: null });
        // Without an account there is nothing to keep it in; none is made.
        const stranger = randomUUID();
        await store.transaction((repos) => repos.saveCheckoutSession(stranger, 'cs_lost'));
        expect(await findAccount(stranger)).toBeNull();
      });
    });

    describe('transactions', () => {
      it('commit their writes and their events together', async () => {
        const orgId = randomUUID();
        const saved = active(orgId);
        await store.transaction(async (repos) => {
          await repos.insertLicenseIfAbsent(license(orgId));
          await repos.saveLicense(saved);
          await emitUpdated(repos, saved);
        });
        expect(await findLicense(orgId)).toEqual({ ...saved, createdAt: NOW });
        expect(await subject.outboxEvents(orgId)).toBe(1);
      });

      it('leave no license, account, ledger entry or event behind when the work throws', async () => {
        const orgId = randomUUID();
        const eventId = `evt_${randomUUID()}`;
        const handled = randomUUID();
        const error = await failureOf(
          store.transaction(async (repos) => {
            await repos.insertLicenseIfAbsent(license(orgId));
            await repos.insertAccountIfAbsent({ orgId, customerId: customer(), checkoutSessionId: null });
            await repos.recordPaymentEventOnce(eventId, 'invoice.paid');
            await repos.recordEventOnce(handled, 'org.created');
            await emitUpdated(repos, license(orgId));
            throw new Error('changed my mind');
          }),
        );
        expect((error as Error).message).toBe('changed my mind');
        expect(await findLicense(orgId)).toBeNull();
        expect(await findAccount(orgId)).toBeNull();
        expect(await store.read((repos) => repos.isPaymentEventRecorded(eventId))).toBe(false);
        expect(await subject.outboxEvents(orgId)).toBe(0);
        // The ids were not used up: the retry records them.
        expect(
          await store.transaction((repos) => repos.recordPaymentEventOnce(eventId, 'invoice.paid')),
        ).toBe(true);
        expect(await store.transaction((repos) => repos.recordEventOnce(handled, 'org.created'))).toBe(true);
      });

      it('roll back only their own work, not what another transaction committed meanwhile', async () => {
        const failing = randomUUID();
        const committing = randomUUID();
        let inserted!: () => void;
        const insertDone = new Promise<void>((resolve) => (inserted = resolve));
        const rolledBack = failureOf(
          store.transaction(async (repos) => {
            await repos.insertLicenseIfAbsent(license(failing));
            inserted();
            await sleep(100);
            throw new Error('changed my mind');
          }),
        );
        await insertDone;
        await store.transaction(async (repos) => {
          await repos.insertLicenseIfAbsent(license(committing));
          await emitUpdated(repos, license(committing));
        });
        expect(await rolledBack).toBeInstanceOf(Error);
        expect(await findLicense(failing)).toBeNull();
        expect(await findLicense(committing)).toEqual(license(committing));
        expect(await subject.outboxEvents(committing)).toBe(1);
      });
    });
  });
}
