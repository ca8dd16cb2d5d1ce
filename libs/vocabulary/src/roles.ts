/** The roles of the public contract (section 5.8), in every service and token the same. */
export const ROLES = ['ORG_ADMIN', 'ANALYST', 'APP_USER'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}
