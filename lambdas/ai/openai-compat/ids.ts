/**
 * The ids of the OpenAI compatibility routes (docs/ai/openai-compatibility.md, "Ids"). A vector store
 * is a `cloud` collection under another prefix: `vs_<hex>` and `col_<hex>` name the same one, and
 * both are taken wherever a vector store id is; answers say `vs_`. A file is an upload: its id is
 * the upload's. Batches, responses and their output items get ids of their own, sortable by time.
 */
import { sortableId } from '../../knowledge/collection-records.js';
import { PlatformError } from '../../shared/errors.js';

const VECTOR_STORE_ID = /^(?:vs|col)_([0-9a-f]{32})$/;

/** The vector store id answered for a collection. */
export const vectorStoreId = (collectionId: string): string => `vs_${collectionId.slice('col_'.length)}`;

/** The collection a vector store id names; anything else is the same 404 as an unknown store. */
export function collectionIdOf(vectorStoreIdOrCollectionId: string): string {
  const match = VECTOR_STORE_ID.exec(vectorStoreIdOrCollectionId);
  if (!match) throw new PlatformError('collection_not_found', `No vector store ${JSON.stringify(vectorStoreIdOrCollectionId.slice(0, 140))} in this workspace.`);
  return `col_${match[1]}`;
}

/** `vsfb_`, `resp_`, `msg_`, `fs_` and `file-` ids: the creation time and random bits, as collection ids. */
export type CompatIdPrefix = 'vsfb' | 'resp' | 'msg' | 'fs' | 'file';
export function newCompatId(prefix: CompatIdPrefix, nowMs: number): string {
  const hex = sortableId('col', nowMs).slice('col_'.length);
  return prefix === 'file' ? `file-${hex}` : `${prefix}_${hex}`;
}

/** Unix seconds from an ISO time, as OpenAI's objects carry times. */
export const unixSeconds = (iso: string): number => Math.floor(Date.parse(iso) / 1000);
