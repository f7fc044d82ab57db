/**
 * The index sweep (docs/decisions/knowledge-index-sweep.md): removes the entries of a workspace vector
 * index that no item serves any more. A removal finds a package's entries through the chunks its blob
 * names, and a processor that loses its item removes what it put; but a processor killed after it put
 * entries for an item deleted meanwhile (the delete ran before the blob or the entries existed), or a
 * delete killed between its record write and its vector deletes, leaves entries nothing names. Queries
 * never show them (chunk-index.ts counts a hit only when its item serves its package); this takes them
 * out of the index, with the package blob beside them.
 *
 * Which indexes: every `cloud` collection registers its workspace's index when it is created
 * (registerIndexWrites, in the collection's own write). A pass pages through the index's entries
 * (VectorIndex.list) and keeps an entry of a collection's scope (`col.<id>`) only when its item exists
 * and serves its package or is making it (`pending_package`); the vector database's own passages are
 * not looked at. A pass starts at most every COLLECTION_INDEX_SWEEP_S per index.
 *
 * Fairness and bounds: a run serves organizations in turn, one page of one of its indexes each (an
 * organization's turns go round its indexes), from where the last run stopped, until its page or time
 * budget is spent or a whole round found nothing due. Each index resumes at its cursor, so a large
 * index costs its organization's turns only.
 */
import type { Engine, KvItem, KvWrite, VectorListed } from '../engine/ports.js';
import { VECTOR_BATCH_MAX } from '../engine/ports.js';
import { log } from '../shared/log.js';
import { settings } from '../shared/settings.js';
import { readDatabase } from '../vector/databases.js';
import { collectionScope } from './chunk-index.js';
import { INDEX_SWEEP_ORGS, INDEX_SWEEP_TURN, indexSweepKey, indexSweepOrgKey, indexSweepPk, itemKey, packageBlobKey } from './collection-keys.js';

export const INDEX_SWEEP = {
  /** Entries read a page (one listing call, then one batch of item reads). */
  page: 500,
  /** Pages a run reads at most, over every organization. */
  pages: 40,
  /** No page starts after this long (real time). */
  budgetMs: 10_000,
  /** An organization's indexes looked at a turn for one that is due. */
  rowsPerTurn: 10,
} as const;

const SCOPE_PREFIX = collectionScope('');
/** `<item>.<package>.<chunk>` (chunk-index.ts entryKey), ids without dots. */
const ENTRY_KEY = /^(itm_[0-9a-f]+)\.(pkg_[0-9a-f]+)\.(chk_\d+)$/;

const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);

/**
 * The writes that register a workspace's index with the sweep, for a `cloud` collection's creation
 * (updates, so a second collection keeps the index's pass where it is).
 */
export function registerIndexWrites(engine: Engine, org: string, workspace: string, index: string): KvWrite[] {
  return [
    { update: indexSweepOrgKey(org), set: { registered_at: engine.clock.now() } },
    { update: indexSweepKey(org, workspace, index), set: { org, workspace, index } },
  ];
}

export interface IndexSweepResult {
  /** Pages of entries read. */
  pages: number;
  /** Entries removed. */
  removed: number;
}

/** One run: organizations in turn from where the last run stopped, a page each, within the budget. */
export async function sweepIndexes(engine: Engine, budget: { pages?: number; budgetMs?: number } = {}): Promise<IndexSweepResult> {
  const until = Date.now() + (budget.budgetMs ?? INDEX_SWEEP.budgetMs);
  const maxPages = budget.pages ?? INDEX_SWEEP.pages;
  const result: IndexSweepResult = { pages: 0, removed: 0 };
  const turn = await engine.kv.get(INDEX_SWEEP_TURN);
  const started = typeof turn?.after === 'string' ? turn.after : '';
  let after = started;
  /** The first organization of the current stretch of turns that found nothing due: back at it, the round was idle. */
  let idleFrom: string | undefined;
  /** Pages read when the walk last went back to the first organization: none since, and the round was idle. */
  let pagesAtWrap = -1;
  try {
    for (;;) {
      const page = await engine.kv.query({ pk: INDEX_SWEEP_ORGS, ...(after ? { sk: { gt: after } } : {}), limit: 25 });
      if (!page.items.length) {
        if (!after || result.pages === pagesAtWrap) return result;
        pagesAtWrap = result.pages;
        after = '';
        continue;
      }
      for (const org of page.items) {
        if (result.pages >= maxPages || Date.now() >= until) return result;
        if (org.sk === idleFrom) return result;
        const swept = await orgTurn(engine, org, result).catch((error) => {
          log.warn('index sweep turn failed; taken up next run', { org: String(org.sk), error: String(error) });
          return false;
        });
        if (swept) idleFrom = undefined;
        else idleFrom ??= String(org.sk);
        after = String(org.sk);
      }
    }
  } finally {
    if (after !== started) await engine.kv.put({ ...INDEX_SWEEP_TURN, after }).catch(() => undefined);
  }
}

/** An organization's turn: a page of its next index that is due. False when none was. */
async function orgTurn(engine: Engine, org: KvItem, result: IndexSweepResult): Promise<boolean> {
  const orgId = String(org.sk);
  const after = typeof org.after === 'string' ? org.after : '';
  let rows = (await engine.kv.query({ pk: indexSweepPk(orgId), ...(after ? { sk: { gt: after } } : {}), limit: INDEX_SWEEP.rowsPerTurn })).items;
  if (!rows.length && after) rows = (await engine.kv.query({ pk: indexSweepPk(orgId), limit: INDEX_SWEEP.rowsPerTurn })).items;
  if (!rows.length) {
    // Its indexes are all gone; one registered meanwhile moved registered_at, and keeps the entry.
    await engine.kv.delete(indexSweepOrgKey(orgId), { ifEquals: { registered_at: org.registered_at ?? null } }).catch(() => undefined);
    return false;
  }
  const now = nowSeconds(engine);
  // From the last pass's end, so a changed COLLECTION_INDEX_SWEEP_S holds at once.
  const due = rows.find((r) => typeof r.cursor === 'string' || Number(r.pass_ended_at ?? 0) + settings().collectionIndexSweepSeconds <= now);
  const served = due ?? rows[rows.length - 1];
  if (served.sk !== after) await engine.kv.update({ key: indexSweepOrgKey(orgId), set: { after: String(served.sk) }, condition: { ifExists: true } }).catch(() => undefined);
  if (!due) return false;
  await sweepPage(engine, due, result);
  return true;
}

/** One page of an index's pass: its orphans removed, the cursor saved (or the pass ended). */
async function sweepPage(engine: Engine, row: KvItem, result: IndexSweepResult): Promise<void> {
  const org = String(row.org);
  const workspace = String(row.workspace);
  const index = String(row.index);
  const key = { pk: row.pk, sk: row.sk };
  const database = await readDatabase(engine, workspace);
  if (!database || database.index !== index || database.organization_id !== org) {
    // The database was deleted (its index with every entry) or re-created (a new index, registered anew).
    await engine.kv.delete(key);
    return;
  }
  if (database.state !== 'active') return; // its removal job takes the whole index
  const cursor = typeof row.cursor === 'string' ? row.cursor : undefined;
  const page = await engine.vectors.list(index, { limit: INDEX_SWEEP.page, cursor });
  result.pages += 1;
  result.removed += await removeOrphans(engine, { org, workspace, index }, page.entries);
  const now = nowSeconds(engine);
  await engine.kv.update({
    key,
    set: page.cursor
      ? { cursor: page.cursor, ...(cursor ? {} : { pass_started_at: now }) }
      : { cursor: null, ...(cursor ? {} : { pass_started_at: now }), pass_ended_at: now },
  });
}

/** The listed entries of collections whose item is gone or neither serves nor makes their package, removed with that package's blob. */
async function removeOrphans(engine: Engine, where: { org: string; workspace: string; index: string }, entries: VectorListed[]): Promise<number> {
  const chunks = entries.flatMap((entry) => {
    const scope = entry.filterable.scope;
    const parts = ENTRY_KEY.exec(entry.key);
    if (typeof scope !== 'string' || !scope.startsWith(SCOPE_PREFIX) || !parts) return [];
    return [{ key: entry.key, collection: scope.slice(SCOPE_PREFIX.length), item: parts[1], pkg: parts[2] }];
  });
  const items = [...new Map(chunks.map((c) => [`${c.collection}/${c.item}`, c])).values()];
  const records = new Map<string, KvItem | undefined>();
  for (let i = 0; i < items.length; i += 100) {
    const batch = items.slice(i, i + 100);
    const found = await engine.kv.getMany(batch.map((c) => itemKey(where.org, where.workspace, c.collection, c.item)));
    batch.forEach((c, j) => records.set(`${c.collection}/${c.item}`, found[j]));
  }
  const orphans = chunks.filter((c) => {
    const record = records.get(`${c.collection}/${c.item}`);
    return !record || (record.package_id !== c.pkg && record.pending_package !== c.pkg);
  });
  if (!orphans.length) return 0;
  for (let i = 0; i < orphans.length; i += VECTOR_BATCH_MAX) await engine.vectors.delete(where.index, orphans.slice(i, i + VECTOR_BATCH_MAX).map((o) => o.key));
  // The package's blob, written before its entries, is no one's either.
  const packages = new Map(orphans.map((o) => [`${o.collection}/${o.item}/${o.pkg}`, o]));
  for (const o of packages.values()) await engine.blobs.delete(packageBlobKey(where.org, where.workspace, o.collection, o.item, o.pkg));
  log.info('orphan index entries removed', { index: where.index, org: where.org, workspace: where.workspace, entries: orphans.length, packages: packages.size });
  return orphans.length;
}
