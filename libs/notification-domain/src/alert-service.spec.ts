import { randomBytes } from 'node:crypto';
import { AppError } from '@sts/errors/app-error';
import { ALERT_LIMITS, validAlertDescription, validAlertUrl } from './alert-model';
import { AlertService } from './alert-service';
import { InMemoryNotificationStore, ManualClock } from './test/in-memory-notification-store';

const code = async (promise: Promise<unknown>) => {
  try {
    await promise;
  } catch (error) {
    return error instanceof AppError ? error.code : String(error);
  }
  return 'no error';
};

describe('alert endpoints', () => {
  let store: InMemoryNotificationStore;
  let service: AlertService;
  let woken = 0;

  beforeEach(() => {
    store = new InMemoryNotificationStore();
    woken = 0;
    service = new AlertService(
      store,
      new ManualClock(),
      { sealingKey: randomBytes(32), publicAppUrl: 'https://app.example' },
      () => woken++,
    );
  });

  it('accepts https URLs only, without credentials or fragments, normalized', () => {
    expect(validAlertUrl('https://Hooks.Example.com:443/alerts?x=1')).toBe(
      'https://hooks.example.com/alerts?x=1',
    );
    expect(validAlertUrl('https://hooks.example.com:8443/a')).toBe('https://hooks.example.com:8443/a');
    for (const bad of [
      'http://hooks.example.com/',
      'ftp://hooks.example.com/',
      'javascript:alert(1)',
      'https://user:pass@hooks.example.com/',
      'https://hooks.example.com/#frag',
      'https://hooks.example.com/ a',
      'https://hooks.example.com/\u0000',
      'hooks.example.com',
      `https://hooks.example.com/${'a'.repeat(ALERT_LIMITS.urlLength)}`,
    ]) {
      expect(() => validAlertUrl(bad)).toThrow(AppError);
    }
  });

  it('takes an optional description of plain text', () => {
    expect(validAlertDescription(undefined)).toBeNull();
    expect(validAlertDescription('  ')).toBeNull();
    expect(validAlertDescription(' SIEM ')).toBe('SIEM');
    expect(() => validAlertDescription('a'.repeat(201))).toThrow(AppError);
    expect(() => validAlertDescription('line\nbreak')).toThrow(AppError);
  });

  it('creates an endpoint with a secret shown once and stored sealed; refuses duplicates and more than the cap', async () => {
    const { endpoint, secret } = await service.create('org-1', 'https://a.example/', 'first');
    expect(secret).toMatch(/^whsec_/);
    const stored = store.state.alertEndpoints[0]!;
    expect(stored.secretSealed).not.toContain(secret.slice(6));
    expect(await service.list('org-1')).toEqual([endpoint]);
    expect(Object.keys((await service.list('org-1'))[0]!)).not.toContain('secretSealed');

    expect(await code(service.create('org-1', 'https://a.example/', null))).toBe('ALERT_ENDPOINT_DUPLICATE');
    // Another organization may use the same URL.
    await service.create('org-2', 'https://a.example/', null);
    for (let i = 1; i < ALERT_LIMITS.endpointsPerOrganization; i++) {
      await service.create('org-1', `https://a.example/${i}`, null);
    }
    expect(await code(service.create('org-1', 'https://a.example/one-more', null))).toBe(
      'ALERT_ENDPOINT_LIMIT',
    );
  });

  it("keeps organizations apart: another organization's endpoint is not found", async () => {
    const { endpoint } = await service.create('org-1', 'https://a.example/', null);
    expect(await code(service.delete('org-2', endpoint.id))).toBe('ALERT_ENDPOINT_NOT_FOUND');
    expect(await code(service.sendTest('org-2', endpoint.id))).toBe('ALERT_ENDPOINT_NOT_FOUND');
    expect(await code(service.deliveries('org-2', endpoint.id, 10))).toBe('ALERT_ENDPOINT_NOT_FOUND');
    expect(await service.list('org-2')).toEqual([]);

    const test = await service.sendTest('org-1', endpoint.id);
    expect(test).toMatchObject({ status: 'pending', attempts: 0, eventType: 'alert.test' });
    expect(woken).toBe(1);
    expect(await service.deliveries('org-1', endpoint.id, 10)).toEqual([test]);
    await service.delete('org-1', endpoint.id);
    expect(await service.list('org-1')).toEqual([]);
    expect(await code(service.delete('org-1', endpoint.id))).toBe('ALERT_ENDPOINT_NOT_FOUND');
  });
});
