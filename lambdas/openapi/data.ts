/** The Data API's routes as the document describes them (spec 4.11 to 4.20 and the extensions); files are data-files.ts's. */
import * as z from 'zod/mini';
import { databaseListSchema, databaseViewSchema } from '../data/databases.js';
import { collectionBodySchema, collectionViewSchema } from '../data/collections.js';
import { COLLECTION_NAME_PATTERN, RECORD_ID_PATTERN } from '../data/schema.js';
import { batchBodySchema, createRecordBodySchema, updateRecordBodySchema } from '../data/records.js';
import { recordViewSchema } from '../data/record-store.js';
import { listQuerySchema, recordListSchema } from '../data/record-reads.js';
import { batchAnswerSchema } from '../data/record-writes.js';
import { endUserTokenAnswerSchema, endUserTokenBodySchema } from '../data/end-user-tokens.js';
import { activityQuerySchema } from '../activity/query.js';
import { activityPageSchema } from '../activity/listing.js';
import type { HeaderDoc, OperationDocs, ParameterDoc } from './operation.js';
import type { ErrorCode } from '../shared/errors.js';
import { OAUTH_TOKEN_DOC } from './oauth.js';

/** Path parameters the Data routes share. */
export const DATABASE_PARAM: ParameterDoc = {
  description: 'The database key: lowercase letters, digits, `.`, `_`, `-`, and `/` written `%2F`, up to 128 characters.',
  schema: () => z.string().check(z.minLength(1), z.maxLength(384)),
  example: 'shop',
};

const COLLECTION_PARAM: ParameterDoc = {
  description: 'The collection name: a lowercase letter, then lowercase letters, digits or `_`, up to 63 characters.',
  schema: () => z.string().check(z.regex(COLLECTION_NAME_PATTERN)),
  example: 'products',
};

const RECORD_ID_PARAM: ParameterDoc = {
  description: 'The record id: 1 to 64 letters, digits, `_`, `-`.',
  schema: () => z.string().check(z.regex(RECORD_ID_PATTERN)),
  example: 'lamp',
};

/** lambdas/http/handlers/data/versions.ts: a record's version travels as `ETag: "<version>"`. */
const ETAG: HeaderDoc = {
  description: 'The record\'s version, quoted: `"3"`. Send it back in `If-Match` (a conditional update or delete) or `If-None-Match` (a conditional read). Browsers may read it (CORS exposes `ETag`).',
  required: true,
  schema: () => z.string().check(z.regex(/^"\d+"$/)),
};

const IF_MATCH: HeaderDoc = {
  description: 'The version the write applies to: `3`, `"3"` or `W/"3"`. Another version is `409 version_conflict`; without it, a concurrent update is retried on the new version. Anything else is `400 invalid_body` (`param: "if-match"`).',
  schema: () => z.string().check(z.regex(/^\s*(?:W\/)?"?\d{1,15}"?\s*$/)),
};

/** Every record route: whose credentials may call it, how browsers do. */
const BY_RULES =
  "Server credentials always may; a publishable key or end-user token (a browser's, CORS answered for its application's origins) as the collection's rule for the action allows (docs/data/rules.md).";

/** What any write of a record can answer (create, update, a batch's ops): its fields checked, its rule, its database and collection. */
const RECORD_WRITE_ERRORS: readonly ErrorCode[] = ['invalid_value', 'unknown_field', 'missing_field', 'reserved_field', 'field_too_large', 'record_too_large', 'forbidden', 'database_not_found', 'collection_not_found', 'unique_violation', 'version_conflict'];

const SHOP_TIME = '2026-12-01T10:00:00.000Z';
const LAMP = { id: 'lamp', version: 1, created_at: SHOP_TIME, updated_at: SHOP_TIME, name: 'Desk lamp', sku: 'LMP-1', price: 24.5, in_stock: true };
const PRODUCTS = {
  name: 'products',
  mode: 'schema',
  schema_version: 1,
  fields: [
    { name: 'name', type: 'text', required: true, fulltext: true },
    { name: 'sku', type: 'text', unique: true },
    { name: 'price', type: 'number', indexed: true },
    { name: 'in_stock', type: 'bool', indexed: true },
  ],
  rules: { list: 'public', view: 'public', create: null, update: null, delete: null },
};

export const DATA_OPERATIONS: OperationDocs = {
  'data.oauth.token': OAUTH_TOKEN_DOC,
  'data.end_user_tokens.create': {
    tag: 'Tokens',
    summary: 'Mint an end-user token',
    extension: true,
    description:
      "An application's server, once it has signed a user in, mints that user a token for their browser or app: `Authorization: Bearer <token>` on the Data API, where collection rules decide what it reaches (`@auth.id` is `user_id`). Only a secret key or OAuth client bound to the application may (an organization-wide one is `403 forbidden`: a token names one application).",
    body: {
      name: 'EndUserTokenRequest',
      schema: endUserTokenBodySchema,
      example: { user_id: 'user_42', ttl_seconds: 900, claims: { plan: 'pro' } },
    },
    responses: {
      200: {
        description: 'The token.',
        name: 'EndUserToken',
        schema: endUserTokenAnswerSchema,
        headers: { 'Cache-Control': { description: '`no-store`.', required: true } },
        example: { token: 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1c2VyXzQyIn0.c2ln', expires_at: '2026-12-01T10:15:00.000Z' },
      },
    },
    errors: ['forbidden', 'unknown_field'],
  },
  'data.databases.list': {
    tag: 'Databases',
    summary: 'List databases',
    description:
      'Server credentials only (`403 forbidden` otherwise). An application-bound credential lists only the databases its application created (each with `application_id`); an organization credential lists all.',
    responses: { 200: { description: 'The databases.', name: 'DatabaseList', schema: databaseListSchema, example: { databases: [{ key: 'shop', created_at: SHOP_TIME }] } } },
    errors: ['forbidden'],
  },
  'data.databases.put': {
    tag: 'Databases',
    summary: 'Create a database',
    description:
      'Idempotent: 201 when created, 200 when it already exists. No body. An application-bound credential makes its application the owner. Server credentials only; database keys are one namespace per organization, so a key another application owns is `403 forbidden`.',
    path: { database: DATABASE_PARAM },
    responses: {
      201: { description: 'Created.', name: 'Database', schema: databaseViewSchema, example: { key: 'shop', created_at: SHOP_TIME } },
      200: { description: 'It already existed.', name: 'Database', schema: databaseViewSchema },
    },
    errors: ['invalid_name', 'forbidden'],
  },
  'data.collections.put': {
    tag: 'Collections',
    summary: 'Create or change a collection',
    description:
      'Sends the full desired state: fields only in the new list are added, fields only in the old list are dropped with their data, a field in both must be identical (`400 schema_change_unsupported`, also for a changed `mode`). An omitted `rules` sets every rule to `null`. `schema_version` increases on every change; an identical PUT leaves it. Adding a `required` field to a collection that has records is `409 schema_violation`; concurrent PUTs resolve as last writer wins (`409 version_conflict` only past about 2 s of retries). Server credentials only.',
    path: { database: DATABASE_PARAM, collection: COLLECTION_PARAM },
    body: {
      name: 'CollectionRequest',
      schema: collectionBodySchema,
      example: { mode: PRODUCTS.mode, fields: PRODUCTS.fields, rules: { list: 'public', view: 'public' } },
    },
    responses: {
      201: { description: 'Created.', name: 'Collection', schema: collectionViewSchema, example: PRODUCTS },
      200: { description: 'It existed: changed, or unchanged.', name: 'Collection', schema: collectionViewSchema },
    },
    errors: ['forbidden', 'database_not_found', 'invalid_name', 'invalid_schema', 'invalid_rule', 'schema_change_unsupported', 'schema_violation', 'version_conflict'],
  },
  'data.collections.get': {
    tag: 'Collections',
    summary: 'Read a collection',
    extension: true,
    description: 'The collection as last saved. Server credentials only.',
    path: { database: DATABASE_PARAM, collection: COLLECTION_PARAM },
    responses: { 200: { description: 'The collection.', name: 'Collection', schema: collectionViewSchema, example: PRODUCTS } },
    errors: ['forbidden', 'database_not_found', 'collection_not_found'],
  },
  'data.records.create': {
    tag: 'Records',
    summary: 'Create a record',
    description: `An optional own \`id\` (else the service makes a sortable \`rec_\` id; an existing one is \`409 already_exists\`) and the record's fields: declared ones in a schema collection (each checked by its type), any top-level keys in a free collection; \`null\` leaves a field unset. A whole record is at most 900 KiB of JSON. Writing to a collection that does not exist creates a free one (every rule \`null\`) when the credential is a server credential; otherwise \`404 collection_not_found\`. ${BY_RULES}`,
    path: { database: DATABASE_PARAM, collection: COLLECTION_PARAM },
    headers: {
      'If-None-Match': {
        description: 'Only `*`: create, never replace (what an existing id already means, `409 already_exists`). Another value is `400 invalid_body`.',
        schema: () => z.string().check(z.regex(/^\s*\*\s*$/)),
      },
    },
    body: {
      schema: createRecordBodySchema,
      description: "The record's fields by name, and optionally its `id` (1 to 64 letters, digits, `_`, `-`). `version`, `created_at`, `updated_at` and names starting with `_` are `400 reserved_field`.",
      example: { id: 'lamp', name: 'Desk lamp', sku: 'LMP-1', price: 24.5, in_stock: true },
    },
    responses: { 201: { description: 'The record, at version 1.', schema: recordViewSchema, headers: { ETag: ETAG }, example: LAMP } },
    errors: [...RECORD_WRITE_ERRORS, 'invalid_name', 'already_exists'],
  },
  'data.records.list': {
    tag: 'Records',
    summary: 'List records',
    extension: true,
    description: `A page of records, sorted by \`id\` unless \`sort\` says otherwise (ties by id), filtered by \`filter[<field>]\` on indexed fields and \`q\` over fulltext fields; anything else in the query is \`400 invalid_query\`. One call examines at most 1,000 records and answers at most 2.5 MiB of them, so a page may hold fewer than \`limit\` records, even none, while \`next_cursor\` is not null: page on until it is null. A list is not a snapshot. ${BY_RULES} A credential the list rule can never let through is \`403 forbidden\`; records the rule hides are left out.`,
    path: { database: DATABASE_PARAM, collection: COLLECTION_PARAM },
    query: listQuerySchema,
    queryExtra: {
      'filter[<field>]': {
        description: 'Equality on an indexed field, the value read as the field\'s type (`true`/`false`, numbers, ISO datetimes). Several filters combine: all must hold.',
        schema: () => z.string(),
      },
      'filter[<field>][<op>]': {
        description: '`eq`, `gt`, `gte`, `lt`, `lte` (several ranges on one field combine) or `in` (1 to 20 comma-separated values) on an indexed field.',
        schema: () => z.string(),
      },
    },
    responses: { 200: { description: 'A page of records.', name: 'RecordList', schema: recordListSchema, example: { records: [LAMP], next_cursor: 'Q2dUb2tlbg' } } },
    errors: ['invalid_query', 'forbidden', 'database_not_found', 'collection_not_found'],
  },
  'data.records.get': {
    tag: 'Records',
    summary: 'Read a record',
    extension: true,
    description: `The record, its version in \`ETag\`. A record the view rule hides answers as a missing one, \`404 record_not_found\`; a credential the view rule can never let through is \`403 forbidden\`. ${BY_RULES}`,
    path: { database: DATABASE_PARAM, collection: COLLECTION_PARAM, id: RECORD_ID_PARAM },
    headers: { 'If-None-Match': { description: 'The `ETag` of a copy held: `304` while the record is still at that version.' } },
    responses: {
      200: { description: 'The record.', schema: recordViewSchema, headers: { ETag: ETAG }, example: LAMP },
      304: { description: 'The record is still at the version `If-None-Match` named; no body.', headers: { ETag: ETAG } },
    },
    errors: ['forbidden', 'database_not_found', 'collection_not_found', 'record_not_found'],
  },
  'data.records.update': {
    tag: 'Records',
    summary: 'Update a record',
    extension: true,
    description: `Sets the fields sent (\`null\` unsets one), the others kept; the answer is the record at \`version + 1\`. \`If-Match\` makes it conditional. ${BY_RULES}`,
    path: { database: DATABASE_PARAM, collection: COLLECTION_PARAM, id: RECORD_ID_PARAM },
    headers: { 'If-Match': IF_MATCH },
    body: { schema: updateRecordBodySchema, description: 'The fields to set, by name; `null` unsets one.', example: { price: 19.9 } },
    responses: { 200: { description: 'The record as updated.', schema: recordViewSchema, headers: { ETag: ETAG }, example: { ...LAMP, version: 2, updated_at: '2026-12-01T10:05:00.000Z', price: 19.9 } } },
    errors: [...RECORD_WRITE_ERRORS, 'record_not_found'],
  },
  'data.records.delete': {
    tag: 'Records',
    summary: 'Delete a record',
    extension: true,
    description: `\`If-Match\` makes it conditional. ${BY_RULES}`,
    path: { database: DATABASE_PARAM, collection: COLLECTION_PARAM, id: RECORD_ID_PARAM },
    headers: { 'If-Match': IF_MATCH },
    responses: { 204: { description: 'Deleted; no body.' } },
    errors: ['invalid_body', 'forbidden', 'database_not_found', 'collection_not_found', 'record_not_found', 'version_conflict'],
  },
  'data.batch': {
    tag: 'Records',
    summary: 'Apply a batch of record writes',
    description:
      "1 to 100 creates, updates and deletes applied in order in one transaction: all, or none; the first failing op is the answer. `version` makes an update or delete conditional (`409 version_conflict`); each op is checked against its collection's rule for it. An update or delete needs `id`; two ops on one record are `400 invalid_body`. Unique values are checked in order: a value an earlier op released is free for a later one. One transaction holds 100 storage writes and 4 MB: a batch past that is `400 batch_too_large` (docs/data/reference.md, \"Transactions and the batch limit\").",
    path: { database: DATABASE_PARAM },
    body: {
      name: 'BatchRequest',
      schema: batchBodySchema,
      example: {
        ops: [
          { op: 'create', collection: 'products', id: 'chair', data: { name: 'Chair', sku: 'CHR-1', price: 49, in_stock: true } },
          { op: 'update', collection: 'products', id: 'lamp', version: 1, data: { in_stock: false } },
          { op: 'delete', collection: 'products', id: 'mug' },
        ],
      },
    },
    responses: {
      200: {
        description: 'One result per op, in order.',
        name: 'BatchResults',
        schema: batchAnswerSchema,
        example: {
          results: [
            { id: 'chair', version: 1, created_at: SHOP_TIME, updated_at: SHOP_TIME, name: 'Chair', sku: 'CHR-1', price: 49, in_stock: true },
            { ...LAMP, version: 2, in_stock: false },
            { id: 'mug', deleted: true },
          ],
        },
      },
    },
    errors: [...RECORD_WRITE_ERRORS, 'batch_too_large', 'invalid_name', 'record_not_found', 'already_exists'],
  },
  'data.activity.list': {
    tag: 'Activity',
    summary: 'List the activity log',
    description:
      "Newest first: every call on the AI, Data and Events APIs, and the record and file events. The window defaults to the last 30 days. A cursor carries its query: send it alone (with `limit`, which may change), or with the filters it was made for. The kind and application filters apply after the read, so a page may hold fewer than `limit` items, even none, with a `next_cursor`. Server credentials only; an application-bound one sees its application's events.",
    query: activityQuerySchema,
    responses: {
      200: {
        description: 'A page of activity records.',
        name: 'ActivityPage',
        schema: activityPageSchema,
        example: {
          items: [
            {
              id: 'act_01JEXAMPLE0000000000000000',
              at_ms: 1796119200000,
              organization_id: 'org_0123456789',
              actor_kind: 'secret_key',
              actor_id: 'key_0123456789',
              source: 'data',
              kind: 'api.call',
              method: 'POST',
              route: '/v1/databases/{database}/collections/{collection}/records',
              status: 201,
              outcome: 'success',
              error_code: null,
              latency_ms: 4,
              file_id: null,
              file_sha256: null,
              file_size: null,
              content_type: null,
              file_name: null,
              related: { database: 'shop', collection_id: 'products', record_id: 'lamp' },
              bytes_in: 84,
              bytes_out: 170,
              country: null,
              request_id: 'req_01JEXAMPLE0000000000000000',
              operation_id: null,
            },
          ],
          next_cursor: null,
          archive_searched: false,
        },
      },
    },
    errors: ['invalid_query', 'forbidden'],
  },
};
