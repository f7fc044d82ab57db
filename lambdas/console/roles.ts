/**
 * A person's role in the organization (issue 37): viewer reads; developer also manages keys, routes,
 * data and events; admin also people, invitations, limits and feature switches; owner also the
 * organization. Each role holds every right of the ones before it.
 */
import { PlatformError } from '../shared/errors.js';

export const ROLES = ['viewer', 'developer', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (value: unknown): value is Role => typeof value === 'string' && (ROLES as readonly string[]).includes(value);
/** The role a request names, else 400 invalid_body on `role` (an invitation's, a role change's). */
export function roleOf(value: unknown): Role {
  if (!isRole(value)) throw new PlatformError('invalid_body', `\`role\` must be one of ${ROLES.join(', ')}.`, 'role');
  return value;
}
export const roleRank = (role: Role): number => ROLES.indexOf(role);
/** Whether `held` includes every right of `needed`. */
export const atLeast = (held: Role, needed: Role): boolean => roleRank(held) >= roleRank(needed);

export const roleForbidden = (needed: Role) =>
  new PlatformError('role_forbidden', `This needs the ${needed} role or a higher one (viewer < developer < admin < owner).`);

/** Throws 403 role_forbidden unless `held` reaches `needed`. */
export function requireRole(held: Role, needed: Role): void {
  if (!atLeast(held, needed)) throw roleForbidden(needed);
}

/**
 * A person may give, change or take away only roles up to their own: an admin manages viewers,
 * developers and admins, only an owner manages owners (no escalation past one's own role).
 */
export function requireManageable(actor: Role, role: Role): void {
  if (!atLeast(actor, role)) throw new PlatformError('role_forbidden', `Only a person with the ${role} role or a higher one may give, change or remove the ${role} role.`);
}

// The principal names the roles without importing the console (auth sits below it): the two lists are one.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const _sameRoles: Same<Role, import('../auth/principal.js').PrincipalPerson['role']> = true;
void _sameRoles;
