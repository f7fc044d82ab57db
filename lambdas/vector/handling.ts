/**
 * What the vector routes' handlers share: the database the call works on, its stamped route, and the
 * answers of the documents routes, kept here so each handler stays a few lines.
 */
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { nextPageCursor, openPage, pageQuerySchema } from '../shared/cursors.js';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseQuery } from '../shared/validate.js';
import type { VectorDatabase } from './types.js';
import { scopeTag, type ScopeName } from './keys.js';
import { deleteDocument, listDocuments } from './ledger.js';
import { MAX_ID_BYTES } from './passages.js';

const scopeParamSchema = () => z.enum(['shared', 'local']).check(z.describe('`shared` or `local` (the calling key\'s own).'));

export const MAX_DOCUMENTS_PAGE = 100;
const DEFAULT_DOCUMENTS_PAGE = 20;

/** `GET /v1/vector/documents`'s query: an unknown parameter is `400 unsupported_field`, a bad value `400 invalid_field`. */
export const documentsQuerySchema = onFirstUse(() =>
  z.strictObject({ scope: scopeParamSchema(), ...pageQuerySchema({ max: MAX_DOCUMENTS_PAGE, fallback: DEFAULT_DOCUMENTS_PAGE }).shape }),
);
/** `DELETE /v1/vector/documents/{document_id}`'s query. */
export const documentDeleteQuerySchema = onFirstUse(() => z.strictObject({ scope: scopeParamSchema() }));
/** A cursor the schema refuses is one openPage would not open either: `invalid_cursor`, as openPage says. */
export const PAGE_QUERY_CODES = { unknownParameter: 'unsupported_field', invalid: 'invalid_field', fieldCodes: { cursor: 'invalid_cursor' } } as const;

/** A document of the listing: its current generation, passages and content hash. */
export const documentSummarySchema = onFirstUse(() =>
  z.strictObject({
    document_id: z.string(),
    generation: z.int(),
    content_sha256: z.string().check(z.describe('SHA-256 over the document\'s passages in ascending order of their ids\' UTF-8 bytes, each as `<SHA-256 hex of its id>\\n<SHA-256 hex of its text>\\n`: compare it to skip re-ingesting an unchanged document.')),
    passages: z.int(),
    updated_at: z.iso.datetime(),
  }),
);
export const documentsPageSchema = onFirstUse(() =>
  z.strictObject({ data: z.array(documentSummarySchema()), next_cursor: z.nullable(z.string()).check(z.describe('The next page\'s cursor; null at the end.')) }),
);
export const documentDeletedSchema = onFirstUse(() =>
  z.strictObject({
    document_id: z.string(),
    generation: z.int().check(z.describe('The generation it was deleted at: later ingests of it are taken only at a higher one.')),
    deleted: z.int().check(z.describe('Passages removed; 0 when it was already deleted.')),
  }),
);


/** `GET /v1/vector/documents`: a page of the scope's documents, with a sealed cursor bound to the database, scope and caller. */
export async function documentsPage(engine: Engine, principal: Principal, database: VectorDatabase, query: Record<string, string>) {
  const { scope } = parseQuery(documentsQuerySchema(), query, PAGE_QUERY_CODES);
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
  const { scope } = parseQuery(documentDeleteQuerySchema(), query, PAGE_QUERY_CODES);
  if (Buffer.byteLength(documentId, 'utf8') < 1 || Buffer.byteLength(documentId, 'utf8') > MAX_ID_BYTES) throw new PlatformError('invalid_field', `document_id is 1 to ${MAX_ID_BYTES} bytes.`, 'document_id');
  const done = await deleteDocument(engine, database, scopeTag(scope, principal), documentId);
  if (!done) throw new PlatformError('document_not_found', `No document "${documentId}" in the ${scope} scope.`, 'document_id');
  return { document_id: documentId, generation: done.generation, deleted: done.deleted };
}
