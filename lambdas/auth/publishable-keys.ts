/**
 * Publishable keys `apb_…`: public, bound to one application, usable only from listed origins.
 *   pbkey#<sha256> / pbkey          the key record, with the key's `last4` (gsi1: org#<org> / pbk#<id>, for `publishable-key list`)
 *   pbkeyid#<id> / pbkeyid          key id -> hash, to disable by id
 *   origin#<origin> / pbk#<id>      origin index, for CORS preflights (they carry no credential)
 */
import type { KeyValueStore, KvItem, KvWrite } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import { newId, randomHex } from '../shared/ids.js';
import { hashSecret } from './secret-keys.js';
import { listPage, TenantError, Tenants, type ListOptions, type ListPage } from './tenants.js';

export const PUBLISHABLE_KEY_PATTERN = /^apb_[0-9a-f]{48}$/;
const MAX_ORIGINS = 50;

export interface PublishableKey {
  id: string;
  application_id: string;
  organization_id: string;
  workspace_id: string;
  origins: string[];
  disabled: boolean;
  /** The key's last 4 characters (null: a key made before they were kept). */
  last4: string | null;
  created_at: string;
}

const index = (organizationId: string, keyId: string) => ({ gsi1pk: `org#${organizationId}`, gsi1sk: `pbk#${keyId}` });
const toKey = (item: KvItem): PublishableKey => {
  const { id, application_id, organization_id, workspace_id, origins, disabled, last4, created_at } = item as unknown as PublishableKey;
  return { id, application_id, organization_id, workspace_id, origins, disabled, last4: last4 ?? null, created_at };
};
/** Origins a key lists, checked and deduplicated: 1 to MAX_ORIGINS. */
function originList(origins: string[]): string[] {
  const listed = [...new Set(origins.map(normalizeOrigin))];
  if (listed.length === 0 || listed.length > MAX_ORIGINS) throw new TenantError(`list 1 to ${MAX_ORIGINS} origins`);
  return listed;
}

/** An origin is `scheme://host[:port]` exactly as browsers send it: http(s), no path, no wildcard. */
export function normalizeOrigin(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TenantError(`"${value}" is not an origin like https://app.example.com`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== value.replace(/\/$/, '')) {
    throw new TenantError(`"${value}" is not an origin like https://app.example.com (scheme, host and port only)`);
  }
  // URL takes `*` in a host, but no browser sends one: such an origin would match nothing, not every subdomain.
  if (url.hostname.includes('*')) throw new TenantError(`"${value}" is not an origin like https://app.example.com (no wildcards: list each origin)`);
  return url.origin;
}

export class PublishableKeys {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async create(applicationId: string, origins: string[]): Promise<{ id: string; key: string; origins: string[] }> {
    const app = await new Tenants(this.kv, this.now).getApplication(applicationId);
    if (!app) throw new TenantError(`no application ${applicationId}`);
    const listed = originList(origins);
    const key = `apb_${randomHex(24)}`;
    const hash = hashSecret(key);
    const record: PublishableKey = {
      id: newId('pbk'),
      application_id: app.id,
      organization_id: app.organization_id,
      workspace_id: app.workspace_id,
      origins: listed,
      disabled: false,
      last4: key.slice(-4),
      created_at: new Date(this.now()).toISOString(),
    };
    const writes: KvWrite[] = [
      { put: { pk: `pbkey#${hash}`, sk: 'pbkey', ...index(app.organization_id, record.id), ...record }, condition: { ifAbsent: true } },
      { put: { pk: `pbkeyid#${record.id}`, sk: 'pbkeyid', hash } },
      ...listed.map((origin) => ({ put: { pk: `origin#${origin}`, sk: `pbk#${record.id}`, application_id: app.id } })),
    ];
    await this.kv.transact(writes);
    return { id: record.id, key, origins: listed };
  }

  async find(key: string): Promise<PublishableKey | undefined> {
    const item = await this.kv.get({ pk: `pbkey#${hashSecret(key)}`, sk: 'pbkey' });
    return item && toKey(item);
  }

  /** A key's record by its id (never the key nor its hash), or undefined. */
  async get(keyId: string): Promise<PublishableKey | undefined> {
    const pointer = await this.kv.get({ pk: `pbkeyid#${keyId}`, sk: 'pbkeyid' });
    const item = pointer && (await this.kv.get({ pk: `pbkey#${pointer.hash}`, sk: 'pbkey' }));
    return item ? toKey(item) : undefined;
  }

  /** Disables the key and takes its origins out of the preflight index. */
  async disable(keyId: string): Promise<PublishableKey> {
    const pointer = await this.kv.get({ pk: `pbkeyid#${keyId}`, sk: 'pbkeyid' });
    if (!pointer) throw new TenantError(`no publishable key ${keyId}`);
    const current = await this.kv.get({ pk: `pbkey#${pointer.hash}`, sk: 'pbkey' });
    if (!current) throw new TenantError(`no publishable key ${keyId}`);
    const origins = (current.origins as string[] | undefined) ?? [];
    await this.kv.transact([
      { update: { pk: `pbkey#${pointer.hash}`, sk: 'pbkey' }, set: { disabled: true, ...index(String(current.organization_id), keyId) }, condition: { ifExists: true } },
      ...origins.map((origin) => ({ delete: { pk: `origin#${origin}`, sk: `pbk#${keyId}` } })),
    ]);
    return toKey({ ...current, disabled: true });
  }

  /**
   * Replaces the origins a key may be used from (1 to MAX_ORIGINS): the preflight index follows
   * (a disabled key stays out of it), and a running server applies the change within
   * CREDENTIAL_CACHE_MS. The record and the index change in one transaction when they fit (100
   * writes), else the added origins first: an origin is never refused that both lists hold. (Two
   * changes at once may leave an entry of the other's list in the index: a preflight then passes for
   * it, and the request itself is still refused by the key's own list.)
   */
  async setOrigins(keyId: string, origins: string[]): Promise<PublishableKey> {
    const listed = originList(origins);
    const pointer = await this.kv.get({ pk: `pbkeyid#${keyId}`, sk: 'pbkeyid' });
    const current = pointer && (await this.kv.get({ pk: `pbkey#${pointer.hash}`, sk: 'pbkey' }));
    if (!pointer || !current) throw new TenantError(`no publishable key ${keyId}`);
    const before = (current.origins as string[] | undefined) ?? [];
    const live = current.disabled !== true;
    const record: KvWrite = {
      update: { pk: `pbkey#${pointer.hash}`, sk: 'pbkey' },
      set: { origins: listed, ...index(String(current.organization_id), keyId) },
      // A key disabled meanwhile took its origins out of the index: adding them back would undo that.
      condition: { ifEquals: { disabled: current.disabled === true } },
    };
    const added: KvWrite[] = live ? listed.filter((o) => !before.includes(o)).map((origin) => ({ put: { pk: `origin#${origin}`, sk: `pbk#${keyId}`, application_id: String(current.application_id) } })) : [];
    const removed: KvWrite[] = live ? before.filter((o) => !listed.includes(o)).map((origin) => ({ delete: { pk: `origin#${origin}`, sk: `pbk#${keyId}` } })) : [];
    const fail = (error: unknown): never => {
      if (error instanceof TransactionCanceledError) throw new TenantError(`publishable key ${keyId} was disabled or enabled meanwhile: run the command again`);
      throw error;
    };
    if (1 + added.length + removed.length <= 100) await this.kv.transact([record, ...added, ...removed]).catch(fail);
    else {
      await this.kv.transact([record, ...added]).catch(fail);
      await this.kv.transact(removed);
    }
    return toKey({ ...current, origins: listed });
  }

  /** The application's publishable keys, oldest first (the key's last 4 characters, never the key nor its hash). */
  async list(applicationId: string, options: ListOptions = {}): Promise<ListPage<PublishableKey>> {
    const app = await new Tenants(this.kv, this.now).getApplication(applicationId);
    if (!app) throw new TenantError(`no application ${applicationId}`);
    const query = { index: 'gsi1' as const, pk: `org#${app.organization_id}`, sk: { beginsWith: 'pbk#' } };
    return listPage(this.kv, query, options, (item) => item.application_id === app.id, toKey);
  }

  /** Every publishable key of the organization, oldest first (the console's list; `publishable-key list` goes by application). */
  listOrganization(organizationId: string, options: ListOptions = {}): Promise<ListPage<PublishableKey>> {
    return listPage(this.kv, { index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'pbk#' } }, options, () => true, toKey);
  }

  /** Applications whose live publishable keys list the origin. */
  async applicationsListing(origin: string): Promise<Set<string>> {
    const apps = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk: `origin#${origin}`, cursor, limit: 100 });
      for (const item of page.items) apps.add(String(item.application_id));
      cursor = page.cursor;
    } while (cursor);
    return apps;
  }
}
