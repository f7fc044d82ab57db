/**
 * What the vector routes' handlers share: the database the call works on, its stamped route, and the
 * answers of the documents routes, kept here so each handler stays a few lines.
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { nextPageCursor, openPage } from '../shared/cursors.js';
import { PlatformError } from '../shared/errors.js';
import type { VectorDatabase } from './types.js';
import { scopeTag, type ScopeName } from './keys.js';
import { deleteDocument, listDocuments } from './ledger.js';
import { MAX_ID_BYTES } from './passages.js';

const isScope = (v: unknown): v is ScopeName => v === 'shared' || v === 'local';

/** `?scope=shared|local` (required), as the documents routes take it. */
export function scopeParam(query: Record<string, string>, also: readonly string[] = []): ScopeName {
  for (const key of Object.keys(query)) {
    if (key !== 'scope' && !also.includes(key)) throw new PlatformError('unsupported_field', `Unknown query parameter "${key}".`, key);
  }
  if (!isScope(query.scope)) throw new PlatformError('invalid_field', 'scope is "shared" or "local".', 'scope');
  return query.scope;
}

export const MAX_DOCUMENTS_PAGE = 100;
const DEFAULT_DOCUMENTS_PAGE = 20;

/** `GET /v1/vector/documents`: a page of the scope's documents, with a sealed cursor bound to the database, scope and caller. */
export async function documentsPage(engine: Engine, principal: Principal, database: VectorDatabase, query: Record<string, string>) {
  const scope = scopeParam(query, ['limit', 'cursor']);
  const tag = scopeTag(scope, principal);
  const binding = `vector-documents\n${database.database_id}\n${tag}`;
  const { limit, position } = await openPage(engine.secret, query, binding, { max: MAX_DOCUMENTS_PAGE, fallback: DEFAULT_DOCUMENTS_PAGE });
  const page = await listDocuments(engine, database.database_id, tag, limit, position);
  return {
    data: page.data.map((d) => ({ document_id: d.document_id, generation: d.generation, content_sha256: d.content_sha256, passages: d.passages, updated_at: d.updated_at })),
    next_cursor: await nextPageCursor(engine.secret, page.cursor, binding),
  };
}

/** `DELETE /v1/vector/documents/{document_id}`: its passages go at once; its generation is remembered. */
export async function removeDocument(engine: Engine, principal: Principal, database: VectorDatabase, documentId: string, query: Record<string, string>) {
  const scope = scopeParam(query);
  if (Buffer.byteLength(documentId, 'utf8') < 1 || Buffer.byteLength(documentId, 'utf8') > MAX_ID_BYTES) throw new PlatformError('invalid_field', `document_id is 1 to ${MAX_ID_BYTES} bytes.`, 'document_id');
  const done = await deleteDocument(engine, database, scopeTag(scope, principal), documentId);
  if (!done) throw new PlatformError('document_not_found', `No document "${documentId}" in the ${scope} scope.`, 'document_id');
  return { document_id: documentId, generation: done.generation, deleted: done.deleted };
}
