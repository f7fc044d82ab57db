/**
 * Typed clients of the platform's APIs: openapi-fetch over the types openapi-typescript made from the
 * API documents (src/generated/, written by `npm run openapi`). Every path, parameter, body and answer
 * is typed; an error answer comes back as `error` (`{error: {code, message, type, param}}`), never thrown.
 */
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { paths as AiPaths } from './generated/ai.js';
import type { paths as DataPaths } from './generated/data.js';
import type { paths as EventsPaths } from './generated/events.js';

export type { AiPaths, DataPaths, EventsPaths };
export type DataClient = Client<DataPaths>;
export type EventsClient = Client<EventsPaths>;
export type AiClient = Client<AiPaths>;
/** Helpers for the AI API's uploads, collections and vector database; they throw PlatformApiError (src/ai.ts). */
export * from './ai.js';

export interface ClientOptions {
  /** The API's base address: `npm start` prints it (`http://localhost:8081` for Data), a deployment's stack outputs name it. */
  baseUrl: string;
  /** A secret key (`aik_…`), an OAuth client's access token, or (Data) a publishable key or end-user token. */
  credential: string;
  /** A fetch of your own (a proxy, a test's); the global one by default. */
  fetch?: typeof fetch;
}

const options = (o: ClientOptions) => ({
  baseUrl: o.baseUrl.replace(/\/+$/, ''),
  headers: { authorization: `Bearer ${o.credential}` },
  ...(o.fetch ? { fetch: o.fetch } : {}),
});

/** The Data API: databases, collections, records, batches, files, the activity log. */
export const createDataClient = (o: ClientOptions): DataClient => createClient<DataPaths>(options(o));

/** The Events API: publish, subscriptions, pull and ack, dead letters, statistics. */
export const createEventsClient = (o: ClientOptions): EventsClient => createClient<EventsPaths>(options(o));

/**
 * The AI API's own routes (vector database, uploads, collections and their items). Every write carries
 * an `X-Operation-Id`: the one a call passes in `params.header`, else a fresh one, so a retry of the
 * same call object is the same operation (spec 4.1). For chat and embeddings use the official `openai`
 * SDK with `baseURL: <ai_url>/v1` (README).
 */
export function createAiClient(o: ClientOptions): AiClient {
  const client = createClient<AiPaths>(options(o));
  client.use(operationIds);
  return client;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const operationIds: Middleware = {
  onRequest({ request }) {
    if (WRITES.has(request.method) && !request.headers.has('x-operation-id')) request.headers.set('x-operation-id', `op_${crypto.randomUUID().replaceAll('-', '')}`);
    return request;
  },
};
