/**
 * What an Events call may touch (spec 4.21 and section 5 rule 3; docs/events/permissions.md): the
 * route's permission, and the workspace named in the path. Plain functions over a principal, so the
 * HTTP chain (lambdas/http/middleware/events-access.ts) and the WebSocket $connect use the same rules.
 *
 * Every refusal of a workspace is the one PlatformError below, whatever the reason (another
 * application's workspace, another organization's, one that does not exist, a malformed id): the
 * answer never says whether a workspace exists.
 */
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { settings } from '../shared/settings.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { holdsPermission, type Permission } from './permissions.js';
import type { Principal } from './principal.js';
import { Tenants, type Workspace } from './tenants.js';

/** Workspace ids as newId('ws') makes them: `ws_` + a 26-character lowercase ULID. */
export const WORKSPACE_ID_PATTERN = /^ws_[0-9a-hjkmnp-tv-z]{26}$/;
/** Unknown workspaces are remembered briefly too, so probing random ids cannot hammer the store. */
const NEGATIVE_CACHE_MS = 5_000;
/** Workspaces by id (null: none), as the credential cache keeps credentials: per process, briefly. */
const cache = new TtlCache<Workspace | null>();

export const WORKSPACE_FORBIDDEN_MESSAGE = 'This credential may not use this workspace.';
/** The one refusal of a workspace: same code, message and (absent) param for every reason. */
export const workspaceForbidden = () => new PlatformError('forbidden', WORKSPACE_FORBIDDEN_MESSAGE);

/** Throws 403 forbidden naming the permission when the principal does not hold it. */
export function requirePermission(principal: Principal, permission: Permission): void {
  if (!holdsPermission(principal.permissions, permission)) {
    throw new PlatformError('forbidden', `This credential lacks the "${permission}" permission.`);
  }
}

async function lookUp(engine: Engine, id: string): Promise<Workspace | null> {
  const now = engine.clock.now();
  const hit = cache.get(id, now);
  if (hit !== undefined) return hit;
  const workspace = (await new Tenants(engine.kv, () => engine.clock.now()).getWorkspace(id)) ?? null;
  const ttl = settings().credentialCacheMs;
  cache.set(id, workspace, now + (workspace ? ttl : Math.min(ttl, NEGATIVE_CACHE_MS)));
  return workspace;
}

/**
 * The workspace `workspaceId` names, when the principal may use it: an application-bound credential
 * only its application's workspace, an organization-wide one any workspace of its organization.
 * Anything else throws workspaceForbidden().
 */
export async function authorizeWorkspace(engine: Engine, principal: Principal, workspaceId: string | undefined): Promise<Workspace> {
  if (workspaceId === undefined || !WORKSPACE_ID_PATTERN.test(workspaceId)) throw workspaceForbidden();
  // An application's own workspace is known from the credential; only the look-up is left.
  if (principal.applicationId !== null && workspaceId !== principal.workspaceId) throw workspaceForbidden();
  const workspace = await lookUp(engine, workspaceId);
  if (!workspace || workspace.organization_id !== principal.organizationId) throw workspaceForbidden();
  return workspace;
}
