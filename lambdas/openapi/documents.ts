/** The three documents `npm run openapi` writes (docs/openapi/<api>.json), each built from the route table. */
import type { Api } from '../shared/api.js';
import { buildDocument, type ApiInfo } from './document.js';
import type { OperationDocs } from './operation.js';
import { AI_GATEWAY_OPERATIONS } from './ai-gateway.js';
import { AI_ITEMS_OPERATIONS } from './ai-items.js';
import { AI_KNOWLEDGE_OPERATIONS } from './ai-knowledge.js';
import { DATA_OPERATIONS } from './data.js';
import { DATA_FILES_OPERATIONS } from './data-files.js';
import { EVENTS_OPERATIONS } from './events.js';

export const API_INFO: Record<Api, ApiInfo> = {
  ai: {
    title: 'AI API',
    baseName: 'ai_url',
    localPort: 8080,
    description:
      'OpenAI-compatible chat completions and embeddings over model routes, decision and generic runs, the vector database, uploads and knowledge collections. Every write takes an `X-Operation-Id`; every answer echoes it. Errors: `{"error": {"code", "message", "type", "param"}}`.',
  },
  data: {
    title: 'Data API',
    baseName: 'data_url',
    localPort: 8081,
    description:
      'Databases, typed or free collections, versioned records, atomic batches, files stored under their SHA-256 and an activity log. Browsers call it with a publishable key or an end-user token (CORS preflights are answered on every path). Errors: `{"error": {"code", "message", "type", "param"}}`.',
  },
  events: {
    title: 'Events API',
    baseName: 'events_url',
    localPort: 8082,
    description:
      'Publish events and deliver them by webhook, pull or WebSocket stream, with retries, dead letters, replay and workspace statistics. At-least-once delivery. Errors: `{"error": {"code", "message", "type", "param"}}`.',
  },
};

export const OPERATIONS: Record<Api, () => OperationDocs> = {
  ai: () => ({ ...AI_GATEWAY_OPERATIONS, ...AI_KNOWLEDGE_OPERATIONS, ...AI_ITEMS_OPERATIONS }),
  data: () => ({ ...DATA_OPERATIONS, ...DATA_FILES_OPERATIONS }),
  events: () => EVENTS_OPERATIONS,
};

export const makeDocument = (api: Api, options: { partial?: boolean } = {}) => buildDocument(api, API_INFO[api], OPERATIONS[api](), options);
