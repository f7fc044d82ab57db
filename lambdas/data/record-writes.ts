/**
 * Record writes (spec 4.15, 4.16 and the documented record routes). Every write — one record or a
 * batch of 100 — becomes ONE key-value transaction: the record items, one guard item per unique
 * value, one entry per indexed or blob value, existence checks for relations and blobs, and a check that the
 * collection's schema did not change meanwhile. All of it applies, or none of it.
 */
import type { KvCondition, KvItem, KvValue, KvWrite } from '../engine/ports.js';
import { writeKey } from '../engine/ports.js';
import { deepEqual } from '../shared/deep-equal.js';
import { EngineLimitError, TransactionCanceledError } from '../engine/errors.js';
import { LIMITS } from '../engine/limits.js';
import { isServerCredential } from '../auth/principal.js';
import { PlatformError } from '../shared/errors.js';
import { newId, pooledRandomBytes } from '../shared/ids.js';
import { contentionPauseMs, pause } from '../shared/backoff.js';
import { settleArrivals } from './blobs.js';
import { blobMetaKey, collectionKey, indexPartition, recordKey, uniquePartition } from './keys.js';
import { Collections, collectionNotFound, type Collection } from './collections.js';
import { RECORD_ID_PATTERN, RESERVED_FIELDS, SEP, checkKeyValueSize, encodeKeyValue, normalizeValue, type StoredField } from './schema.js';
import { fieldType } from './fields/index.js';
import { checkFiniteNumbers } from './fields/json.js';
import { dataHooks, type DataScope, type RecordHookEvent } from './hooks.js';
import { changeKey, planChangeOutbox, recordChangeData, roomForOutbox, settleChangeOutbox, type Change } from './change-outbox.js';
import { evaluateRule, ruleAllowsPrincipal } from './rules.js';
import { blobEntryKey, referencesBlob } from './blob-rules.js';
import { MAX_RECORD_BYTES, loadRecord, ownValue, recordItem, recordViewSchema, view, visibleValues, type LoadedRecord, type RecordMeta, type RecordView } from './record-store.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';

export interface WriteOp {
  op: 'create' | 'update' | 'delete';
  collection: string;
  id?: string;
  /** The version an update or delete applies to (batch `version`, or `If-Match`). */
  version?: number;
  data?: Record<string, unknown>;
}

export type WriteResult = RecordView | { id: string; deleted: true };

/** A batch's answer: a Record for each create and update, `{id, deleted: true}` for each delete, in op order. */
export const batchAnswerSchema = onFirstUse(() => {
  const deleted = z.strictObject({ id: z.string(), deleted: z.literal(true) }).check(z.meta({ id: 'DeletedRecord' }));
  return z.strictObject({ results: z.array(z.union([recordViewSchema(), deleted])).check(z.describe('One result per op, in order.')) });
});

export interface WriteContext extends DataScope {
  database: string;
}

type Reason = { kind: 'exists' } | { kind: 'version' } | { kind: 'unique'; field: string } | { kind: 'relation'; field: string } | { kind: 'blob'; field: string } | { kind: 'schema' };

interface Planned {
  write: KvWrite;
  op: number;
  reason?: Reason;
}

const HOOK_TYPE = { create: 'record.created', update: 'record.updated', delete: 'record.deleted' } as const;

function hookEvent(database: string, op: WriteOp, result: WriteResult): RecordHookEvent {
  const version = 'version' in result ? result.version : (op.version ?? null);
  return { type: HOOK_TYPE[op.op], database, collection: op.collection, recordId: result.id, version };
}

const recordNotFound = (id: string) => new PlatformError('record_not_found', `No record "${id}".`);
export const versionConflict = (id: string) => new PlatformError('version_conflict', `Record "${id}" is not at that version.`);
/**
 * A write that names no version (no If-Match, no batch `version`) is retried on the new version when
 * another writer got there first, as the reference promises: up to 50 attempts with a growing random
 * pause (at most 25 ms each, about 0.6 s in all), well inside a function's time.
 */
const MAX_ATTEMPTS = 50;
const MAX_PAUSE_MS = 25;

export class RecordWriter {
  private readonly collections: Collections;
  private readonly now: () => number;

  constructor(private readonly ctx: WriteContext) {
    this.now = () => ctx.engine.clock.now();
    this.collections = new Collections(ctx.engine.kv, this.now);
  }

  private get org() {
    return this.ctx.principal.organizationId;
  }

  /** Applies the ops in one transaction; the first failing op is the answer. */
  async apply(ops: WriteOp[]): Promise<WriteResult[]> {
    refuseSameRecordTwice(ops);
    // Platform events (docs/events/platform-events.md): one cached read decides whether the changes
    // are wanted; if so, their outbox item is one more write of the transaction.
    const outbox = await planChangeOutbox(this.ctx, [...new Set(ops.map((o) => HOOK_TYPE[o.op]))]);
    for (let attempt = 1; ; attempt++) {
      // A retry reads collections afresh: the cached one may be what failed the schema check.
      let plan: Awaited<ReturnType<RecordWriter['plan']>>;
      try {
        plan = await this.plan(ops, attempt > 1, outbox ? 1 : 0);
      } catch (error) {
        if (!(error instanceof Replan)) throw error;
        if (attempt >= MAX_ATTEMPTS) throw error.error;
        await pause(contentionPauseMs(attempt, MAX_PAUSE_MS));
        continue;
      }
      const changes = outbox ? this.changes(ops, plan.results, plan.lives) : [];
      const writes = plan.writes.map((w) => w.write);
      // Appended last, so the planned writes keep their indexes; it has no condition and never fails.
      // A write whose own writes fill the transaction (100 plain creates) publishes after its commit.
      const outboxInTransaction = !!outbox && roomForOutbox(writes.length);
      if (outboxInTransaction) writes.push(outbox.write(changes));
      try {
        await this.ctx.engine.kv.transact(writes);
      } catch (error) {
        await Promise.all(plan.newBodies.map((k) => this.ctx.engine.blobs.delete(k).catch(() => undefined)));
        if (error instanceof EngineLimitError) {
          // One record's route never answers a batch code.
          if (ops.length === 1) throw new PlatformError('record_too_large', `The record's write is over what one transaction holds (${LIMITS.transactionItems} writes, 4 MB, 400 KB an item); see the Data API reference.`);
          throw new PlatformError('batch_too_large', `The batch needs ${plan.writes.length} storage writes; one transaction holds ${LIMITS.transactionItems} writes and 4 MB (see the Data API reference).`);
        }
        if (!(error instanceof TransactionCanceledError)) throw error;
        const failed = error.failed.map((i) => plan.writes[i]).sort((a, b) => a.op - b.op)[0];
        // A file sent straight to the blob store a moment ago may not be recorded yet: settle it, then write again.
        const arrived = failed?.reason?.kind === 'blob' && 'check' in failed.write && (await settleArrivals(this.ctx.engine, this.org, this.ctx.database, failed.write.check.sk));
        const retry = !failed || arrived || failed.reason?.kind === 'schema' || (failed.reason?.kind === 'version' && ops[failed.op].version === undefined);
        if (retry && attempt < MAX_ATTEMPTS) {
          await pause(contentionPauseMs(attempt, MAX_PAUSE_MS));
          continue;
        }
        throw await this.explain(ops, failed);
      }
      await Promise.all(plan.oldBodies.map((k) => this.ctx.engine.blobs.delete(k).catch(() => undefined)));
      if (outbox) await settleChangeOutbox(this.ctx.engine, outbox.entry(changes), { written: outboxInTransaction });
      await Promise.all(plan.results.map((r, i) => dataHooks.fire(hookEvent(this.ctx.database, ops[i], r), this.ctx)));
      return plan.results;
    }
  }

  /**
   * The platform events of the planned results, in op order. Idempotency keys name the record's life
   * (its incarnation) and version, so a re-publish of the same change is one event and a record created
   * again after a delete is a new one.
   */
  private changes(ops: WriteOp[], results: WriteResult[], lives: string[]): Change[] {
    const db = this.ctx.database;
    return results.map((r, i): Change => {
      const op = ops[i];
      if ('deleted' in r) {
        return { type: 'record.deleted', idempotency_key: changeKey(['del', db, op.collection, r.id, lives[i]]), data: JSON.stringify({ database: db, collection: op.collection, id: r.id }) };
      }
      return { type: HOOK_TYPE[op.op], idempotency_key: changeKey(['rec', db, op.collection, r.id, lives[i], `v${r.version}`]), data: recordChangeData(db, op.collection, r) };
    });
  }

  private async explain(ops: WriteOp[], failed: Planned | undefined): Promise<PlatformError> {
    if (!failed?.reason) return new PlatformError('version_conflict', 'The data changed while the write ran; retry.');
    const op = ops[failed.op];
    switch (failed.reason.kind) {
      case 'exists':
        return new PlatformError('already_exists', `Record "${op.id}" already exists.`, 'id');
      case 'unique':
        return new PlatformError('unique_violation', `Another record already has this ${failed.reason.field}.`, failed.reason.field);
      case 'relation':
        return new PlatformError('invalid_value', `${failed.reason.field}: no such record in the target collection.`, failed.reason.field);
      case 'blob':
        return new PlatformError('invalid_value', `${failed.reason.field}: no blob with this SHA-256 in the database.`, failed.reason.field);
      case 'version': {
        const exists = await this.ctx.engine.kv.get(recordKey(this.org, this.ctx.database, op.collection, op.id!));
        return exists ? versionConflict(op.id!) : recordNotFound(op.id!);
      }
      case 'schema':
        return new PlatformError('service_unavailable', 'The collection kept changing; retry.');
    }
  }

  private async collection(name: string, op: WriteOp['op'], cache: Map<string, Collection>, drafts: Map<string, KvItem>, fresh: boolean): Promise<Collection> {
    let c = cache.get(name);
    if (c) return c;
    c = await this.collections.get(this.org, this.ctx.database, name, { fresh });
    if (!c) {
      // Writing to a missing collection creates a free one when the credential may change schemas,
      // in the write's own transaction: a write that fails leaves no collection behind.
      if (op !== 'create' || !isServerCredential(this.ctx.principal)) throw collectionNotFound(name);
      const draft = this.collections.freeDraft(this.org, this.ctx.database, name);
      drafts.set(name, draft.item);
      c = draft.collection;
    }
    cache.set(name, c);
    return c;
  }

  /** `reserve`: writes the transaction keeps free beside the ops' own (the platform event outbox). */
  private async plan(ops: WriteOp[], fresh: boolean, reserve = 0) {
    const cache = new Map<string, Collection>();
    const lives: string[] = [];
    const drafts = new Map<string, KvItem>();
    const writes: Planned[] = [];
    const results: WriteResult[] = [];
    const newBodies: string[] = [];
    const oldBodies: string[] = [];
    const guards = new UniqueGuards();
    try {
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
        try {
          const c = await this.collection(op.collection, op.op, cache, drafts, fresh);
          const add = (write: KvWrite, reason?: Reason) => writes.push({ write, op: i, reason });
          const from = writes.length;
          if (op.op === 'create') results.push(await this.planCreate(op, c, add, newBodies, lives));
          else if (op.op === 'update') results.push(await this.planUpdate(op, c, add, newBodies, oldBodies, lives));
          else results.push(await this.planDelete(op, c, add, oldBodies, lives));
          // Unique values as the earlier ops left them (in-order semantics).
          try {
            guards.absorb(writes, from, i, results[i].id);
          } catch (error) {
            // A create of an id in use fails on that first, as a single create does (its record's
            // condition comes before its unique values), whichever op showed its unique collision (a
            // later op's release shows an earlier create's claim met a held value): found by the model test.
            const culprit = error instanceof PlanError ? error.op : -1;
            const created = culprit >= 0 && ops[culprit].op === 'create' ? ops[culprit] : undefined;
            if (created && (await this.ctx.engine.kv.get(recordKey(this.org, this.ctx.database, (await this.collection(created.collection, created.op, cache, drafts, fresh)).name, results[culprit].id)))) {
              throw new PlanError(culprit, new PlatformError('already_exists', `Record "${results[culprit].id}" already exists.`, 'id'));
            }
            throw error;
          }
        } catch (error) {
          throw error instanceof PlanError ? error : new PlanError(i, error);
        }
      }
      const planned = dedupe(writes);
      if (drafts.size && planned.length + drafts.size + reserve > LIMITS.transactionItems) {
        // No room for the new collections beside the batch's writes (100 plain creates): create them
        // first, as their own writes, so the spec's 100 ops still fit; they stay if the batch fails.
        for (const name of drafts.keys()) await this.collections.ensureFree(this.org, this.ctx.database, name);
        drafts.clear();
      }
      // The schema checks guard against a collection changing while the batch is planned. They are
      // left out when they alone would push a batch past the transaction's 100 writes (100 plain
      // creates): the spec promises 100 ops, and dropped fields stay hidden without them anyway.
      if (planned.length + cache.size + reserve <= LIMITS.transactionItems) {
        for (const [name, c] of cache) {
          if (drafts.has(name)) continue;
          const first = writes.find((w) => ('put' in w.write || 'update' in w.write ? recordCollection(w.write) === name : false));
          planned.push({ write: { check: collectionKey(this.org, this.ctx.database, name), condition: { ifEquals: { schema_version: c.schema_version } } }, op: first?.op ?? 0, reason: { kind: 'schema' } });
        }
      }
      for (const [name, item] of drafts) {
        const first = writes.find((w) => ('put' in w.write || 'update' in w.write ? recordCollection(w.write) === name : false));
        // Absent when planned; if another writer created it meanwhile, the retry reads it (reason schema).
        planned.push({ write: { put: item, condition: { ifAbsent: true } }, op: first?.op ?? 0, reason: { kind: 'schema' } });
      }
      return { writes: planned, results, newBodies, oldBodies, lives };
    } catch (error) {
      await Promise.all(newBodies.map((k) => this.ctx.engine.blobs.delete(k).catch(() => undefined)));
      if (!(error instanceof PlanError)) throw error;
      // An op found failing while planning is the answer only if no earlier op would fail in the transaction.
      throw (await this.earlierFailure(ops, writes, error.op)) ?? error.error;
    }
  }

  /**
   * The failure of the first op before `before` whose planned conditions do not hold now. Conditions
   * that only the transaction checks (unique guards, existing ids, relations) would otherwise be
   * hidden behind a later op's error, and section 3 makes the first failure the answer.
   */
  private async earlierFailure(ops: WriteOp[], writes: Planned[], before: number): Promise<PlatformError | undefined> {
    const written = new Set(writes.filter((w) => !('check' in w.write)).map((w) => writeId(w.write)));
    const candidates = writes
      .filter((w) => w.op < before && w.write.condition && w.reason?.kind !== 'schema' && !('check' in w.write && written.has(writeId(w.write))))
      .sort((a, b) => a.op - b.op);
    for (const w of candidates) {
      const item = await this.ctx.engine.kv.get(writeKey(w.write));
      if (conditionHolds(w.write.condition!, item)) continue;
      // Another writer moved the record of an op that names no version: not that op's failure. Plan
      // again on the new version, as a failed transaction is retried (the later op's error was found
      // on a state that is gone).
      if (w.reason?.kind === 'version' && ops[w.op].version === undefined) throw new Replan(await this.explain(ops, w));
      return this.explain(ops, w);
    }
    return undefined;
  }

  /**
   * docs/data/rules.md: before any record is looked at, a credential the rule can never let through
   * (`null` or `""` for a browser credential, `users` for a publishable key) is refused with 403, so
   * the answer tells nothing about whether the record exists.
   */
  private checkPrincipal(c: Collection, action: 'create' | 'update' | 'delete') {
    if (ruleAllowsPrincipal(c.compiled[action], this.ctx.principal) === 'no') {
      throw new PlatformError('forbidden', `The collection's ${action} rule does not allow this credential.`);
    }
  }

  private checkRule(c: Collection, action: 'create' | 'update' | 'delete', record: RecordView | null, request: Record<string, unknown> | null) {
    const p = this.ctx.principal;
    if (isServerCredential(p)) return;
    if (!evaluateRule(c.compiled[action], { principal: p, record, request })) {
      throw new PlatformError('forbidden', `The collection's ${action} rule does not allow this.`);
    }
  }

  private async planCreate(op: WriteOp, c: Collection, add: (w: KvWrite, r?: Reason) => void, newBodies: string[], lives: string[]): Promise<RecordView> {
    this.checkPrincipal(c, 'create');
    const id = op.id ?? newId('rec', this.now());
    if (!RECORD_ID_PATTERN.test(id)) throw new PlatformError('invalid_value', 'id: 1 to 64 letters, digits, "_" or "-".', 'id');
    const values = this.values(c, op.data ?? {}, {});
    this.checkRule(c, 'create', null, values);
    const at = new Date(this.now()).toISOString();
    const meta: RecordMeta = { id, version: 1, created_at: at, updated_at: at, sv: c.schema_version, inc: pooledRandomBytes(6).toString('base64url') };
    lives.push(meta.inc!);
    const record = { id, version: 1, created_at: at, updated_at: at, ...values };
    const { item, bodyKey } = await this.item(c, meta, values, record);
    if (bodyKey) newBodies.push(bodyKey);
    add({ put: item, condition: { ifAbsent: true } }, { kind: 'exists' });
    this.planFieldEntries(c, id, {}, values, add, copyOf(item));
    return record;
  }

  private async current(c: Collection, op: WriteOp): Promise<LoadedRecord> {
    if (!op.id || !RECORD_ID_PATTERN.test(op.id)) throw recordNotFound(String(op.id ?? ''));
    const item = await this.ctx.engine.kv.get(recordKey(this.org, this.ctx.database, c.name, op.id));
    if (!item) throw recordNotFound(op.id);
    const loaded = await loadRecord(this.ctx.engine, item);
    if (!loaded) throw recordNotFound(op.id);
    if (op.version !== undefined && op.version !== loaded.version) throw versionConflict(op.id);
    return loaded;
  }

  private async planUpdate(op: WriteOp, c: Collection, add: (w: KvWrite, r?: Reason) => void, newBodies: string[], oldBodies: string[], lives: string[]): Promise<RecordView> {
    this.checkPrincipal(c, 'update');
    const before = await this.current(c, op);
    lives.push(lifeOf(before));
    const old = visibleValues(c, before.sv, before.values);
    const values = this.values(c, op.data ?? {}, old);
    this.checkRule(c, 'update', view(c, before), op.data ?? {});
    const meta: RecordMeta = { id: before.id, version: before.version + 1, created_at: before.created_at, updated_at: new Date(this.now()).toISOString(), sv: c.schema_version, inc: before.inc };
    const record = { id: meta.id, version: meta.version, created_at: meta.created_at, updated_at: meta.updated_at, ...values };
    const { item, bodyKey } = await this.item(c, meta, values, record);
    if (bodyKey) newBodies.push(bodyKey);
    if (before.body) oldBodies.push(before.body);
    add({ put: item, condition: sameLife(before) }, { kind: 'version' });
    this.planFieldEntries(c, before.id, old, values, add, copyOf(item));
    return record;
  }

  private async planDelete(op: WriteOp, c: Collection, add: (w: KvWrite, r?: Reason) => void, oldBodies: string[], lives: string[]): Promise<{ id: string; deleted: true }> {
    this.checkPrincipal(c, 'delete');
    const before = await this.current(c, op);
    lives.push(lifeOf(before));
    this.checkRule(c, 'delete', view(c, before), null);
    if (before.body) oldBodies.push(before.body);
    add({ delete: recordKey(this.org, this.ctx.database, c.name, before.id), condition: sameLife(before) }, { kind: 'version' });
    this.planFieldEntries(c, before.id, visibleValues(c, before.sv, before.values), {}, add);
    return { id: before.id, deleted: true };
  }

  /** Checks the request's fields against the schema and merges them over `base` (null unsets). */
  private values(c: Collection, data: Record<string, unknown>, base: Record<string, unknown>): Record<string, unknown> {
    if (!data || typeof data !== 'object' || Array.isArray(data)) throw new PlatformError('invalid_body', 'data must be an object.', 'data');
    const declared = new Map(c.fields.map((f) => [f.name, f]));
    const out = { ...base };
    for (const [name, value] of Object.entries(data)) {
      if (RESERVED_FIELDS.includes(name) || name.startsWith('_')) throw new PlatformError('reserved_field', `"${name}" is reserved.`, name);
      const field = declared.get(name);
      if (!field && c.mode === 'schema') throw new PlatformError('unknown_field', `The collection has no field "${name}".`, name);
      if (value === null) delete out[name];
      else if (field) out[name] = normalizeValue(field, value);
      else {
        // A free field takes any JSON value, as a json field does: finite numbers only.
        checkFiniteNumbers(name, value);
        out[name] = value;
      }
    }
    for (const f of c.fields) {
      if (f.required && (ownValue(out, f.name) ?? null) === null) throw new PlatformError('missing_field', `"${f.name}" is required.`, f.name);
    }
    return out;
  }

  private async item(c: Collection, meta: RecordMeta, values: Record<string, unknown>, record: RecordView) {
    const serialized = JSON.stringify(values);
    if (Buffer.byteLength(JSON.stringify(record)) > MAX_RECORD_BYTES) {
      throw new PlatformError('record_too_large', `A record is at most ${MAX_RECORD_BYTES} bytes of JSON.`);
    }
    return recordItem(this.ctx.engine, recordKey(this.org, this.ctx.database, c.name, meta.id), { org: this.org, database: this.ctx.database, collection: c.name }, meta, values, serialized);
  }

  /** Guards, index entries and reference checks for the fields whose value changes from `before` to `after`. */
  /**
   * `copy` is the record item as written: index entries carry it, so a list read through an index
   * needs no read per record — and so every write of a record rewrites its index entries.
   */
  private planFieldEntries(c: Collection, id: string, before: Record<string, unknown>, after: Record<string, unknown>, add: (w: KvWrite, r?: Reason) => void, copy?: Record<string, KvValue>) {
    const { org } = this;
    const db = this.ctx.database;
    for (const f of c.fields) {
      const was = ownValue(before, f.name);
      const now = ownValue(after, f.name);
      const changed = JSON.stringify(was) !== JSON.stringify(now);
      // Guards and index entries follow the encoded keys, not the values' JSON: two values with one
      // key (0 and -0) are one entry, and deleting the old key while putting the same one would lose it.
      // Blob fields keep index entries too, never offered to filters or sorts: the reverse lookup from
      // a file to the records referencing it, which file rules read (blob-rules.ts).
      const indexed = f.indexed || referencesBlob(f);
      const keyed = f.unique || indexed;
      const wasKey = keyed && was !== undefined ? keyOf(f, was) : undefined;
      const nowKey = keyed && now !== undefined ? keyOf(f, now) : undefined;
      const keyChanged = wasKey !== nowKey;
      if (f.unique && keyChanged) {
        if (wasKey !== undefined) add({ delete: { pk: uniquePartition(org, db, c.name, f.name, f.generation), sk: guardSortKey(wasKey) } });
        if (nowKey !== undefined) add({ put: { pk: uniquePartition(org, db, c.name, f.name, f.generation), sk: guardSortKey(nowKey), record_id: id }, condition: { ifAbsent: true } }, { kind: 'unique', field: f.name });
      }
      if (indexed && (keyChanged || (copy && nowKey !== undefined))) {
        if (wasKey !== undefined && keyChanged) add({ delete: { pk: indexPartition(org, db, c.name, f.name, f.generation), sk: wasKey + SEP + id } });
        if (nowKey !== undefined) add({ put: { ...copy, pk: indexPartition(org, db, c.name, f.name, f.generation), sk: nowKey + SEP + id, id } });
      }
      const references = now !== undefined && changed ? fieldType(f.type).references : undefined;
      if (references === 'record') {
        add({ check: recordKey(org, db, f.target!, String(now)), condition: { ifExists: true } }, { kind: 'relation', field: f.name });
      }
      if (references === 'blob') {
        add({ check: blobMetaKey(org, db, String(now)), condition: { ifExists: true } }, { kind: 'blob', field: f.name });
      }
    }
  }
}

/** The record item without its key, to copy into index entries. */
function copyOf(item: KvItem): Record<string, KvValue> {
  // Not the record's time-index keys: an entry in those indexes would be listed as a second record.
  const { pk: _pk, sk: _sk, gsi1pk: _g1, gsi1sk: _g2, gsi2pk: _g3, gsi2sk: _g4, ...rest } = item;
  return rest as Record<string, KvValue>;
}

/**
 * A unique guard's sort key: the encoded value, except that the empty string (a valid text value)
 * becomes SEP, which no encoded value contains; DynamoDB refuses an empty sort key.
 */
const guardSortKey = (encoded: string) => (encoded === '' ? SEP : encoded);

function keyOf(f: StoredField, value: unknown): string {
  if (referencesBlob(f)) return blobEntryKey(value);
  const encoded = encodeKeyValue(f.type, value);
  checkKeyValueSize(f, encoded);
  return encoded;
}

function recordCollection(w: KvWrite): string | undefined {
  const pk = 'put' in w ? w.put.pk : 'update' in w ? w.update.pk : undefined;
  return pk?.startsWith('rec#') ? pk.split('#')[3] : undefined;
}

/**
 * The condition of an update or delete: the record is still the version that was read, of the same
 * life. A record deleted and created again is back at version 1; without the incarnation a write planned
 * on its old life would land on the new one (records from before incarnations: their creation time).
 */
function sameLife(before: LoadedRecord): KvCondition {
  return { ifEquals: before.inc === undefined ? { version: before.version, created_at: before.created_at } : { version: before.version, inc: before.inc } };
}

/** A record's life for event keys: its incarnation (records from before incarnations: their creation time). */
const lifeOf = (r: LoadedRecord) => r.inc ?? r.created_at;

/** Planning met another writer's progress on a record an unversioned op names; `error` is the answer once the attempts run out. */
class Replan extends Error {
  override name = 'Replan';
  constructor(readonly error: PlatformError) {
    super('plan again');
  }
}

/** An error met while planning op `op` (its index in the batch). */
class PlanError extends Error {
  override name = 'PlanError';
  constructor(readonly op: number, readonly error: unknown) {
    super(`op ${op} failed while planning`);
  }
}

const writeId = (w: KvWrite) => {
  const k = writeKey(w);
  return `${k.pk}\u0000${k.sk}`;
};

/** Whether a write's condition holds for the item as stored now (the store's own semantics). */
function conditionHolds(condition: KvCondition, item: KvItem | undefined): boolean {
  if ('ifAbsent' in condition) return item === undefined;
  if ('ifExists' in condition) return item !== undefined;
  if ('ifBelow' in condition) return Object.entries(condition.ifBelow).every(([k, cap]) => (item?.[k] === undefined ? 0 < cap : typeof item[k] === 'number' && item[k] < cap));
  return item !== undefined && Object.entries(condition.ifEquals).every(([k, v]) => deepEqual(item[k], v));
}

const touchedTwice = (first: number, second: number) =>
  new PlatformError('invalid_body', `Operations ${first} and ${second} of the batch touch the same record; one operation per record per batch.`);

/**
 * Two ops naming one record are refused before anything is read, as the reference says (400
 * invalid_body): planned one by one, `[create c1, update c1]` would read c1 before the batch made it
 * and answer 404 instead.
 */
function refuseSameRecordTwice(ops: WriteOp[]): void {
  const seen = new Map<string, number>();
  ops.forEach((op, i) => {
    if (op.id === undefined) return;
    const key = `${op.collection}\u0000${op.id}`;
    const prior = seen.get(key);
    if (prior !== undefined) {
      throw touchedTwice(prior, i);
    }
    seen.set(key, i);
  });
}

/** A unique guard's partition (keys.ts: `uniq#<org>#<database>#<collection>#<field>@<gen>`). */
const isGuard = (pk: string) => pk.startsWith('uniq#');

/**
 * In-order unique checks for a batch (docs/data/reference.md "Batch"): each op sees
 * the unique values as the earlier ops left them. A record is in at most one op, so a guard item (one
 * value of one unique field) has at most one release in a batch, by the record that holds it in the
 * store (read while planning), and any number of claims. In op order:
 * - a claim of a value no earlier op released is a put if absent: the store decides;
 * - a claim of a value an earlier op released takes the guard over: ONE put naming the new holder, on
 *   condition that the releasing record still holds it (a transaction touches an item once, as
 *   DynamoDB requires, so never a delete and a put);
 * - a claim of a value an earlier op claimed or took over collides: unique_violation on the later op;
 * - a release of a value an earlier op claimed shows that the claim met the releasing record, which
 *   held the value until then: unique_violation on the claim (so a swap fails on its first op).
 */
class UniqueGuards {
  private readonly guards = new Map<string, { planned: Planned; held: boolean; holderOp: number; releasedBy?: string }>();

  /** Resolves the guard writes that op `op`, on record `id`, added to `writes` from index `from` on. */
  absorb(writes: Planned[], from: number, op: number, id: string): void {
    for (let k = from; k < writes.length; k++) {
      const w = writes[k];
      const release = 'delete' in w.write && isGuard(w.write.delete.pk);
      const claim = 'put' in w.write && isGuard(w.write.put.pk) && w.reason?.kind === 'unique';
      if (!release && !claim) continue;
      const key = writeId(w.write);
      const g = this.guards.get(key);
      if (!g) {
        this.guards.set(key, release ? { planned: w, held: false, holderOp: op, releasedBy: id } : { planned: w, held: true, holderOp: op });
      } else if (release) {
        // Two releases of one value would mean two records held it: left to dedupe() to refuse.
        if (g.releasedBy !== undefined) continue;
        const field = guardField(g.planned);
        throw new PlanError(g.holderOp, new PlatformError('unique_violation', `Another record already has this ${field}.`, field));
      } else if (g.held) {
        const field = guardField(w);
        throw new PlanError(op, new PlatformError('unique_violation', `Operation ${op} of the batch gives ${field} a value operation ${g.holderOp} already gave it.`, field));
      } else {
        const put = (w.write as { put: KvItem }).put;
        g.planned.write = { put, condition: { ifEquals: { record_id: g.releasedBy! } } };
        g.planned.op = op;
        g.planned.reason = w.reason;
        g.held = true;
        g.holderOp = op;
        writes.splice(k--, 1);
      }
    }
  }
}

const guardField = (w: Planned) => (w.reason?.kind === 'unique' ? w.reason.field : 'value');

/**
 * One transaction may touch an item once. A check on an item the batch also writes is dropped (the
 * write's own condition covers it, e.g. a relation to a record created earlier in the batch) unless
 * the batch deletes that item: a relation to a record the batch deletes points at nothing. Two writes
 * on one item are refused with the later op as the culprit.
 */
function dedupe(writes: Planned[]): Planned[] {
  const byKey = new Map<string, Planned>();
  for (const w of writes.filter((x) => !('check' in x.write))) {
    const key = writeId(w.write);
    const prior = byKey.get(key);
    if (prior) {
      if (w.reason?.kind === 'unique') throw new PlanError(w.op, new PlatformError('unique_violation', `Two operations of the batch give ${w.reason.field} the same value.`, w.reason.field));
      throw new PlanError(w.op, touchedTwice(prior.op, w.op));
    }
    byKey.set(key, w);
  }
  const checks = new Map<string, Planned>();
  for (const w of writes.filter((x) => 'check' in x.write)) {
    const key = writeId(w.write);
    const target = byKey.get(key);
    if (target && 'delete' in target.write && w.reason?.kind === 'relation') {
      const field = w.reason.field;
      throw new PlanError(Math.max(w.op, target.op), new PlatformError('invalid_value', `${field}: the batch deletes the record it points at.`, field));
    }
    if (!target && !checks.has(key)) checks.set(key, w);
  }
  return [...byKey.values(), ...checks.values()];
}
