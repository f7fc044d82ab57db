/**
 * `POST /v1/responses` (docs/ai/openai-compatibility.md, "Responses"; docs/decisions/openai-responses.md):
 * OpenAI's Responses API over a chat route. The body becomes a chat body checked by chat's own rules
 * (response-input.ts); with a `file_search` tool the vector stores are searched once with the last user
 * message's text and the answer is grounded exactly as a collection's grounded chat is (groundWith), its
 * `[n]` markers turned into `file_citation` annotations (citations.ts). The model call is chat's
 * (gateway.ts): route, limits, budget, usage and activity. Unless `store: false` the response is kept
 * 24 hours (response-store.ts) for GET and `previous_response_id`.
 */
import * as z from 'zod/mini';
import type { Principal } from '../../auth/principal.js';
import type { Engine } from '../../engine/ports.js';
import { checkCollectionsEnabled } from '../../knowledge/collections.js';
import { readCollection } from '../../knowledge/collection-records.js';
import type { ChunkMatch } from '../../knowledge/chunk-index.js';
import { groundWith, retrievalText, type GroundedCall } from '../../knowledge/grounded-chat.js';
import { PlatformError } from '../../shared/errors.js';
import { holdMs } from '../../shared/hold-margin.js';
import type { OperationCall } from '../../shared/operations.js';
import { onFirstUse } from '../../shared/validate.js';
import { outputCeiling, parseChatRequest, resolveRoute, upstreamChatBody, type ChatRequest } from '../chat.js';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimateChat } from '../estimate.js';
import { chatCompletion, chatStream, type CallScope } from '../gateway.js';
import { ModelRoutes, timeoutOf, type ModelRoute } from '../model-routes.js';
import { AiOrgSettings } from '../org-settings.js';
import { checkReplay, type OperationContext } from '../operations.js';
import { CitationStripper, type CitationSource } from './citations.js';
import { newCompatId } from './ids.js';
import { messageItem, responseEvents, responseUsage, type FileSearchCallItem, type ResponseEvent, type ResponseObject } from './response-events.js';
import { chatBodyOf, readResponsesRequest, type ChatMessage, type ReadRequest } from './response-input.js';
import { keepResponse, previousHistory, storedJson, type StoredResponse } from './response-store.js';
import { searchVectorStores } from './search.js';

export const RESPONSES_ENDPOINT = '/v1/responses';
/** The search's share of the operation id's hold, beside the chat route's timeout (a collection query's). */
const SEARCH_HOLD_MS = 30_000;

export interface PreparedResponse {
  id: string;
  read: ReadRequest;
  /** The chat request the answer is made with (parseChatRequest's). */
  chat: ChatRequest;
  route: ModelRoute;
  /** The stored conversation `previous_response_id` continues ([] without it). */
  history: ChatMessage[];
  /** The call's claim on its Idempotency-Key: kept answers replay only to a caller that could make this call. */
  operation: OperationCall<OperationContext>;
}

/**
 * Reads the body and resolves everything a refusal may come from before any upstream call: the
 * `knowledge` capability and each vector store with `file_search` (404 for another workspace's), the
 * previous response, chat's rules and the route (400 model_not_allowed, 403 route_forbidden).
 */
export async function prepareResponse(engine: Engine, principal: Principal, body: unknown): Promise<PreparedResponse> {
  const read = readResponsesRequest(body);
  if (read.fileSearch) {
    // The route needs ai.chat (the chain checks it); searching vector stores needs knowledge too.
    if (principal.capabilities !== null && !principal.capabilities.includes('knowledge')) {
      throw new PlatformError('capability_not_enabled', 'This application has not enabled the "knowledge" capability, which the file_search tool needs.');
    }
    await checkCollectionsEnabled(engine, principal);
    for (const id of read.fileSearch.collectionIds) await readCollection(engine, principal, id);
  }
  const org = principal.organizationId;
  const now = () => engine.clock.now();
  const [history, aiSettings, routes] = await Promise.all([
    read.request.previous_response_id ? previousHistory(engine, principal, read.request.previous_response_id) : Promise.resolve([]),
    new AiOrgSettings(engine.kv, now).get(org),
    new ModelRoutes(engine.kv, now).list(org),
  ]);
  const chat = parseChatRequest(chatBodyOf(read, history, read.request.stream === true), aiSettings.granted_fields);
  if (read.fileSearch) searchQuery(read.input); // no text to search with: 400 before anything runs
  const route = await resolveRoute(engine, principal, routes, chat.model, '/v1/chat/completions');
  const context: OperationContext = { endpoint: RESPONSES_ENDPOINT, route: route.id, application: principal.applicationId, capability: 'ai.chat' };
  const operation: OperationCall<OperationContext> = {
    tenant: org,
    holdSeconds: holdMs(timeoutOf(route) + (read.fileSearch ? SEARCH_HOLD_MS : 0)) / 1000,
    context,
    checkReplay: (kept) => checkReplay(engine, principal, context, kept),
  };
  return { id: newCompatId('resp', engine.clock.now()), read, chat, route, history, operation };
}

/** The response before any output: what `response.created` carries, and the frame of the final one. */
function startOf(engine: Engine, p: PreparedResponse): ResponseObject {
  const r = p.read.request;
  return {
    id: p.id,
    object: 'response',
    created_at: Math.floor(engine.clock.now() / 1000),
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    instructions: r.instructions ?? null,
    metadata: r.metadata ?? null,
    model: p.route.id,
    output: [],
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    temperature: r.temperature ?? null,
    tool_choice: r.tool_choice ?? 'auto',
    tools: r.tools ?? [],
    top_p: r.top_p ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    previous_response_id: r.previous_response_id ?? null,
    store: r.store !== false,
    text: { format: r.text?.format ?? { type: 'text' }, ...(r.text?.verbosity ? { verbosity: r.text.verbosity } : {}) },
    truncation: r.truncation ?? 'disabled',
  };
}

interface Searched {
  item: FileSearchCallItem;
  sources: CitationSource[];
  matches: ChunkMatch[];
}

/** What `file_search` searches with: the last user message's text (grounded chat's rule); 400 on `input` without one. */
function searchQuery(input: readonly ChatMessage[]): string {
  try {
    return retrievalText(input);
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'invalid_messages') throw new PlatformError('invalid_body', 'input holds no user text for file_search to search with.', 'input');
    throw error;
  }
}

/** The one search of a `file_search` call: the last user message's text over every listed store. */
async function search(engine: Engine, principal: Principal, p: PreparedResponse, signal?: AbortSignal): Promise<Searched> {
  const plan = p.read.fileSearch!;
  const query = searchQuery(p.read.input);
  const found = await searchVectorStores(engine, principal, {
    collectionIds: plan.collectionIds,
    queries: [query],
    filters: plan.filters,
    maxResults: plan.maxResults,
    scoreThreshold: plan.scoreThreshold,
    signal,
  });
  const textOf = (r: (typeof found.results)[number]) => r.content.map((c) => c.text).join('\n');
  return {
    item: {
      id: newCompatId('fs', engine.clock.now()),
      type: 'file_search_call',
      status: 'completed',
      queries: [query],
      results: plan.includeResults ? found.results.map((r) => ({ file_id: r.file_id, filename: r.filename, score: r.score, text: textOf(r), attributes: r.attributes })) : null,
      indexing: found.indexing,
    },
    sources: found.results.map((r) => ({ file_id: r.file_id, filename: r.filename, citation: r.citation })),
    matches: found.results.map((r) => ({ score: r.score, text: textOf(r), citation: r.citation })),
  };
}

/** The upstream chat call: grounded in the search's passages, or chat's own without the tool. */
async function upstreamCall(engine: Engine, principal: Principal, p: PreparedResponse, searched: Searched | undefined): Promise<GroundedCall> {
  if (searched) return groundWith(engine, principal, p.route, p.chat, searched.matches);
  const body = await upstreamChatBody(engine, principal.organizationId, p.route, p.chat);
  const estimate = estimateChat(p.chat.messages, outputCeiling(p.route, p.chat) ?? DEFAULT_MAX_OUTPUT_TOKENS, [p.chat.response_format]);
  return { body, estimate };
}

/**
 * Keeps the finished response unless `store: false` (or its record would be over MAX_STORED_BYTES:
 * then answered with `store: false`), before it leaves.
 */
async function finish(engine: Engine, principal: Principal, p: PreparedResponse, response: ResponseObject, text: string): Promise<ResponseObject> {
  if (!response.store) return response;
  const record: StoredResponse = {
    status: 200,
    body: response as unknown as StoredResponse['body'],
    context: { application: principal.applicationId, route: p.route.id, history: [...p.history, ...p.read.input, { role: 'assistant', content: text }] },
  };
  const json = storedJson(record);
  if (json === undefined) return { ...response, store: false };
  await keepResponse(engine, principal, record, json);
  return response;
}

/** The non-streamed answer. */
export async function createResponse(scope: CallScope, p: PreparedResponse): Promise<ResponseObject> {
  const { engine, principal } = scope;
  const searched = p.read.fileSearch ? await search(engine, principal, p) : undefined;
  const call = await upstreamCall(engine, principal, p, searched);
  const completion = await chatCompletion(scope, p.route, call.body, call.estimate);
  const choice = completion.choices?.[0];
  const content = choice?.message?.content;
  const text = CitationStripper.strip(typeof content === 'string' ? content : '', searched?.sources ?? []);
  const incomplete = choice?.finish_reason === 'length';
  const response: ResponseObject = {
    ...startOf(engine, p),
    status: incomplete ? 'incomplete' : 'completed',
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    output: [...(searched ? [searched.item] : []), messageItem(newCompatId('msg', engine.clock.now()), text, incomplete ? 'incomplete' : 'completed')],
    usage: responseUsage(completion.usage),
  };
  return finish(engine, principal, p, response, text.text);
}

/**
 * The streamed answer (response-events.ts). The search and the chat's first chunk come before it is
 * returned, so their failures answer a status, not a broken stream.
 */
export async function responseStream(engine: Engine, principal: Principal, p: PreparedResponse, signal: AbortSignal): Promise<AsyncGenerator<ResponseEvent>> {
  const searched = p.read.fileSearch ? await search(engine, principal, p, signal) : undefined;
  const call = await upstreamCall(engine, principal, p, searched);
  // Usage always asked for: the response's `usage` carries it.
  const chunks = await chatStream({ engine, principal, signal }, p.route, call.body, call.estimate, true);
  return responseEvents({
    start: startOf(engine, p),
    search: searched?.item,
    messageId: newCompatId('msg', engine.clock.now()),
    chunks,
    stripper: new CitationStripper(searched?.sources ?? []),
    finish: (response, text) => finish(engine, principal, p, response, text),
  });
}

// --- What the API documents say of the answers (lambdas/openapi/ai-openai.ts).

const fileCitationSchema = () =>
  z.looseObject({
    type: z.literal('file_citation'),
    file_id: z.string(),
    filename: z.string(),
    index: z.int().check(z.describe('Where the `[n]` marker stood in `text` (UTF-16 offset); the marker itself is taken out.')),
    citation: z.optional(z.looseObject({ collection_id: z.string(), item_id: z.string(), package_id: z.string(), chunk_id: z.string(), locator: z.string() }).check(z.describe('Ours: the passage down to its page, heading or time range.'))),
  });

const outputItemSchema = () =>
  z.union([
    z.looseObject({
      id: z.string(),
      type: z.literal('file_search_call'),
      status: z.string(),
      queries: z.array(z.string()),
      results: z.nullable(z.array(z.looseObject({ file_id: z.string(), filename: z.string(), score: z.number(), text: z.string(), attributes: z.nullable(z.record(z.string(), z.unknown())) }))),
      indexing: z.optional(z.record(z.string(), z.unknown()).check(z.describe('Ours: per vector store, how much of it the search covered.'))),
    }),
    z.looseObject({
      id: z.string(),
      type: z.literal('message'),
      role: z.literal('assistant'),
      status: z.string(),
      content: z.array(z.looseObject({ type: z.literal('output_text'), text: z.string(), annotations: z.array(fileCitationSchema()) })),
    }),
  ]);

export const responseObjectSchema = onFirstUse(() =>
  z.looseObject({
    id: z.string().check(z.describe('`resp_` and 32 hex digits.')),
    object: z.literal('response'),
    created_at: z.int(),
    status: z.enum(['in_progress', 'completed', 'incomplete', 'failed']),
    error: z.nullable(z.looseObject({ code: z.string(), message: z.string() })),
    incomplete_details: z.nullable(z.looseObject({ reason: z.string() })),
    instructions: z.nullable(z.string()),
    metadata: z.nullable(z.record(z.string(), z.string())),
    model: z.string().check(z.describe('The chat route id.')),
    output: z.array(outputItemSchema()).check(z.describe('With `file_search`: the `file_search_call`, then the assistant `message`; without: the message.')),
    parallel_tool_calls: z.boolean(),
    temperature: z.nullable(z.number()),
    tool_choice: z.unknown(),
    tools: z.array(z.unknown()),
    top_p: z.nullable(z.number()),
    max_output_tokens: z.nullable(z.int()),
    previous_response_id: z.nullable(z.string()),
    store: z.boolean().check(z.describe('`false` also when the conversation was too long to keep (over 300,000 characters).')),
    text: z.looseObject({ format: z.looseObject({ type: z.string() }) }),
    truncation: z.string(),
    usage: z.optional(
      z.looseObject({
        input_tokens: z.int(),
        input_tokens_details: z.looseObject({ cached_tokens: z.int() }),
        output_tokens: z.int(),
        output_tokens_details: z.looseObject({ reasoning_tokens: z.int() }),
        total_tokens: z.int(),
      }),
    ),
  }),
);

export const responseEventSchema = onFirstUse(() =>
  z
    .looseObject({ type: z.string(), sequence_number: z.int() })
    .check(
      z.describe(
        'One event (`event: <type>` then this JSON on a `data:` line): `response.created`, `response.in_progress`, with `file_search` the search item’s `response.output_item.added`, `response.file_search_call.in_progress|searching|completed`, `response.output_item.done`; then the message’s `response.output_item.added`, `response.content_part.added`, `response.output_text.delta` and `response.output_text.annotation.added`, `response.output_text.done`, `response.content_part.done`, `response.output_item.done`, and `response.completed` (or `response.incomplete`). An upstream failure part-way: `error` then `response.failed`. No `data: [DONE]`.',
      ),
    ),
);

export const responseDeletedSchema = onFirstUse(() => z.strictObject({ id: z.string(), object: z.literal('response'), deleted: z.literal(true) }));
