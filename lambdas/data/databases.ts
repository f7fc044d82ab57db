/**
 * Databases (spec 4.12, 4.13). A database belongs to the organization and, when an application-bound
 * credential created it, to that application: such credentials see only their application's databases.
 */
import type { KeyValueStore } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import type { Principal } from '../auth/principal.js';
import { isServerCredential } from '../auth/principal.js';
import { PlatformError } from '../shared/errors.js';
import { databaseKey, databasesPrefix } from './keys.js';
import { TtlCache } from '../shared/ttl-cache.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';

/** Lowercase letters, digits, `.`, `_`, `-` and `/`, up to 128 characters. */
export const DATABASE_NAME_PATTERN = /^[a-z0-9._/-]{1,128}$/;

export interface Database {
  key: string;
  created_at: string;
  application_id: string | null;
}

export const databaseNotFound = (key: string) => new PlatformError('database_not_found', `No database "${key}".`);

export function checkDatabaseName(key: string): void {
  if (!DATABASE_NAME_PATTERN.test(key) || key.split('/').some((part) => part === '' || part === '.' || part === '..')) {
    throw new PlatformError('invalid_name', 'A database key is 1 to 128 of lowercase letters, digits, ".", "_", "-" and "/" (written %2F).', 'database');
  }
}

/** Organization-wide credentials see every database; application-bound ones only their application's. */
export const canSee = (p: Principal, db: Database) => p.applicationId === null || db.application_id === p.applicationId;

export function requireServer(p: Principal, what: string): void {
  if (!isServerCredential(p)) throw new PlatformError('forbidden', `Only a secret key or OAuth client may ${what}.`);
}

/**
 * Databases are never deleted and their owner never changes, so a database once read is kept for a
 * minute (a cap, not a correctness need): every Data call names one.
 */
const seen = new TtlCache<Database>();
const SEEN_MS = 60_000;

export class Databases {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async list(p: Principal): Promise<Database[]> {
    requireServer(p, 'list databases');
    const { pk, prefix } = databasesPrefix(p.organizationId);
    const out: Database[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk, sk: { beginsWith: prefix }, cursor });
      for (const item of page.items) {
        const db = toDatabase(item);
        if (canSee(p, db)) out.push(db);
      }
      cursor = page.cursor;
    } while (cursor);
    return out;
  }

  /** Creates the database if it is new; `created` tells which. */
  async put(p: Principal, key: string): Promise<{ database: Database; created: boolean }> {
    requireServer(p, 'create databases');
    checkDatabaseName(key);
    const database: Database = { key, created_at: new Date(this.now()).toISOString(), application_id: p.applicationId };
    try {
      await this.kv.put({ ...databaseKey(p.organizationId, key), ...database }, { ifAbsent: true });
      return { database, created: true };
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
    }
    const item = await this.kv.get(databaseKey(p.organizationId, key));
    const existing = item && toDatabase(item);
    if (!existing) return this.put(p, key); // deleted meanwhile: try again
    // Database keys are one namespace per organization; another application's key is taken.
    if (!canSee(p, existing)) throw new PlatformError('forbidden', `Another application of the organization owns the database "${key}".`);
    return { database: existing, created: false };
  }

  /** The database if it exists and the credential may see it; 404 otherwise (the same answer either way). */
  async get(p: Principal, key: string): Promise<Database> {
    if (!DATABASE_NAME_PATTERN.test(key)) throw databaseNotFound(key);
    const cacheKey = `${p.organizationId}\u0000${key}`;
    const now = this.now();
    let db = seen.get(cacheKey, now);
    if (!db) {
      const item = await this.kv.get(databaseKey(p.organizationId, key));
      db = item && toDatabase(item);
      if (db) seen.set(cacheKey, db, now + SEEN_MS);
    }
    if (!db || !canSee(p, db)) throw databaseNotFound(key);
    return db;
  }
}

function toDatabase(item: Record<string, unknown>): Database {
  return { key: String(item.key), created_at: String(item.created_at), application_id: (item.application_id as string | null) ?? null };
}

/** The answer shape: `application_id` only for application-owned databases. */
export const databaseView = (db: Database): DatabaseView => (db.application_id ? { key: db.key, created_at: db.created_at, application_id: db.application_id } : { key: db.key, created_at: db.created_at });

/** The Database of the answers (spec 2): `application_id` only on an application's own. */
export const databaseViewSchema = onFirstUse(() =>
  z.strictObject({
    key: z.string().check(z.describe('The database key: lowercase letters, digits, `.`, `_`, `-` and `/`, up to 128 characters.')),
    created_at: z.iso.datetime(),
    application_id: z.optional(z.string().check(z.describe('The application that created it (application-owned databases only).'))),
  }),
);
export type DatabaseView = z.output<ReturnType<typeof databaseViewSchema>>;
export const databaseListSchema = onFirstUse(() => z.strictObject({ databases: z.array(databaseViewSchema()) }));
