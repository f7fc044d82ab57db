/** The console's roles, least first (console-plan.md): viewer reads; developer also keys, routes,
 * data, events; admin also people, invitations, limits, switches; owner also the organization. The
 * page offers only what the role may do; the API refuses the rest (`403 role_forbidden`). */
export const ROLES = ['viewer', 'developer', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (value: unknown): value is Role => typeof value === 'string' && (ROLES as readonly string[]).includes(value);

/** Whether `role` may do what needs at least `least`. */
export const can = (role: Role | undefined, least: Role): boolean => role !== undefined && ROLES.indexOf(role) >= ROLES.indexOf(least);

export interface Me {
  person: { id: string; email: string; role: Role };
  organization: { id: string; name: string };
  csrf_token?: string;
}
