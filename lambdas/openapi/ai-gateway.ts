/** The AI API's gateway routes (spec 4.2 to 4.5): models, chat completions, embeddings, runs, and its OAuth token route. */
import type { OperationDocs } from './operation.js';

export const AI_GATEWAY_OPERATIONS: OperationDocs = {};
