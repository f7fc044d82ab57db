/**
 * The Events API's access steps (docs/events/permissions.md), after credentials() set the principal:
 * - permission({permission}): the route's permission, else 403 forbidden naming it;
 * - workspace({param}): the workspace the path names, checked against the credential (one identical
 *   403 forbidden for every refusal), then handed to the handler as `scope.workspace`.
 * The rules themselves are lambdas/auth/workspace-access.ts, shared with the WebSocket $connect.
 */
import type { Permission } from '../../auth/permissions.js';
import { authorizeWorkspace, requirePermission } from '../../auth/workspace-access.js';
import type { Middleware } from '../types.js';

export interface PermissionOptions {
  /** The permission the route needs (its RouteDef's `permission`). */
  permission: Permission;
}

export function permission(options: PermissionOptions): Middleware {
  return {
    before: ({ context }) => {
      requirePermission(context.platform.principal!, options.permission);
    },
  };
}

export interface WorkspaceOptions {
  /** The path parameter naming the workspace (`workspace_id`). */
  param: string;
}

export function workspace(options: WorkspaceOptions): Middleware {
  return {
    before: async ({ context }) => {
      const { engine, principal, req } = context.platform;
      context.platform.workspace = await authorizeWorkspace(engine!, principal!, req.params[options.param]);
    },
  };
}
