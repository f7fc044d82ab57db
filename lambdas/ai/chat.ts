/**
 * `POST /v1/chat/completions` (spec 4.3): the request's rules, as zod schemas that also document
 * them (docs/ai/chat.md), and what leaves for the upstream. The call itself runs in gateway.ts.
 */
import { createHmac } from 'node:crypto';
import * as z from 'zod';
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { derivedKey } from '../shared/server-keys.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import { checkRouteAllowed } from './key-routes.js';
import type { ModelRoute } from './model-routes.js';
import { DEFAULT_MAX_OUTPUT_TOKENS } from './estimate.js';
import { GRANTABLE_FIELDS, type AiSettings } from './org-settings.js';
import type { ChatBody } from './types.js';

/** Spec 8: at most 20 images in a chat request. */
export const MAX_CHAT_IMAGES = 20;
/** Text a request may carry in its messages (characters): over it, 400 input_too_large. */
export const MAX_INPUT_CHARS = 2_000_000;
/** The fields replaced by a value derived from the organization before leaving (spec 4.3). */
export const DERIVED_FIELDS = ['user', 'safety_identifier', 'prompt_cache_key'] as const;

/** The request's schemas, built at their first use (onFirstUse). */
const chatSchemas = onFirstUse(() => {
  const textPart = z.object({ type: z.literal('text'), text: z.string() }).passthrough();
  const imagePart = z.object({ type: z.literal('image_url'), image_url: z.object({ url: z.string().min(1), detail: z.string().optional() }).passthrough() }).passthrough();
  const contentPart = z.discriminatedUnion('type', [textPart, imagePart]);
  const content = z.union([z.string(), z.array(contentPart)]);

  /** A message: OpenAI's roles with their content shapes (assistant content may be null beside tool calls). */
  const messageSchema = z.discriminatedUnion('role', [
    z.object({ role: z.literal('system'), content, name: z.string().optional() }).strict(),
    z.object({ role: z.literal('user'), content, name: z.string().optional() }).strict(),
    z
      .object({ role: z.literal('assistant'), content: content.nullable().optional(), name: z.string().optional(), tool_calls: z.array(z.record(z.string(), z.unknown())).optional(), refusal: z.string().nullable().optional() })
      .strict(),
    z.object({ role: z.literal('tool'), content, tool_call_id: z.string().min(1) }).strict(),
  ]);

  const integer = z.number().int();
  /** Every field of spec 4.3's table; anything else is 400 unsupported_field. */
  const chatRequestSchema = z
    .object({
      // Each message is checked apart (messageSchema), to answer invalid_messages rather than invalid_body.
      messages: z.array(z.unknown()).min(1),
      model: z.string().min(1).optional().describe('A chat route id of the organization (GET /v1/models); `auto` or absent: its default chat route.'),
      stream: z.boolean().optional().describe('`true`: the answer is server-sent events (`text/event-stream`), one `chat.completion.chunk` a `data:` line, ending `data: [DONE]`.'),
      stream_options: z
        .object({ include_usage: z.boolean().optional() })
        .strict()
        .nullable()
        .optional()
        .describe('With `stream: true`, `include_usage: true` adds a final chunk with `choices: []` and the token counts.'),
      max_tokens: integer.min(1).nullable().optional().describe(CEILING_WORDS),
      max_completion_tokens: integer.min(1).nullable().optional().describe(CEILING_WORDS),
      temperature: z.number().min(0).max(2).nullable().optional(),
      top_p: z.number().min(0).max(1).nullable().optional(),
      presence_penalty: z.number().min(-2).max(2).nullable().optional(),
      frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
      stop: z.union([z.string(), z.array(z.string()).max(4)]).nullable().optional(),
      logit_bias: z.record(z.string(), z.number()).nullable().optional(),
      logprobs: z.boolean().nullable().optional(),
      top_logprobs: integer.min(0).max(20).nullable().optional(),
      tools: z.array(z.record(z.string(), z.unknown())).optional().describe('Refused by a route set without tools (`400 unsupported_field_for_route`).'),
      tool_choice: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
      parallel_tool_calls: z.boolean().optional(),
      response_format: z.object({ type: z.string() }).passthrough().optional(),
      seed: integer.nullable().optional(),
      reasoning_effort: z.string().nullable().optional().describe('Only on models that support it.'),
      verbosity: z.string().nullable().optional().describe('Only on models that support it.'),
      user: z.string().optional().describe(DERIVED_WORDS),
      safety_identifier: z.string().optional().describe(DERIVED_WORDS),
      prompt_cache_key: z.string().optional().describe(DERIVED_WORDS),
      prediction: z.record(z.string(), z.unknown()).nullable().optional(),
      // Grantable (checked against the organization's grants before anything else about them).
      n: integer.min(1).max(128).nullable().optional().describe(GRANTED_WORDS),
      service_tier: z.string().nullable().optional().describe(GRANTED_WORDS),
      store: z.boolean().nullable().optional().describe(GRANTED_WORDS),
      metadata: z.record(z.string(), z.string()).nullable().optional().describe(GRANTED_WORDS),
      modalities: z.array(z.string()).nullable().optional().describe(GRANTED_WORDS),
      audio: z.record(z.string(), z.unknown()).nullable().optional().describe(GRANTED_WORDS),
      web_search_options: z.record(z.string(), z.unknown()).optional().describe(GRANTED_WORDS),
    })
    .strict();
  return { messageSchema, chatRequestSchema };
});

const CEILING_WORDS = 'Only lowers the output ceiling the route and the organization set.';
const DERIVED_WORDS = 'Replaced by a value derived from the organization (`u_` and 32 hex digits) before it leaves the service.';
const GRANTED_WORDS = 'Taken only when the organization was granted the field; otherwise `403 field_not_allowed`.';

/**
 * The body as the API documents describe it: the parse's own schema with each message's shape in
 * place (the parse checks the messages one by one, to answer invalid_messages). The caps on images
 * and text (parseChatRequest) are said in words.
 */
export const chatRequestBodySchema = onFirstUse(() => {
  const { chatRequestSchema, messageSchema } = chatSchemas();
  return chatRequestSchema.extend({
    messages: z
      .array(messageSchema)
      .min(1)
      .describe(`The conversation: \`system\`, \`user\`, \`assistant\` and \`tool\` messages, content a string or \`text\` and \`image_url\` parts; at most ${MAX_CHAT_IMAGES} images and ${MAX_INPUT_CHARS} characters of text (\`400 input_too_large\`).`),
  });
});

export type ChatRequest = z.infer<ReturnType<typeof chatSchemas>['chatRequestSchema']>;

/** 403 field_not_allowed for a grantable field the organization was not granted (before any other check of it). */
export function checkGrantedFields(body: unknown, granted: AiSettings['granted_fields']): void {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return;
  for (const field of GRANTABLE_FIELDS) {
    if (Object.hasOwn(body, field) && !granted.includes(field)) {
      throw new PlatformError('field_not_allowed', `The field "${field}" needs a grant for your organization.`, field);
    }
  }
}

/** Parses the body: 400 unsupported_field for an unknown field, invalid_body for a wrong type, invalid_messages for bad messages. */
export function parseChatRequest(body: unknown, granted: AiSettings['granted_fields']): ChatRequest {
  checkGrantedFields(body, granted);
  const request = parseBody(chatSchemas().chatRequestSchema, body, { unknownField: 'unsupported_field' });
  let images = 0;
  request.messages.forEach((message, i) => {
    const parsed = chatSchemas().messageSchema.safeParse(message);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new PlatformError('invalid_messages', `messages[${i}]${issue.path.length ? `.${issue.path.join('.')}` : ''}: ${issue.message}`, `messages.${i}`);
    }
    const c = parsed.data.content;
    if (Array.isArray(c)) for (const part of c) if (part.type === 'image_url') images++;
  });
  if (images > MAX_CHAT_IMAGES) throw new PlatformError('invalid_messages', `A request holds at most ${MAX_CHAT_IMAGES} images; this one has ${images}.`, 'messages');
  const chars = promptChars([request.messages, request.tools, request.tool_choice, request.response_format, request.prediction]);
  if (chars > MAX_INPUT_CHARS) throw new PlatformError('input_too_large', `The request holds ${chars} characters of text for the model; at most ${MAX_INPUT_CHARS}.`, 'messages');
  return request;
}

/**
 * Characters of every text the model receives: each string and object key anywhere in `values` (message
 * contents and names, tool-call arguments, tool definitions, the response format...), except an
 * image's URL (images are counted apart). A walk with its own stack: any depth of nesting JSON.parse
 * took is walked without recursion.
 */
export function promptChars(values: unknown[]): number {
  let chars = 0;
  const stack: unknown[] = [...values];
  while (stack.length) {
    const value = stack.pop();
    if (typeof value === 'string') chars += value.length;
    else if (Array.isArray(value)) for (const item of value) stack.push(item);
    else if (value !== null && typeof value === 'object') {
      if ((value as { type?: unknown }).type === 'image_url') continue;
      for (const [key, member] of Object.entries(value)) {
        chars += key.length;
        stack.push(member);
      }
    }
  }
  return chars;
}

/**
 * The route a request's `model` names: `auto` or absent is the organization's default route of the
 * endpoint; a route of another endpoint, or none, is 400 model_not_allowed; one the key may not call
 * (key-routes.ts) is 403 route_forbidden.
 */
export async function resolveRoute(engine: Engine, principal: Principal, routes: readonly ModelRoute[], model: string | undefined, endpoint: ModelRoute['endpoint']): Promise<ModelRoute> {
  const route = model === undefined || model === 'auto' ? routes.find((r) => r.endpoint === endpoint && r.default) : routes.find((r) => r.id === model);
  if (!route || route.endpoint !== endpoint) {
    const what = model === undefined || model === 'auto' ? `no default route for ${endpoint}` : `"${model}" is not a route of yours for ${endpoint}`;
    throw new PlatformError('model_not_allowed', `Model not allowed: ${what}. GET /v1/models lists your routes.`, 'model');
  }
  // A route the organization has but this key may not call (its own route list): 403 route_forbidden.
  await checkRouteAllowed(engine, principal, route);
  return route;
}

/** A stable stand-in for an end-user value, keyed per organization: two organizations never share one. */
export async function derivedUserValue(engine: Engine, organizationId: string, value: string): Promise<string> {
  const key = await derivedKey(engine.secret, 'ai end-user ids v1');
  return `u_${createHmac('sha256', key).update(organizationId).update('\0').update(value).digest('hex').slice(0, 32)}`;
}

/**
 * The output-token ceiling: the route's, lowered (never raised) by the request's max_tokens /
 * max_completion_tokens. A route that prices its output and sets no `--max-tokens` has
 * DEFAULT_MAX_OUTPUT_TOKENS: the budget holds a call's worst cost, which an unbounded output has not.
 */
export function outputCeiling(route: ModelRoute, request: { max_tokens?: number | null; max_completion_tokens?: number | null }): number | undefined {
  const asked = [request.max_tokens, request.max_completion_tokens].filter((v): v is number => typeof v === 'number');
  const routeCeiling = route.max_tokens ?? ((route.price_out_per_mtok ?? 0) > 0 ? DEFAULT_MAX_OUTPUT_TOKENS : null);
  const all = routeCeiling === null ? asked : [routeCeiling, ...asked];
  return all.length ? Math.min(...all) : undefined;
}

/**
 * What goes upstream: the request as sent, with the end-user fields replaced, the token ceiling
 * applied (in each of `max_tokens` and `max_completion_tokens` the client sent; `max_tokens` when it
 * sent neither), and usage always
 * asked for on a stream (the platform records it; the client gets the usage chunk only if it asked).
 */
export async function upstreamChatBody(engine: Engine, organizationId: string, route: ModelRoute, request: ChatRequest): Promise<ChatBody> {
  if (request.tools !== undefined && !route.tools) throw new PlatformError('unsupported_field_for_route', `The route "${route.id}" does not take tools.`, 'tools');
  const body: ChatBody = { ...request } as ChatBody;
  delete body.model;
  for (const field of DERIVED_FIELDS) {
    if (typeof request[field] === 'string') body[field] = await derivedUserValue(engine, organizationId, request[field]!);
  }
  const ceiling = outputCeiling(route, request);
  if (ceiling !== undefined) {
    // Each field the client sent carries the ceiling (an upstream may honour either); none sent: max_tokens.
    if (request.max_completion_tokens != null) body.max_completion_tokens = ceiling;
    if (request.max_tokens != null || request.max_completion_tokens == null) body.max_tokens = ceiling;
  }
  // OpenAI refuses stream_options without stream: true, so a non-streamed call sends none.
  if (request.stream) body.stream_options = { ...(request.stream_options ?? {}), include_usage: true };
  else delete body.stream_options;
  return body;
}
