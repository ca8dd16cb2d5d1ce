/** Roles of the API (contract section 2). */
export type Role = 'ORG_ADMIN' | 'ANALYST' | 'APP_USER';
export const ROLES: readonly Role[] = ['ORG_ADMIN', 'ANALYST', 'APP_USER'];

/**
 * What each role may do, as the gateway's role checks say (libs/gateway-http/src/routes, DESIGN.md
 * section 3): ORG_ADMIN everything; ANALYST reads members, devices, analytics, notifications and alert
 * endpoints and disables/enables devices; APP_USER reads its session and the notification feed.
 * The dashboard hides what a role may not do; the API still has the last word.
 */
const ALLOWED = {
  'analytics.read': ['ORG_ADMIN', 'ANALYST'],
  'devices.read': ['ORG_ADMIN', 'ANALYST'],
  'devices.changeStatus': ['ORG_ADMIN', 'ANALYST'],
  'devices.delete': ['ORG_ADMIN'],
  'devices.allowReEnrollment': ['ORG_ADMIN'],
  'enrollment.manage': ['ORG_ADMIN'],
  'members.read': ['ORG_ADMIN', 'ANALYST'],
  'members.manage': ['ORG_ADMIN'],
  'invites.manage': ['ORG_ADMIN'],
  'alerts.read': ['ORG_ADMIN', 'ANALYST'],
  'alerts.manage': ['ORG_ADMIN'],
  'billing.manage': ['ORG_ADMIN'],
  'notifications.read': ['ORG_ADMIN', 'ANALYST', 'APP_USER'],
} as const satisfies Record<string, readonly Role[]>;

export type Action = keyof typeof ALLOWED;

export function can(role: Role, action: Action): boolean {
  return (ALLOWED[action] as readonly Role[]).includes(role);
}

/** Pages of the side navigation and the action that lets a role see each. */
export const PAGES = [
  { path: '/', label: 'Overview', action: 'notifications.read' },
  { path: '/devices', label: 'Devices', action: 'devices.read' },
  { path: '/enrollment', label: 'Enrollment', action: 'enrollment.manage' },
  { path: '/members', label: 'Members', action: 'members.read' },
  { path: '/alerts', label: 'Alerts', action: 'alerts.read' },
  { path: '/billing', label: 'Billing', action: 'notifications.read' },
  { path: '/notifications', label: 'Notifications', action: 'notifications.read' },
] as const satisfies readonly { path: string; label: string; action: Action }[];

export function visiblePages(role: Role): (typeof PAGES)[number][] {
  return PAGES.filter((page) => can(role, page.action));
}

export function roleLabel(role: Role): string {
  switch (role) {
    case 'ORG_ADMIN':
      return 'Administrator';
    case 'ANALYST':
      return 'Analyst';
    case 'APP_USER':
      return 'App user';
  }
}
