/**
 * Provider `bedrock`, the mapping: an OpenAI chat request to a Bedrock Converse request, a Converse
 * answer and Converse stream events back to OpenAI's shapes, the embeddings bodies (Amazon Titan Text
 * Embeddings v2, Cohere Embed), and Bedrock's errors as the platform answers them. Pure: no client,
 * no I/O (client.ts sends). docs/ai/providers.md ("bedrock") lists what maps to what.
 */
import { randomUUID } from 'node:crypto';
import type {
  ContentBlock,
  ConverseCommandInput,
  ConverseCommandOutput,
  ConverseStreamOutput,
  InferenceConfiguration,
  Message,
  StopReason,
  SystemContentBlock,
  ToolConfiguration,
} from '@aws-sdk/client-bedrock-runtime';
import { PlatformError } from '../../../shared/errors.js';
import { estimateEmbeddings } from '../../estimate.js';
import type { ModelRoute } from '../../model-routes.js';
import type { ChatBody, ChatChunk, ChatCompletion, Usage } from '../../types.js';
import { routeUnavailable, upstreamError } from '../../upstream-errors.js';
import { bedrockImageProblem, DATA_URL, IMAGE_FORMATS } from './images.js';

// ---------------------------------------------------------------------------------------------------
// Chat: the request

interface OpenAiToolCall {
  id?: unknown;
  type?: unknown;
  function?: { name?: unknown; arguments?: unknown };
}
interface OpenAiMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content?: string | { type: string; text?: string; image_url?: { url: string } }[] | null;
  tool_calls?: OpenAiToolCall[];
  tool_call_id?: string;
}

const invalid = (i: number, what: string) => new PlatformError('invalid_messages', `messages[${i}]: ${what}`, `messages.${i}`);
const unsupported = (field: string, what: string) => new PlatformError('unsupported_field_for_route', `Bedrock routes ${what}.`, field);

function imageBlock(url: string, i: number): ContentBlock {
  const problem = bedrockImageProblem(url);
  if (problem) throw invalid(i, problem);
  const m = DATA_URL.exec(url)!;
  return { image: { format: IMAGE_FORMATS[m[1].toLowerCase()], source: { bytes: new Uint8Array(Buffer.from(m[2], 'base64')) } } };
}

/** A message's text and image parts as Converse content blocks (empty texts left out: Converse refuses them). */
function contentBlocks(content: OpenAiMessage['content'], i: number, images: boolean): ContentBlock[] {
  if (content == null) return [];
  if (typeof content === 'string') return content ? [{ text: content }] : [];
  return content.flatMap((part): ContentBlock[] => {
    if (part.type === 'text') return part.text ? [{ text: part.text }] : [];
    if (part.type === 'image_url' && images) return [imageBlock(part.image_url!.url, i)];
    throw invalid(i, `a "${part.type}" part is not taken in a ${images ? 'user' : 'system, assistant or tool'} message.`);
  });
}

function toolUse(call: OpenAiToolCall, i: number): ContentBlock {
  if (call.type !== 'function' || typeof call.id !== 'string' || typeof call.function?.name !== 'string') throw invalid(i, 'a tool call needs an id, type "function" and a function name.');
  let input: unknown;
  try {
    input = JSON.parse(typeof call.function.arguments === 'string' && call.function.arguments ? call.function.arguments : '{}');
  } catch {
    throw invalid(i, 'a tool call\'s arguments are not JSON.');
  }
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw invalid(i, 'a tool call\'s arguments must be a JSON object.');
  return { toolUse: { toolUseId: call.id, name: call.function.name, input: input as Record<string, never> } };
}

/**
 * OpenAI messages as Converse's `system` and `messages`: system messages become system blocks; a tool
 * message becomes a toolResult in a user turn; consecutive turns of one role are merged (Converse
 * wants user and assistant turns alternating).
 */
export function conversation(messages: unknown[]): { system: SystemContentBlock[]; messages: Message[] } {
  const system: SystemContentBlock[] = [];
  const turns: Message[] = [];
  const push = (role: 'user' | 'assistant', content: ContentBlock[]) => {
    const last = turns.at(-1);
    if (last?.role === role) last.content!.push(...content);
    else turns.push({ role, content });
  };
  (messages as OpenAiMessage[]).forEach((m, i) => {
    switch (m.role) {
      case 'system':
        for (const block of contentBlocks(m.content, i, false)) system.push({ text: (block as { text: string }).text });
        return;
      case 'user': {
        const content = contentBlocks(m.content, i, true);
        if (!content.length) throw invalid(i, 'a user message needs some text or an image.');
        return push('user', content);
      }
      case 'assistant': {
        const content = [...contentBlocks(m.content, i, false), ...(m.tool_calls ?? []).map((c) => toolUse(c, i))];
        if (!content.length) throw invalid(i, 'an assistant message needs some text or a tool call.');
        return push('assistant', content);
      }
      case 'tool': {
        const text = contentBlocks(m.content, i, false).map((b) => (b as { text: string }).text).join('');
        return push('user', [{ toolResult: { toolUseId: m.tool_call_id!, content: [{ text: text || '(empty)' }] } }]);
      }
      default:
        throw invalid(i, `role ${(m as { role: unknown }).role} is not taken.`);
    }
  });
  return { system, messages: turns };
}

/** OpenAI `tools` and `tool_choice` as Converse's toolConfig (function tools only). */
export function toolConfig(tools: unknown, choice: unknown): ToolConfiguration | undefined {
  if (tools === undefined || (Array.isArray(tools) && tools.length === 0)) return undefined;
  const specs = (tools as { type?: unknown; function?: { name?: unknown; description?: unknown; parameters?: unknown } }[]).map((t) => {
    if (t.type !== 'function' || typeof t.function?.name !== 'string') throw unsupported('tools', 'take function tools only ({type: "function", function: {name, parameters}})');
    const { name, description, parameters } = t.function;
    return {
      toolSpec: {
        name,
        ...(typeof description === 'string' ? { description } : {}),
        inputSchema: { json: (parameters ?? { type: 'object', properties: {} }) as Record<string, never> },
      },
    };
  });
  let toolChoice: ToolConfiguration['toolChoice'];
  if (choice === undefined || choice === 'auto') toolChoice = undefined;
  else if (choice === 'required') toolChoice = { any: {} };
  else if (typeof choice === 'object' && choice && typeof (choice as { function?: { name?: unknown } }).function?.name === 'string') {
    toolChoice = { tool: { name: (choice as { function: { name: string } }).function.name } };
  } else throw unsupported('tool_choice', 'take tool_choice "auto", "required" or a named function, not "none"');
  return { tools: specs, ...(toolChoice ? { toolChoice } : {}) };
}

/** The Converse request of a chat (ConverseCommand and ConverseStreamCommand take the same fields). */
export function converseInput(route: ModelRoute, body: ChatBody): ConverseCommandInput {
  if (typeof body.n === 'number' && body.n > 1) throw unsupported('n', 'answer one choice (n: 1)');
  const { system, messages } = conversation(body.messages);
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const stop = typeof body.stop === 'string' ? [body.stop] : Array.isArray(body.stop) && body.stop.length ? (body.stop as string[]) : undefined;
  const config: InferenceConfiguration = {
    maxTokens: num(body.max_completion_tokens) ?? num(body.max_tokens) ?? route.max_tokens ?? undefined,
    temperature: num(body.temperature),
    topP: num(body.top_p),
    stopSequences: stop,
  };
  const inferenceConfig = Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined)) as InferenceConfiguration;
  const tools = toolConfig(body.tools, body.tool_choice);
  return {
    modelId: route.upstream_model ?? route.id,
    messages,
    ...(system.length ? { system } : {}),
    ...(Object.keys(inferenceConfig).length ? { inferenceConfig } : {}),
    ...(tools ? { toolConfig: tools } : {}),
  };
}

// ---------------------------------------------------------------------------------------------------
// Chat: the answer and the stream

const FINISH_REASONS: Record<StopReason, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  content_filtered: 'content_filter',
  guardrail_intervened: 'content_filter',
  malformed_model_output: 'stop',
  malformed_tool_use: 'stop',
};
export const finishReason = (stop: string | undefined): string => FINISH_REASONS[stop as StopReason] ?? 'stop';

export function usageOf(u: { inputTokens?: number; outputTokens?: number; totalTokens?: number } | undefined): Usage {
  const prompt = u?.inputTokens ?? 0;
  const completion = u?.outputTokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: u?.totalTokens ?? prompt + completion };
}

const completionId = () => `chatcmpl-${randomUUID()}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

export function completionOf(route: ModelRoute, out: ConverseCommandOutput): ChatCompletion {
  const blocks = out.output?.message?.content;
  if (!Array.isArray(blocks)) throw upstreamError('the answer has no message');
  const text = blocks.flatMap((b) => (typeof b.text === 'string' ? [b.text] : [])).join('');
  const toolCalls = blocks.flatMap((b) =>
    b.toolUse ? [{ id: b.toolUse.toolUseId, type: 'function', function: { name: b.toolUse.name, arguments: JSON.stringify(b.toolUse.input ?? {}) } }] : [],
  );
  return {
    id: completionId(),
    object: 'chat.completion',
    created: nowSeconds(),
    model: route.id,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: toolCalls.length && !text ? null : text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        finish_reason: finishReason(out.stopReason),
        logprobs: null,
      },
    ],
    usage: usageOf(out.usage),
  };
}

/** The stream's error events (Converse sends some failures inside the stream) by the error they mean. */
const STREAM_ERRORS = ['internalServerException', 'modelStreamErrorException', 'serviceUnavailableException', 'throttlingException', 'validationException'] as const;

/**
 * Maps Converse stream events to chunks, one stream at a time (it keeps the chunk id and which content
 * block is which tool call). Returns the chunk an event makes, or undefined for events with none.
 */
export function streamMapper(route: ModelRoute): (event: ConverseStreamOutput) => ChatChunk | undefined {
  const id = completionId();
  const created = nowSeconds();
  const toolIndex = new Map<number, number>();
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): ChatChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: route.id,
    choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
  });
  return (event) => {
    for (const name of STREAM_ERRORS) {
      if (event[name]) throw bedrockError(Object.assign(new Error('stream error'), { name: name[0].toUpperCase() + name.slice(1) }));
    }
    if (event.messageStart) return chunk({ role: 'assistant', content: '' });
    if (event.contentBlockStart?.start?.toolUse) {
      const { toolUseId, name } = event.contentBlockStart.start.toolUse;
      const index = toolIndex.size;
      toolIndex.set(event.contentBlockStart.contentBlockIndex ?? index, index);
      return chunk({ tool_calls: [{ index, id: toolUseId, type: 'function', function: { name, arguments: '' } }] });
    }
    const delta = event.contentBlockDelta?.delta;
    if (typeof delta?.text === 'string') return chunk({ content: delta.text });
    if (delta?.toolUse) {
      const index = toolIndex.get(event.contentBlockDelta!.contentBlockIndex ?? -1) ?? Math.max(0, toolIndex.size - 1);
      return chunk({ tool_calls: [{ index, function: { arguments: delta.toolUse.input ?? '' } }] });
    }
    if (event.messageStop) return chunk({}, finishReason(event.messageStop.stopReason));
    if (event.metadata?.usage) return { id, object: 'chat.completion.chunk', created, model: route.id, choices: [], usage: usageOf(event.metadata.usage) };
    return undefined; // contentBlockStop, reasoning deltas, metadata without usage
  };
}

// ---------------------------------------------------------------------------------------------------
// Embeddings

/** Cohere Embed on Bedrock takes at most 96 texts a call. */
export const COHERE_BATCH = 96;
export const isCohere = (modelId: string) => modelId.startsWith('cohere.');

export const titanBody = (text: string, dimensions: unknown) =>
  JSON.stringify({ inputText: text, ...(typeof dimensions === 'number' ? { dimensions } : {}), normalize: true });
export const cohereBody = (texts: string[]) => JSON.stringify({ texts, input_type: 'search_document' });

function parsed(body: Uint8Array | undefined): Record<string, unknown> {
  try {
    const value = JSON.parse(new TextDecoder().decode(body)) as unknown;
    if (value && typeof value === 'object') return value as Record<string, unknown>;
  } catch {
    // below
  }
  throw upstreamError('the answer is not JSON');
}

export function titanAnswer(body: Uint8Array | undefined): { embedding: number[]; tokens: number } {
  const answer = parsed(body);
  if (!Array.isArray(answer.embedding)) throw upstreamError('the answer has no embedding');
  return { embedding: answer.embedding as number[], tokens: Number(answer.inputTextTokenCount) || 0 };
}

/**
 * Cohere's answer: `embeddings` is a list of vectors (v3), or `{float: [...]}` by type (v4). Cohere
 * reports no token count here: the tokens are estimated from the text (estimate.ts' rule).
 */
export function cohereAnswer(body: Uint8Array | undefined, texts: string[]): { embeddings: number[][]; tokens: number } {
  const answer = parsed(body);
  const e = answer.embeddings as unknown;
  const embeddings = Array.isArray(e) ? e : (e as { float?: unknown } | undefined)?.float;
  if (!Array.isArray(embeddings) || embeddings.length !== texts.length) throw upstreamError('the answer has not one embedding per input');
  return { embeddings: embeddings as number[][], tokens: estimateEmbeddings(texts).inputTokens };
}

// ---------------------------------------------------------------------------------------------------
// Errors

/** Bedrock errors that mean "not now": answered 503 route_unavailable. */
const UNAVAILABLE = new Set(['ThrottlingException', 'ServiceUnavailableException', 'ModelNotReadyException', 'ServiceQuotaExceededException']);
/** Bedrock Runtime's modeled errors: known by name also when a stream raises one without the SDK's fields. */
const BEDROCK_ERRORS = new Set([
  ...UNAVAILABLE,
  'AccessDeniedException',
  'ConflictException',
  'InternalServerException',
  'ModelErrorException',
  'ModelStreamErrorException',
  'ModelTimeoutException',
  'ResourceNotFoundException',
  'ValidationException',
]);

/**
 * A Bedrock service error as the platform answers it: throttled, unavailable or not ready is 503
 * route_unavailable; anything else Bedrock answered (validation, access denied, model errors, a model
 * not found) is 502 upstream_error. Only the error's name and status go in the message, never AWS's
 * message (it may quote the request). Anything that is not a service error (a network failure, the
 * call aborted, a PlatformError) is returned unchanged: the gateway maps it.
 */
export function bedrockError(error: unknown): unknown {
  if (error instanceof PlatformError || typeof error !== 'object' || error === null) return error;
  const e = error as { name?: unknown; $fault?: unknown; $metadata?: { httpStatusCode?: unknown } };
  const name = typeof e.name === 'string' ? e.name : '';
  if (e.$fault !== 'client' && e.$fault !== 'server' && !BEDROCK_ERRORS.has(name)) return error;
  const status = typeof e.$metadata?.httpStatusCode === 'number' ? ` (status ${e.$metadata.httpStatusCode})` : '';
  const detail = `Bedrock ${/^[A-Za-z]{1,64}$/.test(name) ? name : 'error'}${status}`;
  return UNAVAILABLE.has(name) ? routeUnavailable(detail) : upstreamError(detail);
}
