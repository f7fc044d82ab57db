/**
 * Organizations, workspaces, applications and secret keys. Storage layout (one table):
 *   org#<id> / org                 organization
 *   ws#<id> / ws                   workspace      (gsi1: org#<org> / ws#<id>)
 *   app#<id> / app                 application    (gsi1: org#<org> / app#<id>)
 *   key#<sha256> / key             secret key, looked up by the hash of the presented secret; `permissions`
 *                                  (Events) only when narrowed at creation, absent = every Events permission
 *   keyid#<id> / keyid             pointer from a key id to its hash, to disable by id
 *   org#<id> / default-workspace   the workspace an organization-wide key works in where a route
 *                                  names none (vectors); absent: the organization's first workspace
 */
import type { KeyValueStore } from '../engine/ports.js';
import type { Capability } from './principal.js';
import { canonicalPermissions, EVENTS_PERMISSIONS, unknownPermissions, type Permission } from './permissions.js';
import { newId } from '../shared/ids.js';
import { hashSecret, newSecretKey } from './secret-keys.js';

export const CAPABILITIES: readonly Capability[] = ['ai.chat', 'ai.embeddings', 'knowledge', 'decision'];

export interface Organization {
  id: string;
  name: string;
  disabled: boolean;
  created_at: string;
}
export interface Workspace {
  id: string;
  organization_id: string;
  name: string;
  created_at: string;
}
export interface Application {
  id: string;
  organization_id: string;
  workspace_id: string;
  name: string;
  capabilities: Capability[];
  created_at: string;
}
export interface SecretKeyRecord {
  id: string;
  organization_id: string;
  application_id: string | null;
  disabled: boolean;
  /** The Events permissions the key holds; null (stored: absent) is all of them (docs/events/permissions.md). */
  permissions: Permission[] | null;
  created_at: string;
}

export class TenantError extends Error {
  override name = 'TenantError';
}

const iso = (ms: number) => new Date(ms).toISOString();
/** The item from a secret key's id to its hash; per-key settings (AI limits, routes) live in its partition. */
export const secretKeyPointer = (keyId: string) => ({ pk: `keyid#${keyId}`, sk: 'keyid' });
const strip = <T>(item: Record<string, unknown>): T => {
  const { pk: _pk, sk: _sk, gsi1pk: _g1, gsi1sk: _g2, ...rest } = item;
  return rest as T;
};

/**
 * A narrowed permission list as stored: known names only (TenantError naming the others), at least
 * one, deduplicated in canonical order. undefined (not narrowed) stays undefined: every permission.
 */
export function permissionList(permissions: readonly string[] | undefined): Permission[] | undefined {
  if (permissions === undefined) return undefined;
  const unknown = unknownPermissions(permissions);
  if (unknown.length) throw new TenantError(`unknown permissions: ${unknown.join(', ')} (known: ${EVENTS_PERMISSIONS.join(', ')})`);
  if (!permissions.length) throw new TenantError('a permission list needs at least one permission; leave it out for all of them');
  return canonicalPermissions(permissions as Permission[]);
}

const toSecretKeyRecord = (item: Record<string, unknown>): SecretKeyRecord => {
  const { permissions, ...rest } = strip<SecretKeyRecord>(item);
  return { ...rest, permissions: permissions ?? null };
};

export class Tenants {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async createOrganization(name: string): Promise<Organization> {
    const org: Organization = { id: newId('org'), name, disabled: false, created_at: iso(this.now()) };
    await this.kv.put({ pk: `org#${org.id}`, sk: 'org', ...org }, { ifAbsent: true });
    return org;
  }

  async getOrganization(id: string): Promise<Organization | undefined> {
    const item = await this.kv.get({ pk: `org#${id}`, sk: 'org' });
    return item && strip<Organization>(item);
  }

  async setOrganizationDisabled(id: string, disabled: boolean): Promise<Organization> {
    const item = await this.kv
      .update({ key: { pk: `org#${id}`, sk: 'org' }, set: { disabled }, condition: { ifExists: true } })
      .catch(() => {
        throw new TenantError(`no organization ${id}`);
      });
    return strip<Organization>(item);
  }

  async createWorkspace(organizationId: string, name: string): Promise<Workspace> {
    await this.requireOrganization(organizationId);
    const ws: Workspace = { id: newId('ws'), organization_id: organizationId, name, created_at: iso(this.now()) };
    await this.kv.put({ pk: `ws#${ws.id}`, sk: 'ws', gsi1pk: `org#${organizationId}`, gsi1sk: `ws#${ws.id}`, ...ws }, { ifAbsent: true });
    return ws;
  }

  async getWorkspace(id: string): Promise<Workspace | undefined> {
    const item = await this.kv.get({ pk: `ws#${id}`, sk: 'ws' });
    return item && strip<Workspace>(item);
  }

  /**
   * The organization's default workspace: the one `setDefaultWorkspace` named, else its first (ids
   * sort by creation), which is then written down as the default so later calls read one item
   * instead of querying the index (the first workspace never changes).
   */
  async defaultWorkspace(organizationId: string): Promise<string | undefined> {
    const key = { pk: `org#${organizationId}`, sk: 'default-workspace' };
    const chosen = await this.kv.get(key);
    if (typeof chosen?.workspace_id === 'string') return chosen.workspace_id;
    const first = (await this.kv.query({ index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'ws#' }, limit: 1 })).items[0]?.id as string | undefined;
    // Absent only: an operator's choice made meanwhile stands.
    if (first !== undefined) await this.kv.put({ ...key, workspace_id: first }, { ifAbsent: true }).catch(() => undefined);
    return first;
  }

  async setDefaultWorkspace(organizationId: string, workspaceId: string): Promise<{ organization_id: string; workspace_id: string }> {
    const ws = await this.getWorkspace(workspaceId);
    if (!ws || ws.organization_id !== organizationId) throw new TenantError(`no workspace ${workspaceId} in organization ${organizationId}`);
    await this.kv.put({ pk: `org#${organizationId}`, sk: 'default-workspace', workspace_id: workspaceId });
    return { organization_id: organizationId, workspace_id: workspaceId };
  }

  async createApplication(workspaceId: string, name: string, capabilities: Capability[]): Promise<Application> {
    const ws = await this.getWorkspace(workspaceId);
    if (!ws) throw new TenantError(`no workspace ${workspaceId}`);
    const unknown = capabilities.filter((c) => !CAPABILITIES.includes(c));
    if (unknown.length) throw new TenantError(`unknown capabilities: ${unknown.join(', ')} (known: ${CAPABILITIES.join(', ')})`);
    const app: Application = {
      id: newId('app'),
      organization_id: ws.organization_id,
      workspace_id: ws.id,
      name,
      capabilities: [...new Set(capabilities)],
      created_at: iso(this.now()),
    };
    await this.kv.put({ pk: `app#${app.id}`, sk: 'app', gsi1pk: `org#${ws.organization_id}`, gsi1sk: `app#${app.id}`, ...app }, { ifAbsent: true });
    return app;
  }

  async getApplication(id: string): Promise<Application | undefined> {
    const item = await this.kv.get({ pk: `app#${id}`, sk: 'app' });
    return item && strip<Application>(item);
  }

  /**
   * Creates a secret key; the secret is returned this once and only its hash is kept. `permissions`
   * narrows what it may do on Events; without it the key holds every Events permission.
   */
  async createSecretKey(
    organizationId: string,
    applicationId?: string,
    options: { permissions?: readonly string[] } = {},
  ): Promise<{ id: string; key: string; record: SecretKeyRecord }> {
    const permissions = permissionList(options.permissions);
    await this.requireOrganization(organizationId);
    if (applicationId) {
      const app = await this.getApplication(applicationId);
      if (!app || app.organization_id !== organizationId) throw new TenantError(`no application ${applicationId} in ${organizationId}`);
    }
    const key = newSecretKey();
    const hash = hashSecret(key);
    const record: SecretKeyRecord = {
      id: newId('key'),
      organization_id: organizationId,
      application_id: applicationId ?? null,
      disabled: false,
      permissions: permissions ?? null,
      created_at: iso(this.now()),
    };
    const { permissions: _all, ...stored } = record;
    await this.kv.transact([
      { put: { pk: `key#${hash}`, sk: 'key', ...stored, ...(permissions ? { permissions } : {}) }, condition: { ifAbsent: true } },
      { put: { ...secretKeyPointer(record.id), hash }, condition: { ifAbsent: true } },
    ]);
    return { id: record.id, key, record };
  }

  async findSecretKey(secret: string): Promise<SecretKeyRecord | undefined> {
    const item = await this.kv.get({ pk: `key#${hashSecret(secret)}`, sk: 'key' });
    return item && toSecretKeyRecord(item);
  }

  async setSecretKeyDisabled(keyId: string, disabled: boolean): Promise<SecretKeyRecord> {
    const pointer = await this.kv.get(secretKeyPointer(keyId));
    if (!pointer) throw new TenantError(`no key ${keyId}`);
    const item = await this.kv.update({ key: { pk: `key#${pointer.hash}`, sk: 'key' }, set: { disabled }, condition: { ifExists: true } });
    return toSecretKeyRecord(item);
  }

  private async requireOrganization(id: string): Promise<Organization> {
    const org = await this.getOrganization(id);
    if (!org) throw new TenantError(`no organization ${id}`);
    return org;
  }
}
