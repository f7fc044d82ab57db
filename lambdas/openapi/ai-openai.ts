/**
 * The AI API's OpenAI compatibility routes (issue 38; docs/ai/openai-compatibility.md): Files, Vector
 * stores with their files and file batches, search, and the Responses API with `file_search`. An
 * extension of the spec: the objects are OpenAI's, the errors ours in OpenAI's shape. Each part is its
 * own block so the parts are written apart.
 */
import * as z from 'zod/mini';
import { CALL_ERRORS } from './ai-gateway.js';
import { vectorStoreSearchPageSchema, vectorStoreSearchRequestSchema } from '../ai/openai-compat/search.js';
import { fileDeletedSchema, fileFormSchema, fileListSchema, fileObjectSchema, filesQuerySchema } from '../ai/openai-compat/files.js';
import { responseDeletedSchema, responseEventSchema, responseObjectSchema } from '../ai/openai-compat/responses.js';
import { responsesRequestSchema } from '../ai/openai-compat/response-input.js';
import {
  attachFileSchema,
  createFileBatchSchema,
  createVectorStoreSchema,
  fileBatchSchema,
  storeFilesQuerySchema,
  updateFileSchema,
  updateVectorStoreSchema,
  vectorStoreDeletedSchema,
  vectorStoreFileContentSchema,
  vectorStoreFileDeletedSchema,
  vectorStoreFileListSchema,
  vectorStoreFileSchema,
  vectorStoreIdSchema,
  vectorStoreListSchema,
  vectorStoreSchema,
  vectorStoresQuerySchema,
} from '../ai/openai-compat/vector-stores.js';
import type { OperationDocs, ParameterDoc } from './operation.js';

export const OPENAI_TAG = 'OpenAI compatibility';

// --- Files
const FILE_ID: Record<string, ParameterDoc> = {
  file_id: {
    description: 'The file id: `file-` and 32 hex characters for one made here, else the upload’s id (`/v1/uploads`). Unknown, expired, unfinished or another workspace’s: `404 upload_not_found`.',
    schema: () => z.string().check(z.regex(/^[A-Za-z0-9_-]{8,128}$/)),
    example: 'file-019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
  },
};
const FILE_EXAMPLE = {
  id: 'file-019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
  object: 'file',
  bytes: 183412,
  created_at: 1796212800,
  filename: 'handbook.pdf',
  purpose: 'assistants',
  status: 'processed',
  expires_at: 1796817600,
  status_details: null,
};
const FILES: OperationDocs = {
  'ai.files.create': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Upload a file',
    description:
      'OpenAI’s files.create: a `multipart/form-data` form with the file (`file`, with its filename) and `purpose` (`assistants` or `user_data`), optionally `expires_after[anchor]=created_at` and `expires_after[seconds]` (3600 to 604800, rounded up to hours; default 7 days). The form is streamed, the file spooled while its SHA-256 is computed, then stored as a completed upload (`GET /v1/uploads/{id}` shows it). Up to 512 MiB locally; on AWS up to the function’s inline body (about 4.4 MiB), above it `413 request_too_large`: send larger files through `/v1/uploads`, whose completed upload is a file. With an `Idempotency-Key` the file id derives from the key: the same key and file answer the same file, another file `409 operation_id_reused`. Without one, the SDK’s retry (`X-Stainless-Retry-Count` ≥ 1) of a call that made a file of the same bytes, name and purpose in the last 10 minutes answers that file. Non-transient `409`s carry `x-should-retry: false`.',
    headers: {
      'X-Stainless-Retry-Count': { description: 'Sent by the official SDKs: 1 or more on a retry (see above).', schema: () => z.string().check(z.regex(/^\d{1,3}$/)) },
    },
    body: {
      name: 'OpenAIFileCreateForm',
      contentType: 'multipart/form-data',
      schema: fileFormSchema,
      description: 'The form: one file part and the fields, each at most once; any other field is `400 unsupported_field`.',
    },
    responses: { 200: { description: 'The file, `processed` (`uploaded` while a large file’s hash is still checked).', name: 'OpenAIFile', schema: fileObjectSchema, example: FILE_EXAMPLE } },
    errors: ['invalid_body', 'rate_limited', 'operation_id_reused', 'operation_in_progress', 'upload_incomplete'],
  },
  'ai.files.list': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'List files',
    description:
      'OpenAI’s files.list: the workspace’s files (completed uploads, those made through `/v1/uploads` too), newest first unless `order=asc`; `purpose` narrows. A page holds at most 100 (`limit` up to 10,000 is taken); `has_more` with `after` = `last_id` gives the next (the SDK pages by itself). An `after` naming no file of the workspace: `400 invalid_body`.',
    query: filesQuerySchema,
    responses: { 200: { description: 'A page of files.', name: 'OpenAIFileList', schema: fileListSchema, example: { object: 'list', data: [FILE_EXAMPLE], first_id: FILE_EXAMPLE.id, last_id: FILE_EXAMPLE.id, has_more: false } } },
    errors: ['invalid_body'],
  },
  'ai.files.get': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Retrieve a file',
    description: 'OpenAI’s files.retrieve. A completed upload made through `/v1/uploads` is a file (purpose `assistants`); a pending one is not (`404`).',
    path: FILE_ID,
    responses: { 200: { description: 'The file.', name: 'OpenAIFile', schema: fileObjectSchema, example: FILE_EXAMPLE } },
    errors: ['upload_not_found'],
  },
  'ai.files.content': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Retrieve a file’s content',
    description: 'OpenAI’s files.content: the bytes as stored, with the upload’s media type (`assistants` files too, which OpenAI does not serve). On AWS a file over the function’s answer limit is a `307` to a short-lived URL of the store. `409 upload_incomplete` while its hash is still checked.',
    path: FILE_ID,
    responses: {
      200: {
        description: 'The bytes.',
        contentType: 'application/octet-stream',
        alternatives: [{ contentType: '*/*' }],
        headers: {
          'Content-Length': { description: 'The file’s size in bytes.', required: true, schema: () => z.string().check(z.regex(/^\d+$/)) },
          'Content-Disposition': { description: '`attachment` with the filename, percent-encoded (`filename*=UTF-8\'\'…`).', required: true },
        },
      },
      307: {
        description: 'AWS, a file over the function’s answer limit: fetch it from `Location` (expires in 15 minutes).',
        headers: {
          Location: { description: 'A presigned URL of the bytes in the store.', required: true },
          'Cache-Control': { description: '`no-store`: the URL expires.', required: true },
        },
      },
    },
    errors: ['upload_not_found', 'upload_incomplete'],
  },
  'ai.files.delete': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Delete a file',
    description: 'OpenAI’s files.delete: the file and its listing entry go at once; its bytes at the latest when it would have expired (the same bytes may back another file). Vector store files made from it keep their processed chunks. `409 operation_in_progress` while its hash is being checked.',
    path: FILE_ID,
    responses: { 200: { description: 'Deleted.', name: 'OpenAIFileDeleted', schema: fileDeletedSchema, example: { id: FILE_EXAMPLE.id, object: 'file', deleted: true } } },
    errors: ['upload_not_found', 'operation_in_progress'],
  },
};
// --- Vector stores, their files and file batches
const VS_ID: Record<string, ParameterDoc> = {
  vector_store_id: {
    description: '`vs_` (or `col_`) and 32 lowercase hex characters: the `cloud` collection of the same hex. Another workspace’s, another mode’s or an unknown one: `404 collection_not_found`.',
    schema: vectorStoreIdSchema,
    example: 'vs_019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
  },
};
const VSF_ID: Record<string, ParameterDoc> = { ...VS_ID, file_id: { description: 'The file’s id (an upload’s id).', schema: () => z.string().check(z.regex(/^[A-Za-z0-9_-]{8,128}$/)), example: 'file-019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0' } };
const VSFB_ID: Record<string, ParameterDoc> = { ...VS_ID, batch_id: { description: '`vsfb_` and 32 hex characters.', schema: () => z.string().check(z.regex(/^vsfb_[0-9a-f]{32}$/)), example: 'vsfb_019ac5c3a4b1c0d2e3f4a5b6c7d8e9f0' } };
const POLL_AFTER = { 'openai-poll-after-ms': { description: 'While in progress: the SDK’s poll helpers wait this many milliseconds before the next read (else 5 s).', schema: () => z.string() } };
const VS_ERRORS = ['collections_disabled', 'collection_not_found', 'collection_expired'] as const;
const VS_EXAMPLE = {
  id: 'vs_019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
  object: 'vector_store',
  created_at: 1764547200,
  name: 'Handbook',
  description: null,
  usage_bytes: 48213,
  file_counts: { in_progress: 1, completed: 2, failed: 0, cancelled: 0, total: 3 },
  status: 'in_progress',
  last_active_at: 1764547260,
  metadata: { team: 'ops' },
  expires_after: { anchor: 'last_active_at', days: 7 },
  expires_at: 1765152000,
};
const VSF_EXAMPLE = {
  id: 'file-019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0',
  object: 'vector_store.file',
  created_at: 1764547260,
  vector_store_id: VS_EXAMPLE.id,
  status: 'completed',
  usage_bytes: 20511,
  last_error: null,
  attributes: { lang: 'en', year: 2024 },
  chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } },
};
const VSF_FAILED = { ...VSF_EXAMPLE, id: 'file-019ac5c2a4b1c0d2e3f4a5b6c7d8e9f1', status: 'failed', last_error: { code: 'invalid_file', message: 'too_large: Reading the file went over the memory one item may use (1024 MiB, KNOWLEDGE_MAX_MEMORY_MB).' } };
const BATCH_EXAMPLE = { id: 'vsfb_019ac5c3a4b1c0d2e3f4a5b6c7d8e9f0', object: 'vector_store.files_batch', created_at: 1764547300, vector_store_id: VS_EXAMPLE.id, status: 'in_progress', file_counts: { in_progress: 1, completed: 1, failed: 0, cancelled: 0, total: 2 } };
const LIST_OF = (data: object[]) => ({ object: 'list', data, first_id: (data[0] as { id: string }).id, last_id: (data.at(-1) as { id: string }).id, has_more: false });
const ATTACH_ERRORS = ['upload_not_found', 'upload_incomplete', 'rate_limited', 'vector_database_not_created', 'vector_database_deleting'] as const;
const VECTOR_STORES: OperationDocs = {
  'ai.vector_stores.create': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Create a vector store',
    description:
      'OpenAI’s vector store as a `cloud` collection (its id `vs_` with the collection’s hex). `name` follows the collections’ rule (1 to 63 characters). `expires_after.days` 1 to 30 moves the collection’s end earlier (retention `custom`); a store lives at most 30 days and activity does not extend it. `file_ids` (up to 500) are attached as `POST …/files` attaches one: each is checked first, and the organization’s free queued-item slots (`KNOWLEDGE_MAX_QUEUED_ITEMS`): short of either, nothing is made. Needs the workspace’s vector database (`409 vector_database_not_created`). Answers 200 as OpenAI does.',
    body: { name: 'OpenAIVectorStoreCreateRequest', schema: createVectorStoreSchema, example: { name: 'Handbook', metadata: { team: 'ops' }, expires_after: { anchor: 'last_active_at', days: 7 } }, required: false },
    responses: { 200: { description: 'The vector store.', name: 'OpenAIVectorStore', schema: vectorStoreSchema, example: { ...VS_EXAMPLE, status: 'completed', usage_bytes: 0, file_counts: { in_progress: 0, completed: 0, failed: 0, cancelled: 0, total: 0 } } } },
    errors: ['collections_disabled', 'vector_database_disabled', 'operation_in_progress', 'operation_id_reused', ...ATTACH_ERRORS, 'collection_not_found'],
  },
  'ai.vector_stores.list': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'List vector stores',
    description: 'The workspace’s `cloud` collections, newest first unless `order=asc`; `after`/`before` a vector store id, `limit` 1 to 100 (default 20).',
    query: vectorStoresQuerySchema,
    responses: { 200: { description: 'A page of vector stores.', name: 'OpenAIVectorStoreList', schema: vectorStoreListSchema, example: LIST_OF([VS_EXAMPLE]) } },
    errors: ['collections_disabled', 'invalid_body'],
  },
  'ai.vector_stores.get': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Read a vector store',
    description: '`file_counts` from the collection’s exact counters (`in_progress` = queued + processing; `cancelled`: files a batch’s cancel took out); `status` `in_progress` while any file is, else `completed`. Past its end, `status: expired` for 30 days (every other route: `410 collection_expired`).',
    path: VS_ID,
    responses: { 200: { description: 'The vector store.', name: 'OpenAIVectorStore', schema: vectorStoreSchema, example: VS_EXAMPLE } },
    errors: VS_ERRORS,
  },
  'ai.vector_stores.update': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Update a vector store',
    description: '`name` (the collection’s), `metadata`, `expires_after` (moves the collection’s end to now + days; `null`: back to 30 days from creation).',
    path: VS_ID,
    body: { name: 'OpenAIVectorStoreUpdateRequest', schema: updateVectorStoreSchema, example: { name: 'Handbook 2', expires_after: null } },
    responses: { 200: { description: 'The vector store.', name: 'OpenAIVectorStore', schema: vectorStoreSchema, example: { ...VS_EXAMPLE, name: 'Handbook 2', expires_after: undefined, expires_at: 1767139200 } } },
    errors: VS_ERRORS,
  },
  'ai.vector_stores.delete': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Delete a vector store',
    description: 'The collection with its items, packages and vectors; the files (uploads) stay.',
    path: VS_ID,
    responses: { 200: { description: 'Deleted.', name: 'OpenAIVectorStoreDeleted', schema: vectorStoreDeletedSchema, example: { id: VS_EXAMPLE.id, object: 'vector_store.deleted', deleted: true } } },
    errors: VS_ERRORS,
  },
  'ai.vector_stores.files.create': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Attach a file to a vector store',
    description:
      'The file (a completed upload of the workspace) becomes an item of the store’s collection, processed as every item (extraction, chunks, embeddings); its bytes are kept as long as the store. `attributes`: up to 16, keys 1 to 64 characters, strings up to 512, numbers, booleans. `chunking_strategy`: `auto` (800/400 tokens) or `static` (`max_chunk_size_tokens` 100 to 4096, `chunk_overlap_tokens` 0 to half of it). The same file again answers its object as it is (one item, however many adds run at once). `429 rate_limited` at the organization’s queued-item cap.',
    path: VS_ID,
    body: { name: 'OpenAIVectorStoreFileCreateRequest', schema: attachFileSchema, example: { file_id: VSF_EXAMPLE.id, attributes: { lang: 'en', year: 2024 }, chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 400, chunk_overlap_tokens: 100 } } } },
    responses: { 200: { description: 'The vector store file.', name: 'OpenAIVectorStoreFile', schema: vectorStoreFileSchema, example: { ...VSF_EXAMPLE, status: 'in_progress' }, headers: POLL_AFTER } },
    errors: [...VS_ERRORS, ...ATTACH_ERRORS],
  },
  'ai.vector_stores.files.list': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'List a vector store’s files',
    description: 'By creation, newest first unless `order=asc`; `after`/`before` a file id of the store; `filter` by status.',
    path: VS_ID,
    query: storeFilesQuerySchema,
    responses: { 200: { description: 'A page of files.', name: 'OpenAIVectorStoreFileList', schema: vectorStoreFileListSchema, example: LIST_OF([VSF_EXAMPLE, VSF_FAILED]) } },
    errors: [...VS_ERRORS, 'invalid_body'],
  },
  'ai.vector_stores.files.get': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Read a vector store file',
    description: 'Its status from its item (`in_progress` while queued or processing); `last_error` maps the item’s failure (`unsupported_type` → `unsupported_file`, `upstream_error` → `server_error`, the rest `invalid_file`), our code first in its message.',
    path: VSF_ID,
    responses: { 200: { description: 'The vector store file.', name: 'OpenAIVectorStoreFile', schema: vectorStoreFileSchema, example: VSF_FAILED, headers: POLL_AFTER } },
    errors: [...VS_ERRORS, 'item_not_found'],
  },
  'ai.vector_stores.files.update': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Update a vector store file’s attributes',
    description: 'Searches filter on them from the next call on.',
    path: VSF_ID,
    body: { name: 'OpenAIVectorStoreFileUpdateRequest', schema: updateFileSchema, example: { attributes: { lang: 'fr' } } },
    responses: { 200: { description: 'The vector store file.', name: 'OpenAIVectorStoreFile', schema: vectorStoreFileSchema, example: { ...VSF_EXAMPLE, attributes: { lang: 'fr' } } } },
    errors: [...VS_ERRORS, 'item_not_found'],
  },
  'ai.vector_stores.files.delete': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Remove a file from a vector store',
    description: 'The item: its chunks leave every search at once, then its packages and vectors are removed. The file (upload) stays.',
    path: VSF_ID,
    responses: { 200: { description: 'Removed.', name: 'OpenAIVectorStoreFileDeleted', schema: vectorStoreFileDeletedSchema, example: { id: VSF_EXAMPLE.id, object: 'vector_store.file.deleted', deleted: true } } },
    errors: [...VS_ERRORS, 'item_not_found'],
  },
  'ai.vector_stores.files.content': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Read a vector store file’s parsed text',
    description: 'The processed chunks’ text, in order (none until the file is processed).',
    path: VSF_ID,
    responses: {
      200: {
        description: 'One page, never more.',
        name: 'OpenAIVectorStoreFileContent',
        schema: vectorStoreFileContentSchema,
        example: { object: 'vector_store.file_content.page', data: [{ type: 'text', text: 'Page two explains the volcanic geology of the island in detail.' }], has_more: false, next_page: null },
      },
    },
    errors: [...VS_ERRORS, 'item_not_found'],
  },
  'ai.vector_stores.file_batches.create': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Attach a batch of files',
    description:
      '`file_ids` or `files` (1 to 2000; `files` with their own `attributes`/`chunking_strategy`). Every file is checked before any is attached (the first unknown one: `404 upload_not_found`, nothing added); then they are attached in order until the organization’s queued-item cap; the rest are attached at the batch’s next reads. Files attached already are members as they are.',
    path: VS_ID,
    body: { name: 'OpenAIVectorStoreFileBatchCreateRequest', schema: createFileBatchSchema, example: { file_ids: [VSF_EXAMPLE.id, VSF_FAILED.id], attributes: { lang: 'en' } } },
    responses: { 200: { description: 'The batch.', name: 'OpenAIVectorStoreFileBatch', schema: fileBatchSchema, example: BATCH_EXAMPLE, headers: POLL_AFTER } },
    errors: [...VS_ERRORS, ...ATTACH_ERRORS, 'operation_in_progress', 'operation_id_reused'],
  },
  'ai.vector_stores.file_batches.get': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Read a file batch',
    description: 'Attaches waiting files first (up to the cap), then counts the members from their items. `cancelled` once cancelled and none in progress; `failed` if every file failed.',
    path: VSFB_ID,
    responses: { 200: { description: 'The batch.', name: 'OpenAIVectorStoreFileBatch', schema: fileBatchSchema, example: BATCH_EXAMPLE, headers: POLL_AFTER } },
    errors: [...VS_ERRORS, 'item_not_found', 'vector_database_not_created', 'vector_database_deleting'],
  },
  'ai.vector_stores.file_batches.cancel': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Cancel a file batch',
    description: 'No more of its files are attached; the ones it attached that are still queued are taken out (`cancelled`); processing or processed ones stay.',
    path: VSFB_ID,
    responses: { 200: { description: 'The batch.', name: 'OpenAIVectorStoreFileBatch', schema: fileBatchSchema, example: { ...BATCH_EXAMPLE, status: 'cancelled', file_counts: { in_progress: 0, completed: 1, failed: 0, cancelled: 1, total: 2 } }, headers: POLL_AFTER } },
    errors: [...VS_ERRORS, 'item_not_found'],
  },
  'ai.vector_stores.file_batches.files': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'List a file batch’s files',
    description: 'Its members in the batch’s order (`order=desc` reverses it); `after`/`before` a member’s id; `filter` by status.',
    path: VSFB_ID,
    query: storeFilesQuerySchema,
    responses: { 200: { description: 'A page of files.', name: 'OpenAIVectorStoreFileList', schema: vectorStoreFileListSchema, example: LIST_OF([VSF_EXAMPLE]) } },
    errors: [...VS_ERRORS, 'item_not_found', 'invalid_body'],
  },
};
// --- Vector store search
const SEARCH_COLLECTION = 'col_019ac5c1f2a3e1d0c4b7a99e5f0c2d13';
const SEARCH: OperationDocs = {
  'ai.vector_stores.search': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Search a vector store',
    description:
      'OpenAI’s vector store search over a `cloud` collection’s chunks: each query (1 to 5) embedded through the workspace’s vector database, the results merged by score, one per chunk, those under `ranking_options.score_threshold` dropped, the best `max_num_results` (1 to 50, default 10) answered. `filters` test each file’s `attributes`; a file without the key never matches. No reranker and no query rewriting run (`ranker`, `rewrite_query` accepted). Each result carries `citation` beyond OpenAI’s fields. Another workspace’s store, a collection of another mode or an unknown id: `404 collection_not_found`. With an `Idempotency-Key` the answer is kept 24 hours.',
    path: {
      vector_store_id: {
        description: '`vs_` (or `col_`) and 32 lowercase hex characters: the `cloud` collection of the same hex.',
        schema: () => z.string().check(z.regex(/^(vs|col)_[0-9a-f]{32}$/)),
        example: 'vs_019ac5c1f2a3e1d0c4b7a99e5f0c2d13',
      },
    },
    body: {
      name: 'OpenAIVectorStoreSearchRequest',
      schema: vectorStoreSearchRequestSchema,
      example: { query: 'volcanic geology', max_num_results: 5, filters: { type: 'and', filters: [{ type: 'eq', key: 'lang', value: 'en' }, { type: 'gte', key: 'year', value: 2020 }] }, ranking_options: { score_threshold: 0.2 } },
    },
    responses: {
      200: {
        description: 'OpenAI’s search page, best first; never more pages.',
        name: 'OpenAIVectorStoreSearchPage',
        schema: vectorStoreSearchPageSchema,
        example: {
          object: 'vector_store.search_results.page',
          search_query: ['volcanic geology'],
          data: [
            {
              file_id: 'file-019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0',
              filename: 'island.pdf',
              score: 0.82,
              attributes: { lang: 'en', year: 2024 },
              content: [{ type: 'text', text: 'Page two explains the volcanic geology of the island in detail.' }],
              citation: { collection_id: SEARCH_COLLECTION, item_id: 'itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0', package_id: 'pkg_019ac5c2b0e1f2a3b4c5d6e7f8091a2b', chunk_id: 'chk_000002', locator: 'page=2' },
            },
          ],
          has_more: false,
          next_page: null,
        },
        headers: { 'x-idempotent-replay': { description: '`true` when this is the answer kept for the same `Idempotency-Key`, replayed.', schema: () => z.literal('true') } },
      },
    },
    errors: ['collections_disabled', 'collection_not_found', 'collection_expired', 'vector_database_not_created', 'vector_database_deleting', 'operation_in_progress', 'operation_id_reused', 'rate_limited', 'quota_exceeded', 'concurrency_limited', 'budget_exhausted', 'upstream_error', 'route_unavailable', 'timeout_error'],
  },
};
// --- Responses
const RESPONSE_ID: Record<string, ParameterDoc> = {
  response_id: {
    description: '`resp_` and 32 hex characters. Unknown, expired (24 hours), deleted, `store: false`, or another application’s or organization’s: `404 response_not_found`.',
    schema: () => z.string().check(z.regex(/^resp_[0-9a-f]{32}$/)),
    example: 'resp_019ac5c3d1e2f3a4b5c6d7e8f9a0b1c2',
  },
};
const RESPONSE_CITATION = {
  type: 'file_citation',
  file_id: 'file-019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0',
  filename: 'island.pdf',
  index: 22,
  citation: { collection_id: 'col_019ac5c1f2a3e1d0c4b7a99e5f0c2d13', item_id: 'itm_019ac5c2a4b1c0d2e3f4a5b6c7d8e9f0', package_id: 'pkg_019ac5c2b0e1f2a3b4c5d6e7f8091a2b', chunk_id: 'chk_000002', locator: 'page=2' },
};
const RESPONSE_EXAMPLE = {
  id: 'resp_019ac5c3d1e2f3a4b5c6d7e8f9a0b1c2',
  object: 'response',
  created_at: 1_796_212_800,
  status: 'completed',
  error: null,
  incomplete_details: null,
  instructions: null,
  metadata: null,
  model: 'chat',
  output: [
    { id: 'fs_019ac5c3d1e2f3a4b5c6d7e8f9a0b1c3', type: 'file_search_call', status: 'completed', queries: ['What is the island made of?'], results: null },
    {
      id: 'msg_019ac5c3d1e2f3a4b5c6d7e8f9a0b1c4',
      type: 'message',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'The island is volcanic.', annotations: [RESPONSE_CITATION], logprobs: [] }],
    },
  ],
  parallel_tool_calls: true,
  temperature: null,
  tool_choice: 'auto',
  tools: [{ type: 'file_search', vector_store_ids: ['vs_019ac5c1f2a3e1d0c4b7a99e5f0c2d13'] }],
  top_p: null,
  max_output_tokens: null,
  previous_response_id: null,
  store: true,
  text: { format: { type: 'text' } },
  truncation: 'disabled',
  usage: { input_tokens: 211, input_tokens_details: { cached_tokens: 0 }, output_tokens: 9, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 220 },
};
const RESPONSES: OperationDocs = {
  'ai.responses.create': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Create a response',
    description:
      'OpenAI’s Responses API over a chat route (`model` a chat route id, resolved as `/v1/chat/completions` does): `input` (a string or message items), `instructions`, `previous_response_id`, `max_output_tokens`, `temperature`, `top_p`, `text.format` become a chat request checked by chat’s rules, and the call is chat’s (limits, budget, usage). With one `file_search` tool (1 to 10 vector stores of this workspace; an application key then also needs `knowledge`), the stores are searched once with the last user message’s text (no model-decided tool calls; `tool_choice: none` skips it), the answer grounded as a collection’s grounded chat is, and its `[n]` markers become `file_citation` annotations (the markers taken out of the text, `index` where they stood; `citation` beyond OpenAI’s fields). Any other tool, `input_file`, `background`, `conversation`, `prompt`: `400 unsupported_field`. Unless `store: false` the response is kept 24 hours for `GET` and `previous_response_id`. With an `Idempotency-Key` a non-streamed answer is kept and replayed.',
    body: {
      name: 'OpenAIResponseCreateRequest',
      schema: responsesRequestSchema,
      example: { model: 'chat', input: 'What is the island made of?', tools: [{ type: 'file_search', vector_store_ids: ['vs_019ac5c1f2a3e1d0c4b7a99e5f0c2d13'], max_num_results: 5 }], include: ['file_search_call.results'] },
    },
    responses: {
      200: {
        description:
          'The response (`stream` absent or false), or with `stream: true` OpenAI’s named server-sent events (`event: <type>` and a `data:` line each, `sequence_number` from 0, no `data: [DONE]`), ending `response.completed`; an upstream failure part-way is an `error` event then `response.failed`.',
        name: 'OpenAIResponse',
        schema: responseObjectSchema,
        example: RESPONSE_EXAMPLE,
        headers: { 'x-idempotent-replay': { description: '`true` when this is the answer kept for the same `Idempotency-Key`, replayed.', schema: () => z.literal('true') } },
        alternatives: [
          {
            contentType: 'text/event-stream',
            name: 'OpenAIResponseStreamEvent',
            schema: responseEventSchema,
            example: { type: 'response.output_text.annotation.added', sequence_number: 9, item_id: 'msg_019ac5c3d1e2f3a4b5c6d7e8f9a0b1c4', output_index: 1, content_index: 0, annotation_index: 0, annotation: RESPONSE_CITATION },
          },
        ],
      },
    },
    errors: [
      'collections_disabled',
      'collection_not_found',
      'collection_expired',
      'vector_database_not_created',
      'vector_database_deleting',
      'invalid_messages',
      'unsupported_field_for_route',
      'field_not_allowed',
      ...CALL_ERRORS,
    ],
  },
  'ai.responses.get': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Retrieve a stored response',
    description: 'A response this application made in the last 24 hours without `store: false`, as it was answered. Replaying its events (`stream=true`) is not served (`400 unsupported_field`).',
    path: RESPONSE_ID,
    responses: { 200: { description: 'The stored response.', name: 'OpenAIResponse', schema: responseObjectSchema, example: RESPONSE_EXAMPLE } },
    errors: ['response_not_found'],
  },
  'ai.responses.delete': {
    tag: OPENAI_TAG,
    extension: true,
    summary: 'Delete a stored response',
    description: 'Forgets a stored response at once: it can no longer be retrieved or continued with `previous_response_id`.',
    path: RESPONSE_ID,
    responses: { 200: { description: 'Deleted.', name: 'OpenAIResponseDeleted', schema: responseDeletedSchema, example: { id: 'resp_019ac5c3d1e2f3a4b5c6d7e8f9a0b1c2', object: 'response', deleted: true } } },
    errors: ['response_not_found'],
  },
};

export const AI_OPENAI_OPERATIONS: OperationDocs = { ...FILES, ...VECTOR_STORES, ...SEARCH, ...RESPONSES };
