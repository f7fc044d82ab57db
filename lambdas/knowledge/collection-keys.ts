/**
 * Where knowledge collections live (docs/ai/collections.md, "Storage"). Every key starts with the
 * organization taken from the credential and the caller's workspace, except the sweep's own partition,
 * which names them inside.
 *
 *   kcol#<org>#<workspace> / <collection id>       a live collection: mode, name, its counters; the
 *                                                  store's `expires_at` is the collection's, so it
 *                                                  vanishes from every read the second it expires
 *   kcolend#<org>#<workspace> / <collection id>    that it existed and when it ends: answers 410 for
 *                                                  EXPIRED_ANSWER_SECONDS past its end, then lapses
 *   kcolsweep / <ends, 12 digits>#<org>#<ws>#<id>  work for the sweep once that second has passed:
 *                                                  the collection's data (items, chunks, vectors)
 */
import { randomBytes } from 'node:crypto';

export const collectionKey = (org: string, workspace: string, id: string) => ({ pk: `kcol#${org}#${workspace}`, sk: id });
export const collectionsPk = (org: string, workspace: string) => `kcol#${org}#${workspace}`;
export const collectionEndKey = (org: string, workspace: string, id: string) => ({ pk: `kcolend#${org}#${workspace}`, sk: id });

export const COLLECTION_SWEEP_PARTITION = 'kcolsweep';
const second = (epochSeconds: number) => String(epochSeconds).padStart(12, '0');
export const collectionSweepKey = (endsAt: number, org: string, workspace: string, id: string) => ({
  pk: COLLECTION_SWEEP_PARTITION,
  sk: `${second(endsAt)}#${org}#${workspace}#${id}`,
});
/** Every sweep entry due before `epochSeconds`. */
export const sweepDueBefore = (epochSeconds: number) => ({ lt: second(epochSeconds) });

/**
 * A collection's items (items.ts, processing.ts), under the collection's own partition prefix:
 *
 *   kitem#<org>#<ws>#<col> / <item id>                     an item: its file, state, package, counts
 *   kvec#<org>#<ws>#<col>#<item>#<package> / <chunk id>    local_vectors: a chunk whose vector is stored
 *   kproc / <due>#<org>#<ws>#<col>#<item>#<random>          an item's processing lease: due when a
 *                                                           processor that died would have renewed it
 * Bytes: a package's chunks as JSON Lines at `knowledge/<org>/<ws>/<col>/<item>/<package>.jsonl`, and
 * an inline text item's own bytes at `knowledge/<org>/<ws>/<col>/<item>/source`.
 */
export const itemsPk = (org: string, workspace: string, collection: string) => `kitem#${org}#${workspace}#${collection}`;
export const itemKey = (org: string, workspace: string, collection: string, item: string) => ({ pk: itemsPk(org, workspace, collection), sk: item });
export const vectorMarksPk = (org: string, workspace: string, collection: string, item: string, pkg: string) => `kvec#${org}#${workspace}#${collection}#${item}#${pkg}`;
export const packageBlobKey = (org: string, workspace: string, collection: string, item: string, pkg: string) => `knowledge/${org}/${workspace}/${collection}/${item}/${pkg}.jsonl`;
/** An inline text item's bytes, beside its packages. */
export const sourceBlobKey = (org: string, workspace: string, collection: string, item: string) => `knowledge/${org}/${workspace}/${collection}/${item}/source`;

/**
 * An organization's items waiting or in processing, over all its workspaces and collections:
 *
 *   kqueued#<org> / items      `n`: its items that took a slot when queued (`admitted`) and hold it
 *                              until done, failed or removed (collection-records.ts, admissionWrite)
 */
export const queuedItemsKey = (org: string) => ({ pk: `kqueued#${org}`, sk: 'items' });

export const PROCESSING_PARTITION = 'kproc';
/** Unique per write (a random tail), so a claim that replaces the entry in the same second never names it twice. */
export const processingKey = (dueAt: number, org: string, workspace: string, collection: string, item: string) => ({
  pk: PROCESSING_PARTITION,
  sk: `${second(dueAt)}#${org}#${workspace}#${collection}#${item}#${randomBytes(4).toString('hex')}`,
});

/**
 * The index sweep's registry (index-sweep.ts): the workspace vector indexes that hold cloud
 * collections' chunks, by organization, so each organization takes its turn:
 *
 *   kidxorg / <org>                         an organization with such indexes; `after`: its index
 *                                           served last (its own turns go round its indexes)
 *   kidx#<org> / <workspace>#<index>        an index: where its pass is (`cursor`), when the last ended
 *   kidxturn / turn                         `after`: the organization served last
 */
export const INDEX_SWEEP_ORGS = 'kidxorg';
export const indexSweepOrgKey = (org: string) => ({ pk: INDEX_SWEEP_ORGS, sk: org });
export const indexSweepPk = (org: string) => `kidx#${org}`;
export const indexSweepKey = (org: string, workspace: string, index: string) => ({ pk: indexSweepPk(org), sk: `${workspace}#${index}` });
export const INDEX_SWEEP_TURN = { pk: 'kidxturn', sk: 'turn' } as const;
