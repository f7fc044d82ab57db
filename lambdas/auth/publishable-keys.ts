/**
 * Publishable keys `apb_…`: public, bound to one application, usable only from listed origins.
 *   pbkey#<sha256> / pbkey          the key record
 *   pbkeyid#<id> / pbkeyid          key id -> hash, to disable by id
 *   origin#<origin> / pbk#<id>      origin index, for CORS preflights (they carry no credential)
 */
import type { KeyValueStore, KvWrite } from '../engine/ports.js';
import { newId, randomHex } from '../shared/ids.js';
import { hashSecret } from './secret-keys.js';
import { TenantError, Tenants } from './tenants.js';

export const PUBLISHABLE_KEY_PATTERN = /^apb_[0-9a-f]{48}$/;
const MAX_ORIGINS = 50;

export interface PublishableKey {
  id: string;
  application_id: string;
  organization_id: string;
  workspace_id: string;
  origins: string[];
  disabled: boolean;
  created_at: string;
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
  return url.origin;
}

export class PublishableKeys {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async create(applicationId: string, origins: string[]): Promise<{ id: string; key: string; origins: string[] }> {
    const app = await new Tenants(this.kv, this.now).getApplication(applicationId);
    if (!app) throw new TenantError(`no application ${applicationId}`);
    const listed = [...new Set(origins.map(normalizeOrigin))];
    if (listed.length === 0 || listed.length > MAX_ORIGINS) throw new TenantError(`list 1 to ${MAX_ORIGINS} origins`);
    const key = `apb_${randomHex(24)}`;
    const hash = hashSecret(key);
    const record: PublishableKey = {
      id: newId('pbk'),
      application_id: app.id,
      organization_id: app.organization_id,
      workspace_id: app.workspace_id,
      origins: listed,
      disabled: false,
      created_at: new Date(this.now()).toISOString(),
    };
    const writes: KvWrite[] = [
      { put: { pk: `pbkey#${hash}`, sk: 'pbkey', ...record }, condition: { ifAbsent: true } },
      { put: { pk: `pbkeyid#${record.id}`, sk: 'pbkeyid', hash } },
      ...listed.map((origin) => ({ put: { pk: `origin#${origin}`, sk: `pbk#${record.id}`, application_id: app.id } })),
    ];
    await this.kv.transact(writes);
    return { id: record.id, key, origins: listed };
  }

  async find(key: string): Promise<PublishableKey | undefined> {
    const item = await this.kv.get({ pk: `pbkey#${hashSecret(key)}`, sk: 'pbkey' });
    if (!item) return undefined;
    const { pk: _pk, sk: _sk, ...record } = item;
    return record as unknown as PublishableKey;
  }

  /** Disables the key and takes its origins out of the preflight index. */
  async disable(keyId: string): Promise<PublishableKey> {
    const pointer = await this.kv.get({ pk: `pbkeyid#${keyId}`, sk: 'pbkeyid' });
    if (!pointer) throw new TenantError(`no publishable key ${keyId}`);
    const current = await this.kv.get({ pk: `pbkey#${pointer.hash}`, sk: 'pbkey' });
    const origins = (current?.origins as string[] | undefined) ?? [];
    await this.kv.transact([
      { update: { pk: `pbkey#${pointer.hash}`, sk: 'pbkey' }, set: { disabled: true }, condition: { ifExists: true } },
      ...origins.map((origin) => ({ delete: { pk: `origin#${origin}`, sk: `pbk#${keyId}` } })),
    ]);
    const { pk: _pk, sk: _sk, ...record } = { ...current!, disabled: true };
    return record as unknown as PublishableKey;
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
