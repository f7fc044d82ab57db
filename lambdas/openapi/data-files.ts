/** The Data API's files: blobs under their SHA-256 (spec 4.17, 4.18) and multipart uploads (spec 4.19). */
import type { OperationDocs } from './operation.js';

export const DATA_FILES_OPERATIONS: OperationDocs = {};
