/** The Data API's files: blobs under their SHA-256 (spec 4.17, 4.18) and multipart uploads (spec 4.19); docs/data/blobs.md. */
import * as z from 'zod/mini';
import {
  blobExistsSchema,
  blobSchema,
  completeUploadBodySchema,
  MAX_PARTS,
  SHA256_PATTERN,
  UPLOAD_ID_PATTERN,
  uploadCreatedSchema,
  uploadedPartSchema,
} from '../data/blobs.js';
import type { ContentDoc, HeaderDoc, OperationDoc, OperationDocs, ParameterDoc, ResponseDoc } from './operation.js';
import { DATABASE_PARAM } from './data.js';

const SHA = 'a3f1c1e3b4f1b5d0c27a33d5aa7e4bc1e1c0c2e5d8a2f9e3f1a76c8b0d7e5f42';
const UPLOAD_ID = 'upl_01kd9x7q3m2c8v5t0w4e6r1y9b';
const PART_ETAG = '5d41402abc4b2a76b9719d911017c592';

const SHA256_PARAM: ParameterDoc = {
  description: 'The file: the SHA-256 of its bytes, 64 lowercase hex characters.',
  schema: () => z.string().check(z.regex(SHA256_PATTERN)),
  example: SHA,
};
const UPLOAD_ID_PARAM: ParameterDoc = {
  description: 'The upload `POST .../uploads` answered (`upl_` and 26 characters); unknown under any other organization, database or file (`404 upload_not_found`).',
  schema: () => z.string().check(z.regex(UPLOAD_ID_PATTERN)),
  example: UPLOAD_ID,
};
const PART_NUMBER_PARAM: ParameterDoc = {
  description: `The part number, 1 to ${MAX_PARTS} in decimal without a leading zero (else \`400 invalid_part\`). Sending a number again replaces that part.`,
  // A string in the path: 1 to 10000 exactly.
  schema: () => z.string().check(z.regex(/^(?:[1-9]\d{0,3}|10000)$/)),
  example: '1',
};

/** Raw bodies are taken whatever their Content-Type says (the handlers stream the bytes as they are). */
const ANY_TYPE: ContentDoc[] = [{ contentType: '*/*' }];

const decimal = () => z.string().check(z.regex(/^\d{1,16}$/));

/** A raw body's headers (single PUT and part PUT): the handler reads Content-Length, Upload-Length and Content-Type. */
const rawBodyHeaders = (what: string): Record<string, HeaderDoc> => ({
  'Content-Length': {
    description: `The size of ${what} in bytes, required (\`411 length_required\` without it, as for a chunked body; HTTP clients send it for a body of known length), over 100 MiB is \`413 payload_too_large\` before a byte is read; bytes that do not add up to it are \`400 hash_mismatch\` and nothing is kept.`,
    // Required by the platform, but not marked so: every HTTP client sets it from a body of known length,
    // and generated clients would otherwise ask their callers for it.
    schema: decimal,
  },
  'Upload-Length': {
    description:
      'Announces the body instead of sending it (sent with no body): where the bytes go straight to the blob store (AWS, over the function limit) the answer is a `307` to where to send them; where they would come here anyway (locally, a small body) it is `411 length_required`. A value that is not a whole number of bytes is no announcement, and ignored (docs/data/blobs.md, "Large files on AWS").',
    // Any text: a malformed value is ignored, not refused (the fuzzer sent `A` and got the file stored).
  },
});

/** A 307 (lambdas/http/redirect.ts): on AWS a body over what a function carries goes around it. */
const redirect = (way: 'upload' | 'download'): ResponseDoc => ({
  description:
    (way === 'upload'
      ? 'On AWS only, a body (or an `Upload-Length` announcement) over the function limit (about 4.45 MiB): send the same PUT with the bytes, without this API’s `Authorization`, to `Location`'
      : 'On AWS only, a file over the function limit (about 4.45 MiB): fetch it, without this API’s `Authorization`, from `Location`') +
    ', a presigned blob store URL that works for up to 15 minutes (docs/data/blobs.md, "Large files on AWS"). The local server never answers it.',
  headers: {
    Location: { description: 'The presigned blob store URL.', required: true, schema: () => z.string().check(z.minLength(1)) },
    'Cache-Control': { description: '`no-store`: the URL expires.', schema: () => z.literal('no-store') },
  },
});

/** What a download and a HEAD carry: the bytes are immutable, so the SHA-256 is the ETag. */
const DOWNLOAD_HEADERS: Record<string, HeaderDoc> = {
  'Content-Length': { description: 'The file’s size in bytes.', required: true, schema: decimal },
  ETag: { description: 'The file’s SHA-256 in quotes: `"<sha256>"`.', required: true, schema: () => z.string().check(z.regex(/^"[0-9a-f]{64}"$/)) },
};

const BLOB_EXAMPLE = { sha256: SHA, size: 33 };
const FILE_ERRORS = ['database_not_found', 'blob_not_found', 'forbidden'] as const;

const get: OperationDoc = {
  tag: 'Files',
  summary: 'Download a file',
  description:
    'The file’s bytes, streamed whole (no `Range` requests). A browser credential (publishable key, end-user token) reads a file only when a record it may view references it in a `blob` field; otherwise it is `404 blob_not_found`, as for a missing file. A path `sha256` that is not 64 lowercase hex is `404 blob_not_found` too.',
  extension: true,
  path: { database: DATABASE_PARAM, sha256: SHA256_PARAM },
  responses: {
    200: { description: 'The bytes.', contentType: 'application/octet-stream', headers: DOWNLOAD_HEADERS },
    307: redirect('download'),
  },
  errors: ['database_not_found', 'blob_not_found'],
};

export const DATA_FILES_OPERATIONS: OperationDocs = {
  'data.blobs.put': {
    tag: 'Files',
    summary: 'Store a file',
    description:
      'The body is the file’s raw bytes, at most 100 MiB (larger files: a multipart upload). They are streamed, hashed and kept only if they hash to the path’s SHA-256 and add up to `Content-Length`; otherwise `400 hash_mismatch` and nothing is stored. 201 when stored, 200 when the file was already there (the body is still read and checked). A browser credential may upload only when some collection of the database with a `blob` field has a create or update rule open to it (else `403 forbidden`).',
    path: { database: DATABASE_PARAM, sha256: SHA256_PARAM },
    headers: rawBodyHeaders('the file'),
    // OpenAPI ignores a Content-Type header parameter: the body's description says what the handler does with it.
    body: {
      contentType: 'application/octet-stream',
      description: 'The file’s raw bytes (none with `Upload-Length`), of any `Content-Type`: it reaches the file hooks as the file’s type but is not stored (a download is always `application/octet-stream`).',
      alternatives: ANY_TYPE,
    },
    responses: {
      201: { description: 'Stored.', name: 'Blob', schema: blobSchema, example: BLOB_EXAMPLE },
      200: { description: 'It was already stored.', name: 'Blob', schema: blobSchema, example: BLOB_EXAMPLE },
      307: redirect('upload'),
    },
    // rate_limited (common): also 100 announced uploads of one file not yet sent.
    errors: ['invalid_name', 'hash_mismatch', 'length_required', 'database_not_found', 'forbidden'],
  },
  'data.blobs.get': get,
  'data.blobs.head': {
    tag: 'Files',
    summary: 'A file’s size and ETag',
    description: 'The download’s headers and no body: whether the file is stored, and its size. Read access as for the download.',
    extension: true,
    path: { database: DATABASE_PARAM, sha256: SHA256_PARAM },
    responses: { 200: { description: 'The file is stored (no body).', headers: DOWNLOAD_HEADERS } },
    errors: ['database_not_found', 'blob_not_found'],
  },
  'data.blobs.delete': {
    tag: 'Files',
    summary: 'Delete a file',
    description:
      'Records that still name the file in a `blob` field are not checked. A browser credential deletes a file only when it may update every record that references it (`403 forbidden` otherwise; `404 blob_not_found` when it may view none of them).',
    path: { database: DATABASE_PARAM, sha256: SHA256_PARAM },
    responses: { 204: { description: 'Deleted (no body).' } },
    errors: FILE_ERRORS,
  },
  'data.uploads.create': {
    tag: 'Files',
    summary: 'Open a multipart upload',
    description:
      'For files up to 5 GiB: open an upload, send its parts (`PUT .../parts/{n}`), then complete it. No body. An unfinished upload is forgotten after 7 days. Uploading rights as for the single PUT.',
    path: { database: DATABASE_PARAM, sha256: SHA256_PARAM },
    responses: {
      201: { description: 'Opened.', name: 'MultipartUpload', schema: uploadCreatedSchema, example: { upload_id: UPLOAD_ID } },
      200: { description: 'The file is already stored: nothing to upload.', name: 'BlobExists', schema: blobExistsSchema, example: { sha256: SHA, exists: true } },
    },
    errors: ['invalid_name', 'database_not_found', 'forbidden'],
  },
  'data.uploads.part': {
    tag: 'Files',
    summary: 'Send one part of a multipart upload',
    description:
      'The part’s raw bytes: 5 MiB to 100 MiB, except the last part, which may be smaller (checked at complete). Sending a part number again replaces that part. Keep the answer’s `etag` (also its `ETag` header, the only place it is when the part was redirected to the blob store). Spec 4.19 (its answer is this platform’s).',
    path: { database: DATABASE_PARAM, sha256: SHA256_PARAM, upload_id: UPLOAD_ID_PARAM, n: PART_NUMBER_PARAM },
    headers: rawBodyHeaders('the part'),
    body: { contentType: 'application/octet-stream', description: 'The part’s raw bytes (none with `Upload-Length`), of any `Content-Type`.', alternatives: ANY_TYPE },
    responses: {
      200: {
        description: 'The part is kept.',
        name: 'UploadedPart',
        schema: uploadedPartSchema,
        example: { part_number: 1, size: 5242880, etag: PART_ETAG },
        headers: { ETag: { description: 'The part’s etag, in quotes.', required: true } },
      },
      307: redirect('upload'),
    },
    errors: ['invalid_part', 'length_required', 'hash_mismatch', 'upload_not_found', ...FILE_ERRORS],
  },
  'data.uploads.complete': {
    tag: 'Files',
    summary: 'Complete a multipart upload',
    description:
      'Lists the parts to join, ascending by `part_number`, each once, with the etag its upload answered. The list is checked against the parts received (`400 invalid_part`, `part_too_small`: the upload stays open to correct the call), the parts are joined, then the whole file’s SHA-256 and size are checked against the path and `size`: a mismatch is `400 hash_mismatch`, nothing is kept and the upload is used up. Of concurrent completes and aborts one goes on; the others are `404 upload_not_found`. A file over 5 GiB is `413 payload_too_large`. Spec 4.19 (its body and answer are this platform’s).',
    path: { database: DATABASE_PARAM, sha256: SHA256_PARAM, upload_id: UPLOAD_ID_PARAM },
    body: {
      name: 'CompleteUpload',
      schema: completeUploadBodySchema,
      example: { parts: [{ part_number: 1, etag: PART_ETAG }, { part_number: 2, etag: '7215ee9c7d9dc229d2921a40e899ec5f' }], size: 5242913 },
    },
    responses: {
      201: { description: 'The file is stored.', name: 'Blob', schema: blobSchema, example: { sha256: SHA, size: 5242913 } },
      200: { description: 'The file was stored meanwhile (by another call).', name: 'Blob', schema: blobSchema, example: { sha256: SHA, size: 5242913 } },
    },
    errors: ['unknown_field', 'invalid_part', 'part_too_small', 'hash_mismatch', 'upload_not_found', ...FILE_ERRORS],
  },
  'data.uploads.abort': {
    tag: 'Files',
    summary: 'Abort a multipart upload',
    description: 'Drops the upload and its parts; the upload id is then `404 upload_not_found`.',
    extension: true,
    path: { database: DATABASE_PARAM, sha256: SHA256_PARAM, upload_id: UPLOAD_ID_PARAM },
    responses: { 204: { description: 'Aborted (no body).' } },
    errors: ['upload_not_found', ...FILE_ERRORS],
  },
};
