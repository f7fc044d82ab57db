/** The AI API's collection items (extensions of spec 4.9: add, list, read, delete, reprocess, chunks, package, vectors). */
import type { OperationDocs } from './operation.js';

export const AI_ITEMS_OPERATIONS: OperationDocs = {};
