/**
 * The AI API's OpenAI compatibility routes (issue 38; docs/ai/openai-compatibility.md): Files, Vector
 * stores with their files and file batches, search, and the Responses API with `file_search`. An
 * extension of the spec: the objects are OpenAI's, the errors ours in OpenAI's shape. Each part is its
 * own block so the parts are written apart.
 */
import type { OperationDocs } from './operation.js';

export const OPENAI_TAG = 'OpenAI compatibility';

// --- Files
const FILES: OperationDocs = {};
// --- Vector stores, their files and file batches
const VECTOR_STORES: OperationDocs = {};
// --- Vector store search
const SEARCH: OperationDocs = {};
// --- Responses
const RESPONSES: OperationDocs = {};

export const AI_OPENAI_OPERATIONS: OperationDocs = { ...FILES, ...VECTOR_STORES, ...SEARCH, ...RESPONSES };
