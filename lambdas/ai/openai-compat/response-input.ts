/**
 * `POST /v1/responses`'s body (docs/ai/openai-compatibility.md, "Responses"): OpenAI's Responses
 * request read into a chat body, which then goes through chat's own parse (parseChatRequest), so
 * chat's rules (grants, derived end-user fields, text and image caps, unsupported fields) are written
 * once. What has no chat counterpart (the `file_search` tool, `include`, `store`,
 * `previous_response_id`, `metadata`) is read here. Fields OpenAI has and we do not serve are 400
 * `unsupported_field`, never ignored silently.
 */
import * as z from 'zod/mini';
import { PlatformError } from '../../shared/errors.js';
import { onFirstUse, parseBody, isJsonObject } from '../../shared/validate.js';
import { parseFilters, type AttributeFilter } from './filters.js';
import { DEFAULT_SEARCH_RESULTS, MAX_SEARCH_RESULTS } from './search.js';
import { collectionIdOf } from './ids.js';
import { metadataSchema } from './http.js';
import { parseMetadata } from './attributes.js';

/** Input items a request may hold (OpenAI sets no number; a conversation longer than this is sent by `previous_response_id`). */
export const MAX_INPUT_ITEMS = 1000;
/** Vector stores one `file_search` tool may search (OpenAI's bound). */
export const MAX_VECTOR_STORES = 10;
/** Results `file_search` hands the model at most, and by default: the vector store search's (OpenAI's). */
export const MAX_NUM_RESULTS = MAX_SEARCH_RESULTS;
export const DEFAULT_NUM_RESULTS = DEFAULT_SEARCH_RESULTS;
/** The one `include` value served: the search's results on the `file_search_call` item. */
export const INCLUDE_RESULTS = 'file_search_call.results';

/** A chat message as chat.ts parses it (role and content). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string | Array<{ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string } }>;
}

const fileSearchToolSchema = onFirstUse(() =>
  z.strictObject({
    type: z.literal('file_search'),
    vector_store_ids: z.array(z.string().check(z.minLength(1), z.maxLength(200))).check(z.minLength(1), z.maxLength(MAX_VECTOR_STORES), z.describe(`1 to ${MAX_VECTOR_STORES} vector store ids (\`vs_…\`) of this workspace.`)),
    filters: z.optional(z.nullable(z.record(z.string(), z.unknown()).check(z.describe('A comparison or compound filter on the files’ attributes, as the vector store search takes it.')))),
    max_num_results: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_NUM_RESULTS), z.describe(`Passages handed to the model, 1 to ${MAX_NUM_RESULTS}; default ${DEFAULT_NUM_RESULTS}.`))),
    ranking_options: z.optional(
      z.strictObject({
        ranker: z.optional(z.enum(['none', 'auto', 'default-2024-11-15'])),
        score_threshold: z.optional(z.number().check(z.minimum(0), z.maximum(1))),
        hybrid_search: z.optional(z.record(z.string(), z.unknown())),
      }),
    ),
  }),
);

const textFormatSchema = () =>
  z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('text') }),
    z.strictObject({ type: z.literal('json_object') }),
    z.strictObject({ type: z.literal('json_schema'), name: z.string().check(z.minLength(1), z.maxLength(64)), schema: z.record(z.string(), z.unknown()), description: z.optional(z.string()), strict: z.optional(z.nullable(z.boolean())) }),
  ]);

/**
 * The request's fields. `input` items are read one by one (readInput) to name the item at fault; chat's
 * own limits (text, images, grants) apply to the chat body made from them.
 */
export const responsesRequestSchema = onFirstUse(() =>
  z.strictObject({
    model: z.optional(z.string().check(z.minLength(1), z.describe('A chat route id of the organization (GET /v1/models); `auto` or absent: its default chat route.'))),
    input: z.union([
      z.string(),
      z
        .array(z.record(z.string(), z.unknown()))
        .check(
          z.maxLength(MAX_INPUT_ITEMS),
          z.describe(`Up to ${MAX_INPUT_ITEMS} items: messages (\`user\`, \`system\`, \`developer\`, \`assistant\`; content a string or \`input_text\`/\`input_image\` parts, an assistant’s \`output_text\`), and earlier \`file_search_call\` and \`reasoning\` items, which are skipped.`),
        ),
    ]),
    instructions: z.optional(z.nullable(z.string().check(z.describe('A system message before the input; not carried to a next response by `previous_response_id`.')))),
    stream: z.optional(z.nullable(z.boolean())),
    stream_options: z.optional(z.nullable(z.strictObject({ include_obfuscation: z.optional(z.boolean()) }))),
    previous_response_id: z.optional(z.nullable(z.string().check(z.describe('A stored response (24 hours) of this application: its conversation comes before `input`.')))),
    store: z.optional(z.nullable(z.boolean().check(z.describe('`false`: the response is not kept (no retrieve, no `previous_response_id`); default `true`, 24 hours.')))),
    max_output_tokens: z.optional(z.nullable(z.int().check(z.minimum(1), z.describe('Only lowers the output ceiling the route and the organization set.')))),
    temperature: z.optional(z.nullable(z.number().check(z.minimum(0), z.maximum(2)))),
    top_p: z.optional(z.nullable(z.number().check(z.minimum(0), z.maximum(1)))),
    text: z.optional(z.strictObject({ format: z.optional(textFormatSchema()), verbosity: z.optional(z.nullable(z.enum(['low', 'medium', 'high']))) })),
    reasoning: z.optional(z.nullable(z.strictObject({ effort: z.optional(z.nullable(z.string())), summary: z.optional(z.null()) }))),
    tools: z.optional(z.array(fileSearchToolSchema()).check(z.maxLength(1), z.describe('At most one `file_search` tool; any other tool type is `400 unsupported_field`.'))),
    tool_choice: z.optional(z.union([z.enum(['none', 'auto', 'required']), z.strictObject({ type: z.literal('file_search') })])),
    include: z.optional(z.nullable(z.array(z.literal(INCLUDE_RESULTS)).check(z.describe(`Only \`${INCLUDE_RESULTS}\`: the search’s results on the \`file_search_call\` item.`)))),
    metadata: z.optional(z.nullable(metadataSchema)),
    parallel_tool_calls: z.optional(z.nullable(z.boolean())),
    truncation: z.optional(z.nullable(z.enum(['auto', 'disabled']))),
    background: z.optional(z.nullable(z.literal(false))),
    user: z.optional(z.string()),
    safety_identifier: z.optional(z.string()),
    prompt_cache_key: z.optional(z.string()),
    prompt_cache_retention: z.optional(z.nullable(z.enum(['in_memory', '24h']))),
    service_tier: z.optional(z.nullable(z.string().check(z.describe('Taken only when the organization was granted the field (chat’s rule).')))),
  }),
);
export type ResponsesRequest = z.output<ReturnType<typeof responsesRequestSchema>>;

/** The `file_search` tool as the call runs it. */
export interface FileSearchPlan {
  vectorStoreIds: string[];
  collectionIds: string[];
  filters?: AttributeFilter;
  maxResults: number;
  scoreThreshold?: number;
  includeResults: boolean;
}

export interface ReadRequest {
  request: ResponsesRequest;
  /** This call's input as chat messages (what a stored response keeps, before the previous ones). */
  input: ChatMessage[];
  /** Undefined without the tool or with `tool_choice: 'none'`. */
  fileSearch?: FileSearchPlan;
}

const unsupported = (param: string, message: string) => new PlatformError('unsupported_field', message, param);
const invalid = (param: string, message: string) => new PlatformError('invalid_body', message, param);

/** Parses the body: other tools first (their own 400), then the fields, then each input item. */
export function readResponsesRequest(body: unknown): ReadRequest {
  // OpenAI's fields for what is not served: named as such, not as a wrong value.
  if (isJsonObject(body) && body.background === true) throw unsupported('background', 'Background responses are not served: send the request and read its answer (or stream it).');
  if (isJsonObject(body) && Array.isArray(body.tools)) {
    body.tools.forEach((tool, i) => {
      const type = isJsonObject(tool) ? tool.type : undefined;
      if (type !== 'file_search') throw unsupported(`tools.${i}.type`, `The tool ${JSON.stringify(String(type).slice(0, 64))} is not served here: only file_search (docs/ai/openai-compatibility.md).`);
    });
  }
  const request = parseBody(responsesRequestSchema(), body, { unknownField: 'unsupported_field' });
  // The schema's record drops a key named `__proto__`: metadata is read again by hand, its keys data only.
  if (isJsonObject(body) && isJsonObject(body.metadata)) request.metadata = parseMetadata(body.metadata);
  const input = typeof request.input === 'string' ? [{ role: 'user' as const, content: request.input }] : readItems(request.input);
  const tool = request.tools?.[0];
  if (request.tool_choice === 'required' && !tool) throw invalid('tool_choice', '`tool_choice: required` needs a file_search tool.');
  if (request.include?.length && !tool) throw invalid('include', `\`${INCLUDE_RESULTS}\` needs a file_search tool.`);
  const fileSearch: FileSearchPlan | undefined =
    tool && request.tool_choice !== 'none'
      ? {
          vectorStoreIds: tool.vector_store_ids,
          collectionIds: [...new Set(tool.vector_store_ids.map(collectionIdOf))],
          filters: tool.filters ? parseFilters(tool.filters, 'tools.0.filters') : undefined,
          maxResults: tool.max_num_results ?? DEFAULT_NUM_RESULTS,
          scoreThreshold: tool.ranking_options?.score_threshold,
          includeResults: request.include?.includes(INCLUDE_RESULTS) === true,
        }
      : undefined;
  return { request, input, fileSearch };
}

/** Content parts of an input message, as chat's. */
function readParts(content: unknown, at: string): ChatMessage['content'] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalid(at, `${at}: content must be a string or an array of parts.`);
  return content.map((part, j) => {
    const where = `${at}.${j}`;
    const type = isJsonObject(part) ? part.type : undefined;
    if ((type === 'input_text' || type === 'output_text') && typeof part.text === 'string') return { type: 'text' as const, text: part.text };
    if (type === 'refusal' && typeof part.refusal === 'string') return { type: 'text' as const, text: part.refusal };
    if (type === 'input_image') {
      if (typeof part.image_url !== 'string' || part.image_url === '') throw unsupported(`${where}.image_url`, `${where}: an image is taken by its image_url (a URL or data URL); file_id is not served.`);
      return { type: 'image_url' as const, image_url: { url: part.image_url, ...(typeof part.detail === 'string' ? { detail: part.detail } : {}) } };
    }
    if (type === 'input_text' || type === 'output_text' || type === 'refusal') throw invalid(where, `${where}: a ${type} part needs its text.`);
    throw unsupported(`${where}.type`, `${where}: the content part ${JSON.stringify(String(type).slice(0, 64))} is not served (input_text, input_image, output_text).`);
  });
}

/**
 * The input items as chat messages. Earlier output items a client sends back (LangChain does) are
 * taken: an assistant `message` as history, a `file_search_call` or `reasoning` skipped (the search ran
 * then; the model sees its answer). Anything else (function calls, item references, files) is refused.
 */
function readItems(items: Array<Record<string, unknown>>): ChatMessage[] {
  const messages: ChatMessage[] = [];
  items.forEach((item, i) => {
    const at = `input.${i}`;
    const type = item.type ?? 'message';
    if (type === 'file_search_call' || type === 'reasoning') return;
    if (type !== 'message') throw unsupported(`${at}.type`, `${at}: the item type ${JSON.stringify(String(type).slice(0, 64))} is not served (messages only).`);
    const role = item.role;
    if (role === 'user' || role === 'system' || role === 'developer' || role === 'assistant') {
      const content = readParts(item.content, `${at}.content`);
      if (role === 'assistant') {
        // An assistant's earlier answer: its text (chat takes no image from the assistant).
        const text = typeof content === 'string' ? content : content.map((p) => (p.type === 'text' ? p.text : '')).join('');
        messages.push({ role: 'assistant', content: text });
      } else messages.push({ role: role === 'developer' ? 'system' : role, content });
      return;
    }
    throw invalid(`${at}.role`, `${at}: role must be user, system, developer or assistant.`);
  });
  if (messages.length === 0) throw invalid('input', 'input holds no message.');
  return messages;
}

/**
 * The chat body the answer is made with: instructions as a first system message, then the stored
 * conversation, then the input; OpenAI's field names made chat's. It goes through parseChatRequest.
 */
export function chatBodyOf(read: ReadRequest, history: readonly ChatMessage[], stream: boolean): Record<string, unknown> {
  const r = read.request;
  const messages: ChatMessage[] = [...(r.instructions ? [{ role: 'system' as const, content: r.instructions }] : []), ...history, ...read.input];
  const body: Record<string, unknown> = { messages };
  if (r.model !== undefined) body.model = r.model;
  if (stream) body.stream = true;
  if (r.max_output_tokens != null) body.max_completion_tokens = r.max_output_tokens;
  if (r.temperature != null) body.temperature = r.temperature;
  if (r.top_p != null) body.top_p = r.top_p;
  for (const field of ['user', 'safety_identifier', 'prompt_cache_key'] as const) if (r[field] !== undefined) body[field] = r[field];
  if (r.service_tier != null) body.service_tier = r.service_tier;
  if (r.reasoning?.effort != null) body.reasoning_effort = r.reasoning.effort;
  if (r.text?.verbosity != null) body.verbosity = r.text.verbosity;
  const format = r.text?.format;
  if (format?.type === 'json_object') body.response_format = { type: 'json_object' };
  if (format?.type === 'json_schema') {
    body.response_format = { type: 'json_schema', json_schema: { name: format.name, schema: format.schema, ...(format.description !== undefined ? { description: format.description } : {}), ...(format.strict != null ? { strict: format.strict } : {}) } };
  }
  return body;
}
