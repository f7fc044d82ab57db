/**
 * Collections (spec 4.14). A PUT sends the full desired state: fields only in the new list are added,
 * fields only in the old one are dropped with their data, a field in both must be identical.
 * `schema_version` increases on every change, rules included. Stored as db#<org>#<db> / col#<name>.
 */
import type { KeyValueStore, KvItem } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import type { Principal } from '../auth/principal.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import { collectionKey, recordPartition } from './keys.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { contentionPauseMs, pause } from '../shared/backoff.js';
import { requireServer } from './databases.js';
import { COLLECTION_NAME_PATTERN, MAX_FIELDS, checkFields, fieldDefSchema, fieldView, sameField, type FieldDef, type StoredField } from './schema.js';
import { fieldType } from './fields/index.js';
import { RULE_ACTIONS, RuleSyntaxError, compileRules, validateRules, type CompiledRule, type Rule, type RuleAction } from './rules.js';

export interface Collection {
  name: string;
  mode: 'schema' | 'free';
  schema_version: number;
  fields: StoredField[];
  rules: Record<RuleAction, Rule>;
  /** Rules parsed once when the collection is saved. */
  compiled: Record<RuleAction, CompiledRule>;
  /**
   * Each dropped field and the schema_version that dropped it. In a free collection an undeclared key is
   * a free value, so a record written before the drop must not show the dropped field's old value.
   * A list, not a map keyed by field name: a field may be named `constructor`, which DynamoDB's document
   * client cannot take as a map key (engine/item-size.ts). Collections saved before kept a map.
   */
  dropped?: { name: string; version: number }[] | Record<string, number>;
  created_at: string;
  updated_at: string;
  /**
   * Every record of the collection is in the time indexes (keys.ts, recordTimeKeys): true for
   * collections created since records carry them, and once record-times.ts has backfilled an older one.
   */
  time_keys?: boolean;
}

/** The dropped fields of a collection, from either stored form. */
export function droppedFields(c: Collection): { name: string; version: number }[] {
  if (!c.dropped) return [];
  return Array.isArray(c.dropped) ? c.dropped : Object.entries(c.dropped).map(([name, version]) => ({ name, version }));
}

export const collectionNotFound = (name: string) => new PlatformError('collection_not_found', `No collection "${name}".`);

export function checkCollectionName(name: string): void {
  if (!COLLECTION_NAME_PATTERN.test(name)) {
    throw new PlatformError('invalid_name', 'A collection name is a lowercase letter, then lowercase letters, digits or "_", up to 63 characters.', 'collection');
  }
}

export const collectionView = (c: Collection): CollectionView => ({
  name: c.name,
  mode: c.mode,
  schema_version: c.schema_version,
  fields: c.fields.map(fieldView),
  rules: c.rules,
});

/** The Data collection of the answers (spec 2): its fields as fieldView shows them, all five rules. */
export const collectionViewSchema = onFirstUse(() => {
  const rule = () => z.nullable(z.string()).check(z.describe('null or "": server credentials only; "public", "users", or an expression (`@auth.id`, `@auth.kind`, record fields).'));
  return z.strictObject({
    name: z.string().check(z.regex(COLLECTION_NAME_PATTERN)),
    mode: z.enum(['schema', 'free']),
    schema_version: z.int().check(z.minimum(1), z.describe('Starts at 1; increases by one on every change (fields added, dropped or reordered, rules).')),
    fields: z.array(fieldDefSchema()),
    rules: z.strictObject({ list: rule(), view: rule(), create: rule(), update: rule(), delete: rule() }).check(z.meta({ id: 'CollectionRules' })),
  });
});
export type CollectionView = z.output<ReturnType<typeof collectionViewSchema>>;

/** The request schema, built at its first use (onFirstUse): only collection PUTs need it. */
const collectionSchemas = onFirstUse(() => ({
  body: z.strictObject({
    // null is the default too, as before.
    mode: z.nullish(z.enum(['schema', 'free'], { error: 'mode must be "schema" or "free".' }).check(z.describe('schema (default): only declared fields; free: any field, declared ones typed. Fixed once set.'))),
    // Each field's definition is checked by its type in the field registry (schema.ts checkFields), with its own code.
    // What a JSON Schema of them says (zod reads neither check): an array of the fields the answers show.
    fields: z.optional(
      z.unknown().check(
        z.meta({ type: 'array', maxItems: MAX_FIELDS, items: { $ref: '#/components/schemas/CollectionField' } }),
        z.describe('The full list of fields: {name, type, target?, required?, unique?, indexed?, fulltext?} each.'),
      ),
    ),
    // Each rule is checked by the rule grammar (rules.ts), with its own code.
    rules: z.optional(
      z.unknown().check(
        z.meta({ type: 'object', propertyNames: { enum: [...RULE_ACTIONS] }, additionalProperties: { type: ['string', 'null'] } }),
        z.describe('{list, view, create, update, delete}: each null (server credentials only), "" (server credentials only), "public", "users" or a rule expression; an omitted one is null.'),
      ),
    ),
  }),
}));

/** PUT .../collections/{collection}'s body: `{mode?, fields?, rules?}`, the full desired state. */
export const collectionBodySchema = () => collectionSchemas().body;

export interface CollectionBody {
  mode: Collection['mode'];
  fields: FieldDef[];
  rules: Record<RuleAction, Rule>;
  compiled: Record<RuleAction, CompiledRule>;
}

/**
 * A collection PUT's body: any fault in its shape is 400 invalid_body (an unknown property too, as
 * before), a field's definition 400 invalid_schema, a rule 400 invalid_rule.
 */
export function parseCollectionBody(body: unknown): CollectionBody {
  const b = parseBody(collectionBodySchema(), body, { unknownField: 'invalid_body' });
  const fields = checkFields(b.fields);
  try {
    const rules = validateRules(b.rules);
    return { mode: b.mode ?? 'schema', fields, rules, compiled: compileRules(rules) };
  } catch (error) {
    if (error instanceof RuleSyntaxError) throw new PlatformError('invalid_rule', error.message, 'rules');
    throw error;
  }
}

/**
 * Every record call reads its collection, so a process keeps one for a second. A stale copy cannot
 * write wrongly: each write transaction checks the collection's schema_version, and a write whose
 * check fails reads the collection again (`fresh`).
 */
const recent = new TtlCache<Collection>();
const RECENT_MS = 1000;
const recentKey = (org: string, database: string, name: string) => `${org}\u0000${database}\u0000${name}`;
/** How long a PUT keeps retrying a conditional write lost to concurrent PUTs, and its longest pause. */
const PUT_RETRY_BUDGET_MS = 2000;
const PUT_RETRY_MAX_PAUSE_MS = 50;

export class Collections {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async get(org: string, database: string, name: string, options: { fresh?: boolean } = {}): Promise<Collection | undefined> {
    const key = recentKey(org, database, name);
    const now = this.now();
    const hit = options.fresh ? undefined : recent.get(key, now);
    if (hit) return hit;
    const item = await this.kv.get(collectionKey(org, database, name));
    if (!item) {
      recent.delete(key);
      return undefined;
    }
    const { pk: _pk, sk: _sk, ...stored } = item;
    const collection = stored as unknown as Collection;
    recent.set(key, collection, now + RECENT_MS);
    return collection;
  }

  /** Every collection of the database, read fresh (no cache: callers decide access with them). */
  async list(org: string, database: string): Promise<Collection[]> {
    const { pk, sk } = collectionKey(org, database, '');
    const out: Collection[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk, sk: { beginsWith: sk }, cursor });
      for (const { pk: _pk, sk: _sk, ...stored } of page.items) out.push(stored as unknown as Collection);
      cursor = page.cursor;
    } while (cursor);
    return out;
  }

  async require(org: string, database: string, name: string): Promise<Collection> {
    const c = await this.get(org, database, name);
    if (!c) throw collectionNotFound(name);
    return c;
  }

  /** Applies a full desired state. `created` is true for a new collection, `changed` when the version moved. */
  async put(p: Principal, database: string, name: string, body: unknown): Promise<{ collection: Collection; created: boolean; changed: boolean }> {
    requireServer(p, 'change schemas');
    checkCollectionName(name);
    const { mode, fields, rules, compiled } = parseCollectionBody(body);
    for (const f of fields) {
      if (fieldType(f.type).references === 'record' && f.target !== name && !(await this.get(p.organizationId, database, f.target!))) {
        throw new PlatformError('invalid_schema', `${f.name}: target collection "${f.target}" does not exist.`, 'fields');
      }
    }

    // A PUT is the full desired state, so concurrent PUTs resolve as "last writer wins": one that loses
    // the conditional write diffs again against the winner's state. Every round lets one writer through,
    // so retry (with jitter) within a wall-clock budget, not a fixed count; past it, 409 version_conflict.
    const deadline = Date.now() + PUT_RETRY_BUDGET_MS;
    for (let attempt = 0; ; attempt++) {
      const current = await this.get(p.organizationId, database, name, { fresh: true });
      try {
        return current
          ? await this.change(p.organizationId, database, current, mode, fields, rules, compiled)
          : await this.create(p.organizationId, database, name, mode, fields, rules, compiled);
      } catch (error) {
        if (!(error instanceof ConditionFailedError)) throw error;
      }
      const wait = contentionPauseMs(attempt, PUT_RETRY_MAX_PAUSE_MS);
      if (Date.now() + wait >= deadline) {
        throw new PlatformError('version_conflict', `Collection "${name}" kept changing under concurrent PUTs; retry.`);
      }
      await pause(wait);
    }
  }

  private async create(org: string, database: string, name: string, mode: Collection['mode'], fields: FieldDef[], rules: Collection['rules'], compiled: Collection['compiled']) {
    const at = new Date(this.now()).toISOString();
    const collection: Collection = {
      name,
      mode,
      schema_version: 1,
      fields: fields.map((f) => ({ ...f, generation: 1 })),
      rules,
      compiled,
      created_at: at,
      updated_at: at,
      time_keys: true,
    };
    await this.kv.put({ ...collectionKey(org, database, name), ...(collection as unknown as Record<string, never>) }, { ifAbsent: true });
    recent.delete(recentKey(org, database, name));
    return { collection, created: true, changed: true };
  }

  private async change(org: string, database: string, current: Collection, mode: Collection['mode'], fields: FieldDef[], rules: Collection['rules'], compiled: Collection['compiled']) {
    if (mode !== current.mode) throw new PlatformError('schema_change_unsupported', `mode is fixed once set ("${current.mode}").`, 'mode');
    const old = new Map(current.fields.map((f) => [f.name, f]));
    const version = current.schema_version + 1;
    const next: StoredField[] = [];
    const added: FieldDef[] = [];
    for (const f of fields) {
      const before = old.get(f.name);
      if (before && !sameField(before, f)) {
        throw new PlatformError('schema_change_unsupported', `Field "${f.name}" cannot change; drop it and add it under a new name.`, 'fields');
      }
      if (!before) added.push(f);
      next.push(before ?? { ...f, generation: version });
    }
    const droppedNames = current.fields.filter((f) => !fields.some((g) => g.name === f.name)).map((f) => f.name);
    const dropped = droppedNames.length > 0;
    const rulesChanged = JSON.stringify(rules) !== JSON.stringify(current.rules);
    const reordered = JSON.stringify(current.fields.map((f) => f.name)) !== JSON.stringify(next.map((f) => f.name));
    if (!added.length && !dropped && !rulesChanged && !reordered) return { collection: current, created: false, changed: false };
    if (added.some((f) => f.required) && (await this.hasRecords(org, database, current.name))) {
      throw new PlatformError('schema_violation', 'A new required field cannot be added to a collection that has records: they would lack it.', 'fields');
    }
    const collection: Collection = {
      ...current,
      schema_version: version,
      fields: next,
      rules,
      compiled,
      ...(dropped ? { dropped: [...droppedFields(current).filter((d) => !droppedNames.includes(d.name)), ...droppedNames.map((name) => ({ name, version }))] } : {}),
      updated_at: new Date(this.now()).toISOString(),
    };
    await this.kv.put({ ...collectionKey(org, database, current.name), ...(collection as unknown as Record<string, never>) }, { ifEquals: { schema_version: current.schema_version } });
    recent.delete(recentKey(org, database, current.name));
    return { collection, created: false, changed: true };
  }

  private async hasRecords(org: string, database: string, name: string): Promise<boolean> {
    const page = await this.kv.query({ pk: recordPartition(org, database, name), limit: 1 });
    return page.items.length > 0;
  }

  /**
   * The free collection a write to a missing one creates (every rule null; server credentials only),
   * and its item, NOT written: the record write commits it in its own transaction (put if absent), so
   * a write that fails leaves no collection behind.
   */
  freeDraft(org: string, database: string, name: string): { collection: Collection; item: KvItem } {
    checkCollectionName(name);
    const rules = validateRules(undefined);
    const at = new Date(this.now()).toISOString();
    const collection: Collection = { name, mode: 'free', schema_version: 1, fields: [], rules, compiled: compileRules(rules), created_at: at, updated_at: at, time_keys: true };
    return { collection, item: { ...collectionKey(org, database, name), ...(collection as unknown as Record<string, never>) } };
  }

  /** Writing to a missing collection creates a free one with every rule null (server credentials only). */
  async ensureFree(org: string, database: string, name: string): Promise<Collection> {
    checkCollectionName(name);
    const rules = validateRules(undefined);
    try {
      return (await this.create(org, database, name, 'free', [], rules, compileRules(rules))).collection;
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
      return this.require(org, database, name);
    }
  }
}
