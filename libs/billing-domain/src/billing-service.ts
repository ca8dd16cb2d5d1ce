import { AppError } from '@sts/errors/app-error';
import { initialLicense, type License } from './billing-model';
import type { BillingStore, Clock } from './billing-ports';

export class BillingService {
  constructor(
    private readonly store: BillingStore,
    private readonly clock: Clock,
  ) {}

  /**
   * The organization's license. If `org.created` has not been handled yet, the initial license is
   * created now (insert if absent, then read), so a brand-new organization always has one and the
   * later event leaves it as it is.
   */
  async getLicense(orgId: string): Promise<License> {
    if (!orgId.trim()) {
      throw new AppError('VALIDATION_FAILED', 'org_id is required', {
        fields: [{ path: 'org_id', message: 'required' }],
      });
    }
    const existing = await this.store.read((repos) => repos.findLicense(orgId));
    if (existing) return existing;
    return this.store.transaction(async (repos) => {
      await repos.insertLicenseIfAbsent(initialLicense(orgId, this.clock.now()));
      const license = await repos.findLicense(orgId);
      if (!license) throw new Error(`license of organization ${orgId} vanished after insert`);
      return license;
    });
  }
}
