/** The AI API's uploads, vector database (spec 4.6, 4.7) and knowledge collections (spec 4.9, 4.10, and the extensions: reading, chat). */
import type { OperationDocs } from './operation.js';

export const AI_KNOWLEDGE_OPERATIONS: OperationDocs = {};
