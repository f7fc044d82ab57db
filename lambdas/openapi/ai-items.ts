/** The AI API's collection items (extensions of spec 4.9: add, list, read, delete, reprocess, chunks, package, vectors). */
import * as z from 'zod/mini';
import { addItemBodySchema, itemDeletedSchema, itemListSchema, itemsQuerySchema, itemViewSchema } from '../knowledge/items.js';
import { chunkListSchema, chunksQuerySchema, emptyBodySchema, vectorsBodySchema, vectorsStoredSchema } from '../knowledge/item-packages.js';
import type { HeaderDoc, OperationDocs, ParameterDoc } from './operation.js';

const TAG = 'Collection items';

export const COLLECTION_ID_PARAM: ParameterDoc = {
  description: 'The collection id: `col_` and 32 hex (anything else is `404 collection_not_found`).',
  schema: () => z.string().check(z.regex(/^col_[0-9a-f]{32}$/)),
  example: 'col_019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
};

const ITEM_ID_PARAM: ParameterDoc = {
  description: 'The item id: `itm_` and 32 hex (anything else is `404 item_not_found`).',
  schema: () => z.string().check(z.regex(/^itm_[0-9a-f]{32}$/)),
  example: 'itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0',
};

const PATH = { id: COLLECTION_ID_PARAM, item_id: ITEM_ID_PARAM };

const REPLAY: Record<string, HeaderDoc> = {
  'x-idempotent-replay': { description: '`true` when this is the kept answer of an earlier call with the same `X-Operation-Id` (spec 4.1).', schema: () => z.literal('true') },
};

/** Errors of every item route: the feature off, the collection gone or unknown. */
const COLLECTION_ERRORS = ['collections_disabled', 'collection_not_found', 'collection_expired'] as const;
/** An idempotent write's operation id used for another call, or still running. */
const OPERATION_ERRORS = ['operation_id_reused', 'operation_in_progress'] as const;

const ITEM_DONE = {
  item_id: 'itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0',
  object: 'collection.item',
  collection_id: 'col_019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
  upload_id: 'upl-2026-11-27-handbook',
  filename: 'handbook.pdf',
  content_type: 'application/pdf',
  size: 1830442,
  sha256: '9f2c4be1a07d53c8e6f1d2a9b0c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1',
  status: 'done',
  error: null,
  package_id: 'pkg_019ac5c2b0e1f2a3b4c5d6e7f8091a2b',
  chunk_count: 212,
  vectors_stored: null,
  created_at: '2026-11-27T13:21:04.000Z',
  processed_at: '2026-11-27T13:21:09.412Z',
};
const ITEM_QUEUED = {
  ...ITEM_DONE,
  item_id: 'itm_019ac5c3c0d1e2f3a4b5c6d7e8f90a1b',
  upload_id: null,
  filename: 'notes.md',
  content_type: 'text/markdown; charset=utf-8',
  size: 41,
  sha256: '3b1e0c9d8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c',
  status: 'queued',
  package_id: null,
  chunk_count: null,
  created_at: '2026-11-27T13:25:00.000Z',
  processed_at: null,
};
const ITEM_FAILED = {
  ...ITEM_DONE,
  item_id: 'itm_019ac5c2f1e2d3c4b5a69788796a5b4c',
  upload_id: 'upl-2026-11-27-scan',
  filename: 'scan.pdf',
  sha256: 'c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00',
  status: 'failed',
  error: { code: 'empty_text', message: 'The PDF has no text layer (a scan?).' },
  package_id: null,
  chunk_count: null,
};

export const AI_ITEMS_OPERATIONS: OperationDocs = {
  'ai.collections.items.create': {
    tag: TAG,
    extension: true,
    summary: 'Add an item to a collection',
    description:
      'A file: a completed upload of the workspace (`{upload_id}`, up to 5 GiB), or a small text sent inline (`{text, filename, content_type?}`, up to 1 MiB of UTF-8). Answers `202` at once with the item `queued`; processing (extraction, chunks, a package, and in `cloud` the embeddings) runs in the background: read the item until it is `done` or `failed`. The item, the collection\'s counts and the kept answer are one write. The `X-Operation-Id` names that file: the same id with the same file (the same upload, or the same text, name and type) replays the first answer; with another file it is `409 operation_id_reused` (spec 4.1). An organization has at most `KNOWLEDGE_MAX_QUEUED_ITEMS` (default 500) items queued or processing: past it `429 rate_limited` with `Retry-After: 5`, nothing added.',
    path: { id: COLLECTION_ID_PARAM },
    body: {
      description: 'Either `{upload_id}` or `{text, filename, content_type?}`, not both.',
      schema: addItemBodySchema,
      example: { upload_id: 'upl-2026-11-27-handbook' },
    },
    responses: {
      202: { description: 'The item, queued.', headers: REPLAY, schema: itemViewSchema, example: { ...ITEM_DONE, status: 'queued', package_id: null, chunk_count: null, processed_at: null } },
    },
    errors: [...COLLECTION_ERRORS, ...OPERATION_ERRORS, 'unsupported_field', 'upload_not_found', 'upload_incomplete', 'rate_limited'],
  },
  'ai.collections.items.list': {
    tag: TAG,
    extension: true,
    summary: 'List a collection’s items',
    description: 'Newest first, a page at a time (`limit` 1 to 100, default 20; `next_cursor` until the last page).',
    path: { id: COLLECTION_ID_PARAM },
    query: itemsQuerySchema,
    responses: { 200: { description: 'A page of items.', name: 'CollectionItemList', schema: itemListSchema, example: { object: 'list', data: [ITEM_QUEUED, ITEM_DONE, ITEM_FAILED], next_cursor: null } } },
    errors: [...COLLECTION_ERRORS, 'unsupported_field', 'invalid_field', 'invalid_cursor'],
  },
  'ai.collections.items.get': {
    tag: TAG,
    extension: true,
    summary: 'Read an item',
    description: 'Its status, its error when it failed, the package it serves and that package’s chunk count.',
    path: PATH,
    responses: { 200: { description: 'The item.', schema: itemViewSchema, example: ITEM_DONE } },
    errors: [...COLLECTION_ERRORS, 'item_not_found'],
  },
  'ai.collections.items.delete': {
    tag: TAG,
    extension: true,
    summary: 'Delete an item',
    description:
      'Its chunks leave every query at once (its record and its share of the collection’s counts go in one write); then its package and vectors are removed. A processor still at work on it removes what it made. Once per `X-Operation-Id`.',
    path: PATH,
    responses: { 200: { description: 'Deleted.', headers: REPLAY, name: 'CollectionItemDeleted', schema: itemDeletedSchema, example: { item_id: ITEM_DONE.item_id, deleted: true } } },
    errors: [...COLLECTION_ERRORS, ...OPERATION_ERRORS, 'item_not_found'],
  },
  'ai.collections.items.reprocess': {
    tag: TAG,
    extension: true,
    summary: 'Process an item again',
    description:
      'Puts a `done` or `failed` item back to `queued` to make a new package of its file (`409 item_not_ready` while it is queued or processing). The package served stays served until the new one is done, then its chunks disappear in that one write. An upload’s bytes must still be kept (`keep_source_hours`), else the item fails `source_expired`. Takes a queued-item slot as an add does (`429 rate_limited` at the cap). Once per `X-Operation-Id`.',
    path: PATH,
    body: { description: '`{}`, `null`, or no body.', required: false, schema: emptyBodySchema, example: {} },
    responses: { 202: { description: 'The item, queued again.', headers: REPLAY, schema: itemViewSchema, example: { ...ITEM_FAILED, status: 'queued', error: null } } },
    errors: [...COLLECTION_ERRORS, ...OPERATION_ERRORS, 'unsupported_field', 'item_not_found', 'item_not_ready', 'rate_limited'],
  },
  'ai.collections.items.chunks': {
    tag: TAG,
    extension: true,
    summary: 'List an item’s chunks',
    description:
      'The served package’s chunks in document order, a page at a time (`limit` 1 to 500, default 100). The cursor is bound to the package: after a reprocess an old cursor is `400 invalid_cursor`. `409 item_not_ready` while no package is served (queued, processing, failed).',
    path: PATH,
    query: chunksQuerySchema,
    responses: {
      200: {
        description: 'A page of chunks.',
        name: 'CollectionChunkList',
        schema: chunkListSchema,
        example: {
          object: 'list',
          item_id: ITEM_DONE.item_id,
          package_id: ITEM_DONE.package_id,
          chunk_count: 212,
          data: [{ chunk_id: 'chk_000000', text: 'Welcome to the team. This handbook…', locator: 'page=1', tokens: 781 }],
          next_cursor: 'AV3n2kq9cW1vE8Zb0xYf4tLp6sHj7rDg5uQa3mNc2oKw',
        },
      },
    },
    errors: [...COLLECTION_ERRORS, 'unsupported_field', 'invalid_field', 'invalid_cursor', 'item_not_found', 'item_not_ready'],
  },
  'ai.collections.items.package': {
    tag: TAG,
    extension: true,
    summary: 'Download an item’s package',
    description:
      'The served package as JSON Lines (in every mode; in `download` it is the product): a header line (`object: "package"`), the document’s sections with their locators, then its chunks. On AWS a package larger than the function’s answer can carry is a `307` to a short-lived URL of the store. `409 item_not_ready` while no package is served.',
    path: PATH,
    responses: {
      200: {
        description: 'The package, JSON Lines (one JSON object a line).',
        contentType: 'application/x-ndjson',
        headers: {
          'Content-Type': { description: '`application/x-ndjson; charset=utf-8`.', required: true },
          'Content-Length': { description: 'The package’s size in bytes.', schema: () => z.string().check(z.regex(/^\d+$/)) },
          'X-Package-Id': { description: 'The package served.', required: true, schema: () => z.string().check(z.regex(/^pkg_[0-9a-f]{32}$/)) },
        },
        example:
          '{"object":"package","package_id":"pkg_019ac5c2b0e1f2a3b4c5d6e7f8091a2b","item_id":"itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0","collection_id":"col_019ac5c1f2a3e1d0c4b7a99e5f0c2d13","filename":"handbook.pdf","content_type":"application/pdf","sha256":"9f2c4be1a07d53c8e6f1d2a9b0c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1","sections":1,"chunk_count":1,"created_at":"2026-11-27T13:21:09.000Z"}\n{"object":"section","text":"Welcome to the team. This handbook…","locator":"page=1"}\n{"object":"chunk","chunk_id":"chk_000000","text":"Welcome to the team. This handbook…","locator":"page=1","tokens":781}\n',
      },
      307: {
        description: 'AWS, a package over the function’s answer limit: fetch it from `Location` (expires in 15 minutes).',
        headers: {
          Location: { description: 'A presigned URL of the package in the store.', required: true },
          'Cache-Control': { description: '`no-store`: the URL expires.', required: true },
        },
      },
    },
    errors: [...COLLECTION_ERRORS, 'item_not_found', 'item_not_ready'],
  },
  'ai.collections.items.vectors': {
    tag: TAG,
    extension: true,
    summary: 'Store vectors of an item’s chunks',
    description:
      'A `local_vectors` collection only (`409 mode_not_supported` otherwise): the client embeds the chunks with its own model and stores the vectors, 1 to 500 entries a call, each chunk once, at most 5 MiB. The first vectors a collection gets fix its dimensions; others are `400 invalid_body`. A chunk sent again replaces its vector and is counted once. Vectors belong to the served package (`409 item_not_ready` while none is served; after a reprocess, send the new package’s). The item is `indexed` once every chunk has its vector. `503 service_unavailable` when too many calls store vectors for the item at once: send the same vectors again.',
    path: PATH,
    body: {
      schema: vectorsBodySchema,
      example: { vectors: [{ chunk_id: 'chk_000000', vector: [0.12, -0.03, 0.88] }] },
    },
    responses: {
      200: {
        description: 'Stored.',
        name: 'CollectionVectorsStored',
        schema: vectorsStoredSchema,
        example: { item_id: ITEM_DONE.item_id, package_id: ITEM_DONE.package_id, stored: 1, skipped: 0, vectors_stored: 212, chunk_count: 212, indexed: true },
      },
    },
    errors: [...COLLECTION_ERRORS, 'unsupported_field', 'item_not_found', 'item_not_ready', 'mode_not_supported'],
  },
};
