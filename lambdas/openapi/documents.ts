/** The three documents `npm run openapi` writes (docs/openapi/<api>.json), each built from the route table. */
import type { Api } from '../shared/api.js';
import { buildDocument, type ApiInfo } from './document.js';
import type { OperationDocs } from './operation.js';
import { AI_GATEWAY_OPERATIONS } from './ai-gateway.js';
import { AI_ITEMS_OPERATIONS } from './ai-items.js';
import { AI_KNOWLEDGE_OPERATIONS } from './ai-knowledge.js';
import { AI_KNOWLEDGE_JOBS_OPERATIONS } from './ai-knowledge-jobs.js';
import { AI_OPENAI_OPERATIONS, OPENAI_TAG } from './ai-openai.js';
import { DATA_OPERATIONS } from './data.js';
import { DATA_FILES_OPERATIONS } from './data-files.js';
import { EVENTS_OPERATIONS } from './events.js';

export const API_INFO: Record<Api, ApiInfo> = {
  ai: {
    title: 'AI API',
    baseName: 'ai_url',
    localPort: 8080,
    tags: {
      'Model routes': 'The model routes enabled for the organization: what `model` names in a call (never a model name).',
      Chat: 'OpenAI-compatible chat completions over a chat route, streamed or whole.',
      Embeddings: 'OpenAI-compatible embeddings over an embedding route.',
      Runs: 'Structured decision runs and generic model runs over `/v1/run` routes.',
      'Vector database': "The workspace's vector database: ingest passages and search them by meaning (spec 4.6, 4.7), list and delete documents.",
      Uploads: 'Files of up to 5 GiB, announced, sent in parts and checked against their SHA-256, for the knowledge routes to use by id.',
      'Knowledge collections': 'Collections of files processed into cited chunks: create, read, query and chat over them (spec 4.9, 4.10).',
      'Knowledge jobs': 'A recording becomes a cited knowledge base: transcript, entries checked against their evidence, still frames; priced before any paid work (spec 4.8).',
      'Collection items': "A collection's files: add, read, reprocess, delete, and their chunks, package and vectors.",
      [OPENAI_TAG]:
        'An extension of the spec: OpenAI’s Files, Vector stores (with file batches and search) and Responses (with `file_search`) over uploads, `cloud` collections and chat routes, so the official SDKs work unchanged. No `X-Operation-Id` needed; an `Idempotency-Key` is honoured (docs/ai/openai-compatibility.md).',
    OAuth: 'The client credentials grant: an OAuth client of an application exchanges its id and secret for a short-lived access token.',
    },
    description:
      'OpenAI-compatible chat completions and embeddings over model routes, decision and generic runs, the vector database, uploads and knowledge collections. Every write takes an `X-Operation-Id`; every answer echoes it. Errors: `{"error": {"code", "message", "type", "param"}}`.',
  },
  data: {
    title: 'Data API',
    baseName: 'data_url',
    localPort: 8081,
    tags: {
    OAuth: 'The client credentials grant: an OAuth client of an application exchanges its id and secret for a short-lived access token.',
      Tokens: "End-user tokens an application's server mints for a signed-in person.",
      Databases: 'Databases of the organization or of an application (spec 4.12, 4.13).',
      Collections: "A database's collections: a typed schema or free JSON, with access rules (spec 4.14).",
      Records: 'Versioned records: create, read, list with filters and sorts, update and delete with If-Match, atomic batches (spec 4.15, 4.16).',
      Files: 'Files stored under their SHA-256: single PUTs up to 100 MiB and multipart uploads up to 5 GiB (spec 4.17 to 4.19).',
      Activity: 'The activity log of API calls and record and file events (spec 4.20).',
    },
    description:
      'Databases, typed or free collections, versioned records, atomic batches, files stored under their SHA-256 and an activity log. Browsers call it with a publishable key or an end-user token (CORS preflights are answered on every path). Errors: `{"error": {"code", "message", "type", "param"}}`.',
  },
  events: {
    title: 'Events API',
    baseName: 'events_url',
    localPort: 8082,
    tags: {
    OAuth: 'The client credentials grant: an OAuth client of an application exchanges its id and secret for a short-lived access token.',
      Events: 'Publish events to a workspace (spec 4.21).',
      Subscriptions: 'Subscriptions by type pattern, delivered by webhook, pull or WebSocket stream (or EventBridge), with signing secrets.',
      Inbox: "Pull and acknowledge a pull or websocket subscription's messages.",
      Streams: "A subscription's WebSocket stream.",
      'Dead letters': 'Events whose webhook deliveries ran out of retries: list and replay.',
      Statistics: "The workspace's delivery statistics.",
    },
    description:
      'Publish events and deliver them by webhook, pull or WebSocket stream, with retries, dead letters, replay and workspace statistics. At-least-once delivery. Errors: `{"error": {"code", "message", "type", "param"}}`.',
  },
};

export const OPERATIONS: Record<Api, () => OperationDocs> = {
  ai: () => ({ ...AI_GATEWAY_OPERATIONS, ...AI_KNOWLEDGE_OPERATIONS, ...AI_ITEMS_OPERATIONS, ...AI_KNOWLEDGE_JOBS_OPERATIONS, ...AI_OPENAI_OPERATIONS }),
  data: () => ({ ...DATA_OPERATIONS, ...DATA_FILES_OPERATIONS }),
  events: () => EVENTS_OPERATIONS,
};

export const makeDocument = (api: Api, options: { partial?: boolean } = {}) => buildDocument(api, API_INFO[api], OPERATIONS[api](), options);
