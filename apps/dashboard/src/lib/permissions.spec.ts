import { can, roleLabel, visiblePages } from './permissions';

describe('can', () => {
  it('lets ORG_ADMIN do everything', () => {
    for (const action of [
      'devices.delete',
      'alerts.manage',
      'billing.manage',
      'members.manage',
      'enrollment.manage',
    ] as const)
      expect(can('ORG_ADMIN', action)).toBe(true);
  });

  it('lets ANALYST read and change device status, but not delete or manage', () => {
    expect(can('ANALYST', 'devices.read')).toBe(true);
    expect(can('ANALYST', 'devices.changeStatus')).toBe(true);
    expect(can('ANALYST', 'analytics.read')).toBe(true);
    expect(can('ANALYST', 'alerts.read')).toBe(true);
    expect(can('ANALYST', 'devices.delete')).toBe(false);
    expect(can('ANALYST', 'alerts.manage')).toBe(false);
    expect(can('ANALYST', 'members.manage')).toBe(false);
    expect(can('ANALYST', 'enrollment.manage')).toBe(false);
    expect(can('ANALYST', 'billing.manage')).toBe(false);
  });

  it('lets APP_USER read only its notifications', () => {
    expect(can('APP_USER', 'notifications.read')).toBe(true);
    expect(can('APP_USER', 'analytics.read')).toBe(false);
    expect(can('APP_USER', 'devices.read')).toBe(false);
  });
});

describe('visiblePages', () => {
  it('shows each role the pages it can use', () => {
    expect(visiblePages('ORG_ADMIN').map((p) => p.label)).toEqual([
      'Overview',
      'Devices',
      'Enrollment',
      'Members',
      'Alerts',
      'Billing',
      'Notifications',
    ]);
    expect(visiblePages('ANALYST').map((p) => p.label)).toEqual([
      'Overview',
      'Devices',
      'Members',
      'Alerts',
      'Billing',
      'Notifications',
    ]);
    expect(visiblePages('APP_USER').map((p) => p.label)).toEqual(['Overview', 'Billing', 'Notifications']);
  });

  it('names roles for people', () => {
    expect(roleLabel('ORG_ADMIN')).toBe('Administrator');
    expect(roleLabel('APP_USER')).toBe('App user');
  });
});
