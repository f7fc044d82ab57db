/** The AI API's uploads, vector database (spec 4.6, 4.7) and knowledge collections (spec 4.9, 4.10, and the extensions: reading, chat). */
import * as z from 'zod/mini';
import { completeUploadSchema, partAnswerSchema, startUploadSchema, uploadVerifyingSchema, uploadViewSchema } from '../knowledge/uploads.js';
import { ingestRequestSchema } from '../vector/passages.js';
import { ingestAnswerSchema } from '../vector/ingest.js';
import { queryRequestSchema } from '../vector/query.js';
import { queryAnswerSchema } from '../vector/answer.js';
import { documentDeletedSchema, documentDeleteQuerySchema, documentsPageSchema, documentsQuerySchema } from '../vector/handling.js';
import { collectionDeletedSchema, collectionListSchema, collectionsQuerySchema, collectionViewSchema, createCollectionSchema } from '../knowledge/collections.js';
import { collectionQueryAnswerSchema, collectionQueryRequestSchema } from '../knowledge/collection-query.js';
import { groundedChatChunkSchema, groundedChatRequestSchema, groundedCompletionSchema } from '../knowledge/grounded-chat.js';
import type { ErrorCode } from '../shared/errors.js';
import type { HeaderDoc, OperationDocs, ParameterDoc } from './operation.js';

/** Set on a kept answer replayed for the same X-Operation-Id (spec 4.1). */
const REPLAY: Record<string, HeaderDoc> = {
  'x-idempotent-replay': { description: '`true` when this is the answer kept for the same `X-Operation-Id`, replayed (kept 24 hours).', schema: () => z.literal('true') },
};

/** Codes of an idempotent AI write (spec 3, "Idempotent AI operation"): the id's first call still running, or the id used for another call. */
const ONCE: ErrorCode[] = ['operation_in_progress', 'operation_id_reused'];
/** The AI gateway's limits and upstream faults, for a call that embeds through it (the vector database's route). */
const GATEWAY: ErrorCode[] = ['rate_limited', 'quota_exceeded', 'concurrency_limited', 'budget_exhausted', 'upstream_error', 'route_unavailable', 'timeout_error'];
/** The workspace's vector database: switched off, never created, or being deleted. */
const VECTOR_DATABASE: ErrorCode[] = ['vector_database_disabled', 'vector_database_not_created', 'vector_database_deleting'];
/** Every route of one collection, before its body is looked at (docs/ai/collections.md). */
const COLLECTION: ErrorCode[] = ['collections_disabled', 'collection_not_found', 'collection_expired'];

const UPLOAD_ID: ParameterDoc = {
  description: 'The upload id: its start call’s `X-Operation-Id`. Unknown, expired, or another workspace’s: `404 upload_not_found`.',
  schema: () => z.string().check(z.regex(/^[A-Za-z0-9_-]{8,128}$/)),
  example: 'upl-2026-11-27-talk',
};
const COLLECTION_ID: ParameterDoc = {
  description: '`col_` and 32 lowercase hex characters. Anything else, or another workspace’s collection: `404 collection_not_found`.',
  schema: () => z.string().check(z.regex(/^col_[0-9a-f]{32}$/)),
  example: 'col_019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
};

const SHA = '9f2c4e0d8b7a6c5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10';
const UPLOAD_EXAMPLE = {
  id: 'upl-2026-11-27-talk',
  object: 'upload',
  filename: 'talk.mp4',
  content_type: 'video/mp4',
  size: 12583035,
  sha256: SHA,
  status: 'pending',
  part_size: 5242880,
  part_count: 3,
  parts_received: [1],
  keep_source_hours: 24,
  created_at: '2026-11-27T12:00:00.000Z',
  expires_at: '2026-11-28T12:00:00.000Z',
  completed_at: null,
  parts: [
    { number: 2, url: 'http://localhost:8080/v1/uploads/upl-2026-11-27-talk/parts/2', method: 'PUT', size: 5242880 },
    { number: 3, url: 'http://localhost:8080/v1/uploads/upl-2026-11-27-talk/parts/3', method: 'PUT', size: 2097275 },
  ],
  part_urls_expire_at: null,
};
const COMPLETED_EXAMPLE = { ...UPLOAD_EXAMPLE, status: 'completed', parts_received: [1, 2, 3], completed_at: '2026-11-27T12:03:10.000Z', parts: [] };
const COLLECTION_EXAMPLE = {
  id: 'col_019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
  object: 'collection',
  name: 'Handbooks',
  mode: 'cloud',
  retention: 'standard_30d',
  status: 'empty',
  created_at: '2026-11-27T13:20:00.000Z',
  expires_at: '2026-12-27T13:20:00.000Z',
  counts: { total: 0, queued: 0, processing: 0, done: 0, failed: 0 },
  items: [],
};
const INDEXING_EXAMPLE = { indexed: 2, total: 2, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 };
const CITATIONS_EXAMPLE = [
  { number: 1, collection_id: COLLECTION_EXAMPLE.id, item_id: 'itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0', package_id: 'pkg_019ac5c2b0e1f2a3b4c5d6e7f8091a2b', chunk_id: 'chk_000002', locator: 'heading=Ferry > Winter' },
  { number: 2, collection_id: COLLECTION_EXAMPLE.id, item_id: 'itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0', package_id: 'pkg_019ac5c2b0e1f2a3b4c5d6e7f8091a2b', chunk_id: 'chk_000003', locator: 'heading=Ferry > Summer' },
];

export const AI_KNOWLEDGE_OPERATIONS: OperationDocs = {
  'ai.uploads.create': {
    tag: 'Uploads',
    extension: true,
    summary: 'Start an upload',
    description:
      'Announces a file of up to 5 GiB (name, media type, size, SHA-256) for the knowledge routes (`upload_id`). The call’s `X-Operation-Id` is the upload’s id. The answer says how the platform cut the file (`part_size`, `part_count`) and where each part goes (`parts`). The same id with the same file answers the same upload (`200`); with another file `409 operation_id_reused`. Kept `keep_source_hours` from the start.',
    body: {
      name: 'UploadStart',
      schema: startUploadSchema,
      example: { filename: 'talk.mp4', content_type: 'video/mp4', size: 12583035, sha256: SHA, keep_source_hours: 24 },
    },
    responses: {
      201: { description: 'The upload, `pending`, with where each part goes.', name: 'Upload', schema: uploadViewSchema, example: { ...UPLOAD_EXAMPLE, parts_received: [] } },
      200: { description: 'The id already names this file: the upload as it is now.', name: 'Upload', schema: uploadViewSchema },
    },
    errors: ['operation_id_reused'],
  },
  'ai.uploads.get': {
    tag: 'Uploads',
    extension: true,
    summary: 'Read an upload',
    description: 'The upload as it is: its `status`, the parts that arrived (`parts_received`) and where the missing ones go (`parts`, with fresh URLs). A client cut off reads it and sends only the missing parts; after a `202` complete it reads it until `status` is no longer `verifying`.',
    path: { id: UPLOAD_ID },
    responses: { 200: { description: 'The upload.', name: 'Upload', schema: uploadViewSchema, example: UPLOAD_EXAMPLE } },
    errors: ['upload_not_found'],
  },
  'ai.uploads.part': {
    tag: 'Uploads',
    extension: true,
    summary: 'Send one part of an upload',
    description:
      'The part’s raw bytes, exactly its `size` (every part `part_size` bytes but the last). Sending a number again replaces the part; parts go in any order and at once. On AWS the upload’s `parts` name presigned S3 URLs instead (a plain `PUT` there, without `Authorization`); this route still takes parts under Lambda’s inline limit.',
    path: {
      id: UPLOAD_ID,
      n: { description: 'The part number, 1 to `part_count`.', schema: () => z.string().check(z.regex(/^[1-9]\d{0,4}$/)), example: '2' },
    },
    headers: {
      'Content-Length': {
        description: 'The part’s size in bytes, exactly its `size` (`400 invalid_part` otherwise); required (`411 length_required` without it, as for a chunked body).',
        // Required by the route, but not marked so: every HTTP client sets it from a body of known length,
        // and generated clients would otherwise ask their callers for it (as the Data API's file PUTs).
        schema: () => z.string().check(z.regex(/^\d{1,16}$/)),
      },
    },
    // The handler streams the bytes whatever Content-Type says.
    body: { contentType: 'application/octet-stream', description: 'The part’s raw bytes (at most 100 MiB), of any `Content-Type`.', alternatives: [{ contentType: '*/*' }] },
    responses: {
      200: {
        description: 'The part was kept.',
        name: 'UploadPart',
        schema: partAnswerSchema,
        example: { part_number: 2, size: 5242880, etag: '5d41402abc4b2a76b9719d911017c592' },
        headers: { ETag: { description: 'The part’s etag, quoted.', required: true } },
      },
    },
    errors: ['upload_not_found', 'invalid_part', 'length_required', 'upload_completed', 'upload_incomplete', 'operation_in_progress'],
  },
  'ai.uploads.complete': {
    tag: 'Uploads',
    extension: true,
    summary: 'Complete an upload',
    description:
      'Every part must be there with its exact size (else `409 upload_incomplete`, naming the missing parts); the parts are joined and the whole file’s size and SHA-256 checked (a mismatch is `400 hash_mismatch`: the bytes are discarded and the upload is `pending` again with no parts). The call waits for the check `UPLOAD_CHECK_WITHIN_MS` (20 s): past it the answer is `202` with the upload `verifying`, `status_url` and `poll_after_seconds`, and the check finishes in the background (`GET` then reads `completed`, or `failed` with `error`). A completed upload answers `200` as it is; a verifying one `202`; a failed one its failure. Once per `X-Operation-Id`.',
    path: { id: UPLOAD_ID },
    body: { name: 'UploadComplete', schema: completeUploadSchema, required: false, description: '`{}` (or `null`, or no body): the parts are the ones the store holds.', example: {} },
    responses: {
      200: { description: 'Checked and kept: `status: completed`. The file is usable from now on.', name: 'Upload', schema: uploadViewSchema, example: COMPLETED_EXAMPLE, headers: REPLAY },
      202: {
        description: 'Joined; its SHA-256 is being checked outside the call (`status: verifying`). Read `status_url` every `poll_after_seconds` until it is `completed` or `failed`.',
        name: 'UploadVerifying',
        schema: uploadVerifyingSchema,
        example: { ...COMPLETED_EXAMPLE, status: 'verifying', completed_at: null, status_url: '/v1/uploads/upl-2026-11-27-talk', poll_after_seconds: 21 },
        headers: REPLAY,
      },
    },
    errors: ['upload_not_found', 'upload_incomplete', 'upload_completed', 'hash_mismatch', ...ONCE],
  },

  'ai.vector.ingest': {
    tag: 'Vector database',
    summary: 'Ingest passages',
    description:
      'Stores passages in the workspace’s vector database, in the `shared` or the caller’s `local` scope. All passages that can be stored are embedded in one embeddings call on the database’s route and committed as one transaction; each that cannot is listed in `skipped` with its reason, and the others are stored. Same id in the same scope replaces; a passage with `document_id` joins that document (a higher `generation` replaces it whole). Once per `X-Operation-Id`.',
    body: {
      name: 'VectorIngestRequest',
      schema: ingestRequestSchema,
      example: {
        scope: 'shared',
        documents: [{ id: 'install#1', text: 'Install with apt.', document_id: 'install', generation: 2, metadata: { kind: 'doc', tag: ['linux', 'apt'], language: 'en' } }],
      },
    },
    responses: {
      200: {
        description: 'What was stored, and what was not.',
        name: 'VectorIngestAnswer',
        schema: ingestAnswerSchema,
        example: {
          ingested: 1,
          skipped: [{ index: 1, id: 'install#2', reason: 'invalid_metadata', param: 'documents.1.metadata.tag', message: 'metadata "tag" is an array of something other than Unicode strings; an array holds strings only.' }],
        },
        headers: REPLAY,
      },
    },
    errors: [...VECTOR_DATABASE, ...ONCE, ...GATEWAY],
  },
  'ai.vector.query': {
    tag: 'Vector database',
    summary: 'Search passages by meaning',
    description:
      'Embeds `query` on the database’s route and searches one scope, or both (`hybrid`, merged by score). A filtered query returns `top_k` matches whenever that many passages match. `vector_rerank` reranks the best `top_k × 4` candidates with one of the organization’s rerank profiles; a failing or slow reranker never fails the query (`retrieval.outcome` says so). Once per `X-Operation-Id`.',
    body: {
      name: 'VectorQueryRequest',
      schema: queryRequestSchema,
      example: { mode: 'hybrid', query: 'how do I install it?', top_k: 3, filter: { tag: { $in: ['linux', 'mac'] } } },
    },
    responses: {
      200: {
        description: 'The matches, best first.',
        name: 'VectorQueryAnswer',
        schema: queryAnswerSchema,
        example: {
          matches: [{ id: 'install#1', score: 0.83, text: 'Install with apt.', metadata: { kind: 'doc', tag: ['linux', 'apt'], language: 'en' }, scope: 'shared' }],
          retrieval: { mode: 'vector', reranked: false, profile: null, outcome: 'none' },
        },
        headers: REPLAY,
      },
    },
    errors: ['invalid_field', ...VECTOR_DATABASE, ...ONCE, ...GATEWAY],
  },
  'ai.vector.documents.list': {
    tag: 'Vector database',
    extension: true,
    summary: 'List a scope’s documents',
    description:
      'The scope’s documents in `document_id` order, deleted ones left out, each with its generation, passage count and `content_sha256`: compute the same over what you would send and skip re-ingesting an unchanged document. `next_cursor` is bound to the database and the scope (a `local` one to its key).',
    query: documentsQuerySchema,
    responses: {
      200: {
        description: 'A page of documents.',
        name: 'VectorDocumentList',
        schema: documentsPageSchema,
        example: { data: [{ document_id: 'install', generation: 2, content_sha256: SHA, passages: 1, updated_at: '2026-11-27T12:00:00.000Z' }], next_cursor: null },
      },
    },
    errors: ['invalid_field', 'invalid_cursor', ...VECTOR_DATABASE],
  },
  'ai.vector.documents.delete': {
    tag: 'Vector database',
    extension: true,
    summary: 'Delete a document',
    description: 'Removes the document’s passages at once and remembers its generation: later ingests of it are taken only at a higher generation. Once per `X-Operation-Id`.',
    path: { document_id: { description: 'The document id, 1 to 256 bytes (percent-encoded in the path).', schema: () => z.string().check(z.minLength(1)), example: 'install' } },
    query: documentDeleteQuerySchema,
    responses: {
      200: { description: 'Deleted (or deleted already: `deleted: 0`).', name: 'VectorDocumentDeleted', schema: documentDeletedSchema, example: { document_id: 'install', generation: 2, deleted: 1 }, headers: REPLAY },
    },
    errors: ['invalid_field', 'document_not_found', ...VECTOR_DATABASE, ...ONCE],
  },

  'ai.collections.create': {
    tag: 'Knowledge collections',
    summary: 'Create a knowledge collection',
    description:
      'A workspace’s set of files (items) the platform turns into cited chunks, of a `mode` fixed for life: `download` prepares each item’s package for download; `cloud` also embeds the chunks through the workspace’s vector database, for queries and chat; `local_vectors` keeps only the vectors the client embeds. Kept 30 days (`standard_30d`). Once per `X-Operation-Id`: a replay is the collection as it was created.',
    body: { name: 'CollectionCreate', schema: createCollectionSchema, example: { mode: 'cloud', name: 'Handbooks' } },
    responses: { 201: { description: 'The new collection, `empty`.', name: 'Collection', schema: collectionViewSchema, example: COLLECTION_EXAMPLE, headers: REPLAY } },
    errors: ['collections_disabled', ...VECTOR_DATABASE, ...ONCE],
  },
  'ai.collections.list': {
    tag: 'Knowledge collections',
    extension: true,
    summary: 'List knowledge collections',
    description: 'The workspace’s live collections, newest first; expired ones are left out. `next_cursor` is bound to the organization and workspace.',
    query: collectionsQuerySchema,
    responses: { 200: { description: 'A page of collections.', name: 'CollectionList', schema: collectionListSchema, example: { object: 'list', data: [COLLECTION_EXAMPLE], next_cursor: null } } },
    errors: ['collections_disabled', 'invalid_field', 'invalid_cursor'],
  },
  'ai.collections.get': {
    tag: 'Knowledge collections',
    extension: true,
    summary: 'Read a knowledge collection',
    description: 'The collection with its counts, its status (derived from them) and its 20 newest items. Past `expires_at`: `410 collection_expired`.',
    path: { id: COLLECTION_ID },
    responses: { 200: { description: 'The collection.', name: 'Collection', schema: collectionViewSchema, example: COLLECTION_EXAMPLE } },
    errors: COLLECTION,
  },
  'ai.collections.delete': {
    tag: 'Knowledge collections',
    extension: true,
    summary: 'Delete a knowledge collection',
    description: 'Removes the collection and its items, packages and vectors (a `local_vectors` collection’s own index too); then its id is `404`. Once per `X-Operation-Id`.',
    path: { id: COLLECTION_ID },
    responses: { 200: { description: 'Deleted.', name: 'CollectionDeleted', schema: collectionDeletedSchema, example: { id: COLLECTION_EXAMPLE.id, deleted: true }, headers: REPLAY } },
    errors: [...COLLECTION, ...ONCE],
  },
  'ai.collections.query': {
    tag: 'Knowledge collections',
    summary: 'Query a knowledge collection',
    description:
      'The best chunks of a `cloud` or `local_vectors` collection, each with its citation, and `indexing`: how much of the collection the answer covered, read after the search. A `cloud` collection embeds the query through the workspace’s vector database (its route, limits and usage); a `local_vectors` one is queried with the client’s own `vector` and calls no upstream. A `download` collection is `409 mode_not_supported`. Once per `X-Operation-Id`.',
    path: { id: COLLECTION_ID },
    body: { name: 'CollectionQueryRequest', schema: collectionQueryRequestSchema, example: { query: 'When does the winter ferry leave?', top_k: 3 } },
    responses: {
      200: {
        description: 'The matches, best first, and `indexing`.',
        name: 'CollectionQueryAnswer',
        schema: collectionQueryAnswerSchema,
        example: {
          collection_id: COLLECTION_EXAMPLE.id,
          matches: [
            {
              score: 0.82,
              text: 'The winter ferry leaves the harbour at 08:00 and 16:00.',
              citation: { collection_id: COLLECTION_EXAMPLE.id, item_id: 'itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0', package_id: 'pkg_019ac5c2b0e1f2a3b4c5d6e7f8091a2b', chunk_id: 'chk_000002', locator: 'heading=Ferry > Winter' },
            },
          ],
          indexing: INDEXING_EXAMPLE,
        },
        headers: REPLAY,
      },
    },
    errors: [...COLLECTION, 'mode_not_supported', 'vector_database_not_created', 'vector_database_deleting', ...ONCE, ...GATEWAY],
  },
  'ai.collections.chat': {
    tag: 'Knowledge collections',
    extension: true,
    summary: 'Chat grounded in a knowledge collection',
    description:
      'Retrieves the passages of a `cloud` or `local_vectors` collection that match the last user message’s text (its last 8,000 characters), hands them to the chat route numbered `[1]`..`[n]` between per-request tags, asks the model to cite them by those numbers, and answers as `/v1/chat/completions` does (its fields and rules, route, limits and usage), with `citations` (which passage each number is, down to its page, heading or time range) and `indexing` beside the completion. An application key needs both `knowledge` and `ai.chat`. A `download` collection is `409 mode_not_supported`; the collection’s refusals come before the body is read. A non-streamed answer is kept per `X-Operation-Id`; a streamed one never is.',
    path: { id: COLLECTION_ID },
    body: {
      name: 'GroundedChatRequest',
      schema: groundedChatRequestSchema,
      example: { messages: [{ role: 'user', content: 'When does the winter ferry leave?' }], top_k: 2 },
    },
    responses: {
      200: {
        description:
          'The completion with `citations` and `indexing` (`stream` absent or false), or with `stream: true` server-sent events: chat’s chunks as the upstream sends them, then one chunk without choices carrying `citations` and `indexing`, then `data: [DONE]`; a failure part-way is one `data: {"error": {...}}` event, without citations. An operation id whose non-streamed answer is kept replays that answer as JSON.',
        name: 'GroundedChatCompletion',
        schema: groundedCompletionSchema,
        example: {
          id: 'chatcmpl-9f2c',
          object: 'chat.completion',
          created: 1_796_119_200,
          model: 'chat-default',
          choices: [{ index: 0, message: { role: 'assistant', content: 'It leaves at 08:00 and 16:00 [1].' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 211, completion_tokens: 12, total_tokens: 223 },
          citations: CITATIONS_EXAMPLE,
          indexing: INDEXING_EXAMPLE,
        },
        headers: REPLAY,
        alternatives: [
          {
            contentType: 'text/event-stream',
            name: 'GroundedChatChunk',
            schema: groundedChatChunkSchema,
            example: { id: 'chatcmpl-9f2c', object: 'chat.completion.chunk', created: 1_796_119_200, model: 'chat-default', choices: [], citations: CITATIONS_EXAMPLE, indexing: INDEXING_EXAMPLE },
          },
        ],
      },
    },
    errors: [
      ...COLLECTION,
      'mode_not_supported',
      'vector_database_not_created',
      'vector_database_deleting',
      'invalid_messages',
      'unsupported_field_for_route',
      'field_not_allowed',
      'model_not_allowed',
      'input_too_large',
      'route_forbidden',
      ...ONCE,
      ...GATEWAY,
    ],
  },
};
