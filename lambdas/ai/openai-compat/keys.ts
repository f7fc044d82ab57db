/**
 * What the OpenAI compatibility routes keep besides the uploads, collections and items they map onto
 * (docs/ai/openai-compatibility.md, "Storage"). Every key starts with the credential's organization
 * and workspace. The collection and item records stay the truth for status and counts: these side
 * records never repeat a count the collection keeps.
 *
 *   aifile#<org>#<ws> / <created, 12 digits>#<file id>   a file's listing entry {purpose}; expires with the upload
 *   aifiledup#<org>#<ws>#<credential> / <sha256>         a retried files.create without a key finds its file (10 min)
 *   oaivs#<org>#<ws> / <collection id>                  a vector store's own fields {description, metadata, expires_after_days, usage_bytes, n_cancelled, last_active_at}
 *   oaivsf#<org>#<ws>#<collection id> / <item id>       a vector store file {file_id, attributes, chunking, bytes, batch_id?, cancelled?, created_at}
 *   oaivsfid#<org>#<ws>#<collection id> / <file id>     which item a file became in the store {item_id}
 *   oaivsfb#<org>#<ws>#<collection id> / <batch id>     a file batch {file_ids, waiting, chunking?, attributes?, cancelled, created_at}
 * Stored responses are idempotency records of scope `ai.resp` (lambdas/shared/idempotency.ts), 24 h.
 */
// Written by every upload's start (lambdas/knowledge/uploads.ts), so kept with the uploads' keys.
export { fileListingKey, fileListingPartition } from '../../knowledge/upload-keys.js';
export const fileRetryKey = (org: string, ws: string, credential: string, sha256: string) => ({ pk: `aifiledup#${org}#${ws}#${credential}`, sk: sha256 });
export const vectorStoreKey = (org: string, ws: string, collectionId: string) => ({ pk: `oaivs#${org}#${ws}`, sk: collectionId });
export const vectorStoreFilesPartition = (org: string, ws: string, collectionId: string) => `oaivsf#${org}#${ws}#${collectionId}`;
export const vectorStoreFileKey = (org: string, ws: string, collectionId: string, itemId: string) => ({ pk: vectorStoreFilesPartition(org, ws, collectionId), sk: itemId });
export const vectorStoreFileByFileKey = (org: string, ws: string, collectionId: string, fileId: string) => ({ pk: `oaivsfid#${org}#${ws}#${collectionId}`, sk: fileId });
export const fileBatchKey = (org: string, ws: string, collectionId: string, batchId: string) => ({ pk: `oaivsfb#${org}#${ws}#${collectionId}`, sk: batchId });

/** A vector store file's attributes: up to 16, keys up to 64 characters, strings up to 512, numbers, booleans. */
export type Attributes = Record<string, string | number | boolean>;

/** The record `oaivsf` holds for a vector store file (search reads `attributes` and `file_id` from it). */
export interface VectorStoreFileRecord {
  file_id: string;
  /** JSON text of Attributes (kept as text so a key named like a record attribute stays data). */
  attributes: string;
  chunking?: { max_chunk_size_tokens: number; chunk_overlap_tokens: number };
  bytes: number;
  batch_id?: string;
  cancelled?: true;
  created_at: string;
}
