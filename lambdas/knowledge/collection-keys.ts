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
