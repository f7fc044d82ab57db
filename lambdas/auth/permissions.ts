/**
 * Events API permissions (docs/events/reference.md "Permissions"). Each Events route needs
 * one. Secret keys and OAuth clients hold all of them unless created with a narrower list.
 */
export const EVENTS_PERMISSIONS = [
  'events:event.publish',
  'events:subscription.read',
  'events:subscription.write',
  'events:message.pull',
  'events:stream.open',
  'events:dead.read',
  'events:dead.replay',
  'events:stats.read',
] as const;

export type Permission = (typeof EVENTS_PERMISSIONS)[number];

export const isPermission = (value: unknown): value is Permission => typeof value === 'string' && (EVENTS_PERMISSIONS as readonly string[]).includes(value);

/** Names in `list` that are not permissions (for a clear refusal naming them). */
export const unknownPermissions = (list: readonly string[]): string[] => list.filter((p) => !isPermission(p));

/** A list of permissions deduplicated, in the order of EVENTS_PERMISSIONS (how records store it). */
export const canonicalPermissions = (list: readonly Permission[]): Permission[] => EVENTS_PERMISSIONS.filter((p) => list.includes(p));

/**
 * Whether a credential's permissions include `permission`. `null` is every Events permission (a secret
 * key or OAuth client created without `--permissions`, including permissions added later).
 */
export const holdsPermission = (permissions: readonly Permission[] | null, permission: Permission): boolean =>
  permissions === null || permissions.includes(permission);
