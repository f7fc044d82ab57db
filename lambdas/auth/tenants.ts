/**
 * Organizations, workspaces, applications and secret keys. Storage layout (one table):
 *   org#<id> / org                 organization   (gsi1: orgs / org#<id>, for `org list`)
 *   ws#<id> / ws                   workspace      (gsi1: org#<org> / ws#<id>)
 *   app#<id> / app                 application    (gsi1: org#<org> / app#<id>); `disabled` absent = false
 *   key#<sha256> / key             secret key, looked up by the hash of the presented secret; `permissions`
 *                                  (Events) only when narrowed at creation, absent = every Events permission;
 *                                  `last4` of the secret (gsi1: org#<org> / key#<id>, for `key list`)
 *   keyid#<id> / keyid             pointer from a key id to its hash, to disable by id
 *   org#<id> / default-workspace   the workspace an organization-wide key works in where a route
 *                                  names none (vectors); absent: the organization's first workspace
 * The gsi1 partition org#<org> also lists the organization's OAuth clients (cli#<id>) and publishable
 * keys (pbk#<id>). Records written before these index keys existed are not listed until a write
 * touches them (docs/decisions/admin-lists.md).
 */
import type { KeyValueStore, KvItem, KvQuery } from '../engine/ports.js';
import { InvalidCursorError } from '../shared/cursors.js';
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
  /** A disabled application's credentials answer `403 key_disabled`; its data is kept. */
  disabled: boolean;
  created_at: string;
}
export interface SecretKeyRecord {
  id: string;
  organization_id: string;
  application_id: string | null;
  disabled: boolean;
  /** The Events permissions the key holds; null (stored: absent) is all of them (docs/events/permissions.md). */
  permissions: Permission[] | null;
  /** The secret's last 4 characters, to tell keys apart (null: a key made before they were kept). */
  last4: string | null;
  created_at: string;
}

/** One page of a list: `next_cursor` continues it, null at its end. */
export interface ListPage<T> {
  data: T[];
  next_cursor: string | null;
}
export interface ListOptions {
  /** 1 to LIST_MAX (default LIST_MAX). */
  limit?: number;
  cursor?: string;
}
/** The most a list answers at once; a larger organization is read a page at a time. */
export const LIST_MAX = 100;
/** Store pages one list call reads at most: a filter that skips most of a partition then answers fewer, with a cursor. */
const MAX_READS = 10;

/**
 * One page of the items of `query` that `keep` keeps: at most `limit`, from at most MAX_READS store
 * pages, so a call is bounded whatever the partition holds. The cursor is the store's own (the
 * operator may read the whole table anyway); one that the store refuses is a TenantError.
 */
export async function listPage<T>(
  kv: KeyValueStore,
  query: KvQuery,
  { limit = LIST_MAX, cursor }: ListOptions,
  keep: (item: KvItem) => boolean,
  view: (item: KvItem) => T,
): Promise<ListPage<T>> {
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > LIST_MAX) throw new TenantError(`limit must be a whole number from 1 to ${LIST_MAX}`);
  const data: T[] = [];
  let next = cursor;
  for (let reads = 0; reads < MAX_READS; reads++) {
    const q: KvQuery = { ...query, limit, cursor: next };
    const page = await kv.query(q).catch((error: unknown) => {
      if (error instanceof InvalidCursorError) throw new TenantError('cursor: not one this list gave (pass next_cursor as printed)');
      throw error;
    });
    for (const [i, item] of page.items.entries()) {
      if (!keep(item)) continue;
      data.push(view(item));
      // Full: the next call resumes just after this item.
      if (data.length === limit) return { data, next_cursor: i === page.items.length - 1 && !page.cursor ? null : kv.cursorAfter(q, item) };
    }
    next = page.cursor;
    if (!next) return { data, next_cursor: null };
  }
  return { data, next_cursor: next ?? null };
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
  const { permissions, last4, ...rest } = strip<SecretKeyRecord>(item);
  return { ...rest, permissions: permissions ?? null, last4: last4 ?? null };
};
const toApplication = (item: Record<string, unknown>): Application => ({ ...strip<Application>(item), disabled: item.disabled === true });
/** The index keys of an organization (`org list`), written with it and by any later write to it. */
const organizationIndex = (id: string) => ({ gsi1pk: 'orgs', gsi1sk: `org#${id}` });
/** The index keys of a secret key in its organization's partition (`key list`). */
const secretKeyIndex = (organizationId: string, keyId: string) => ({ gsi1pk: `org#${organizationId}`, gsi1sk: `key#${keyId}` });

export class Tenants {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async createOrganization(name: string): Promise<Organization> {
    const org: Organization = { id: newId('org'), name, disabled: false, created_at: iso(this.now()) };
    await this.kv.put({ pk: `org#${org.id}`, sk: 'org', ...organizationIndex(org.id), ...org }, { ifAbsent: true });
    return org;
  }

  async getOrganization(id: string): Promise<Organization | undefined> {
    const item = await this.kv.get({ pk: `org#${id}`, sk: 'org' });
    return item && strip<Organization>(item);
  }

  async setOrganizationDisabled(id: string, disabled: boolean): Promise<Organization> {
    const item = await this.kv
      .update({ key: { pk: `org#${id}`, sk: 'org' }, set: { disabled, ...organizationIndex(id) }, condition: { ifExists: true } })
      .catch(() => {
        throw new TenantError(`no organization ${id}`);
      });
    return strip<Organization>(item);
  }

  /** Organizations, oldest first. */
  listOrganizations(options: ListOptions = {}): Promise<ListPage<Organization>> {
    return listPage(this.kv, { index: 'gsi1', pk: 'orgs', sk: { beginsWith: 'org#' } }, options, () => true, (item) => strip<Organization>(item));
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

  /** The organization's workspaces, oldest first. */
  async listWorkspaces(organizationId: string, options: ListOptions = {}): Promise<ListPage<Workspace>> {
    await this.requireOrganization(organizationId);
    return listPage(this.kv, { index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'ws#' } }, options, () => true, (item) => strip<Workspace>(item));
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
      disabled: false,
      created_at: iso(this.now()),
    };
    await this.kv.put({ pk: `app#${app.id}`, sk: 'app', gsi1pk: `org#${ws.organization_id}`, gsi1sk: `app#${app.id}`, ...app }, { ifAbsent: true });
    return app;
  }

  async getApplication(id: string): Promise<Application | undefined> {
    const item = await this.kv.get({ pk: `app#${id}`, sk: 'app' });
    return item && toApplication(item);
  }

  /** The workspace's applications, oldest first (read from its organization's, which every application is listed in). */
  async listApplications(workspaceId: string, options: ListOptions = {}): Promise<ListPage<Application>> {
    const ws = await this.getWorkspace(workspaceId);
    if (!ws) throw new TenantError(`no workspace ${workspaceId}`);
    const query: KvQuery = { index: 'gsi1', pk: `org#${ws.organization_id}`, sk: { beginsWith: 'app#' } };
    return listPage(this.kv, query, options, (item) => item.workspace_id === ws.id, toApplication);
  }

  /** Every application of the organization, oldest first (the console's list; `app list` goes by workspace). */
  async listOrganizationApplications(organizationId: string, options: ListOptions = {}): Promise<ListPage<Application>> {
    await this.requireOrganization(organizationId);
    return listPage(this.kv, { index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'app#' } }, options, () => true, toApplication);
  }

  /**
   * Disables or enables an application: every credential bound to it (secret keys, OAuth clients'
   * tokens, publishable keys, end-user tokens) answers `403 key_disabled` within CREDENTIAL_CACHE_MS,
   * and its OAuth clients get no new token; organization-wide keys are not bound to it.
   */
  async setApplicationDisabled(id: string, disabled: boolean): Promise<Application> {
    const item = await this.kv.update({ key: { pk: `app#${id}`, sk: 'app' }, set: { disabled }, condition: { ifExists: true } }).catch(() => {
      throw new TenantError(`no application ${id}`);
    });
    return toApplication(item);
  }

  /**
   * Replaces an application's capabilities (spec 4.1): its credentials hold the new list within
   * CREDENTIAL_CACHE_MS (they read it from the application when resolved).
   */
  async setApplicationCapabilities(id: string, capabilities: Capability[]): Promise<Application> {
    const unknown = capabilities.filter((c) => !CAPABILITIES.includes(c));
    if (unknown.length) throw new TenantError(`unknown capabilities: ${unknown.join(', ')} (known: ${CAPABILITIES.join(', ')})`);
    const item = await this.kv.update({ key: { pk: `app#${id}`, sk: 'app' }, set: { capabilities: [...new Set(capabilities)] }, condition: { ifExists: true } }).catch(() => {
      throw new TenantError(`no application ${id}`);
    });
    return toApplication(item);
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
      last4: key.slice(-4),
      created_at: iso(this.now()),
    };
    const { permissions: _all, ...stored } = record;
    await this.kv.transact([
      { put: { pk: `key#${hash}`, sk: 'key', ...secretKeyIndex(organizationId, record.id), ...stored, ...(permissions ? { permissions } : {}) }, condition: { ifAbsent: true } },
      { put: { ...secretKeyPointer(record.id), hash }, condition: { ifAbsent: true } },
    ]);
    return { id: record.id, key, record };
  }

  async findSecretKey(secret: string): Promise<SecretKeyRecord | undefined> {
    const item = await this.kv.get({ pk: `key#${hashSecret(secret)}`, sk: 'key' });
    return item && toSecretKeyRecord(item);
  }

  /** A secret key's record by its id (never the secret nor its hash), or undefined. */
  async getSecretKey(keyId: string): Promise<SecretKeyRecord | undefined> {
    const pointer = await this.kv.get(secretKeyPointer(keyId));
    const item = pointer && (await this.kv.get({ pk: `key#${pointer.hash}`, sk: 'key' }));
    return item ? toSecretKeyRecord(item) : undefined;
  }

  /** `organizationId`: only a key of that organization (the console's caller); another's is `no key` alike. */
  async setSecretKeyDisabled(keyId: string, disabled: boolean, organizationId?: string): Promise<SecretKeyRecord> {
    const pointer = await this.kv.get(secretKeyPointer(keyId));
    if (!pointer) throw new TenantError(`no key ${keyId}`);
    const current = await this.kv.get({ pk: `key#${pointer.hash}`, sk: 'key' });
    if (!current || (organizationId !== undefined && current.organization_id !== organizationId)) throw new TenantError(`no key ${keyId}`);
    const index = secretKeyIndex(String(current.organization_id), keyId);
    const item = await this.kv.update({ key: { pk: `key#${pointer.hash}`, sk: 'key' }, set: { disabled, ...index }, condition: { ifExists: true } });
    return toSecretKeyRecord(item);
  }

  /**
   * The organization's secret keys, oldest first, or those of one of its applications: records only
   * (the secret's last 4 characters at most; never the secret nor its hash).
   */
  async listSecretKeys(organizationId: string, options: ListOptions & { applicationId?: string } = {}): Promise<ListPage<SecretKeyRecord>> {
    await this.requireOrganization(organizationId);
    const { applicationId } = options;
    if (applicationId !== undefined) {
      const app = await this.getApplication(applicationId);
      if (!app || app.organization_id !== organizationId) throw new TenantError(`no application ${applicationId} in ${organizationId}`);
    }
    const query: KvQuery = { index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'key#' } };
    return listPage(this.kv, query, options, (item) => applicationId === undefined || item.application_id === applicationId, toSecretKeyRecord);
  }

  private async requireOrganization(id: string): Promise<Organization> {
    const org = await this.getOrganization(id);
    if (!org) throw new TenantError(`no organization ${id}`);
    return org;
  }
}
