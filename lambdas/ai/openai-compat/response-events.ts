/**
 * The Responses API's objects and its stream (docs/ai/openai-compatibility.md, "Responses"): the
 * response and its output items in OpenAI's shapes, and the server-sent events of a streamed one, in
 * OpenAI's order with `sequence_number`s from 0 and consistent `output_index`/`content_index`. The
 * official SDK's accumulator (ResponseStream) throws on an event it does not know or an index that
 * names nothing, so only OpenAI's event types leave here.
 */
import { PlatformError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import type { ChatChunk, Usage } from '../types.js';
import type { CitationStripper, CitedText, FileCitation } from './citations.js';

/** The `file_search_call` output item; `indexing` (extra) says how much of each store the search covered. */
export interface FileSearchCallItem {
  id: string;
  type: 'file_search_call';
  status: 'in_progress' | 'searching' | 'completed' | 'incomplete' | 'failed';
  queries: string[];
  results: Array<{ file_id: string; filename: string; score: number; text: string; attributes: Record<string, string | number | boolean> | null }> | null;
  indexing?: Record<string, unknown>;
}

export interface OutputText {
  type: 'output_text';
  text: string;
  annotations: FileCitation[];
  logprobs: [];
}

export interface MessageItem {
  id: string;
  type: 'message';
  role: 'assistant';
  status: 'in_progress' | 'completed' | 'incomplete';
  content: OutputText[];
}

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: 'in_progress' | 'completed' | 'incomplete' | 'failed';
  error: { code: string; message: string } | null;
  incomplete_details: { reason: 'max_output_tokens' } | null;
  instructions: string | null;
  metadata: Record<string, string> | null;
  model: string;
  output: Array<FileSearchCallItem | MessageItem>;
  parallel_tool_calls: boolean;
  temperature: number | null;
  tool_choice: unknown;
  tools: unknown[];
  top_p: number | null;
  max_output_tokens: number | null;
  previous_response_id: string | null;
  store: boolean;
  text: { format: Record<string, unknown>; verbosity?: string };
  truncation: 'auto' | 'disabled';
  usage?: ResponseUsage;
}

/** A chat answer's usage in the Responses API's words (cached and reasoning tokens when the upstream told them). */
export function responseUsage(usage: (Usage & { prompt_tokens_details?: { cached_tokens?: unknown }; completion_tokens_details?: { reasoning_tokens?: unknown } }) | null | undefined): ResponseUsage | undefined {
  if (!usage) return undefined;
  const count = (v: unknown) => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : 0);
  return {
    input_tokens: count(usage.prompt_tokens),
    input_tokens_details: { cached_tokens: count(usage.prompt_tokens_details?.cached_tokens) },
    output_tokens: count(usage.completion_tokens),
    output_tokens_details: { reasoning_tokens: count(usage.completion_tokens_details?.reasoning_tokens) },
    total_tokens: count(usage.total_tokens) || count(usage.prompt_tokens) + count(usage.completion_tokens),
  };
}

/** The assistant message of a finished text. */
export const messageItem = (id: string, text: CitedText, status: MessageItem['status']): MessageItem => ({
  id,
  type: 'message',
  role: 'assistant',
  status,
  content: [{ type: 'output_text', text: text.text, annotations: text.annotations, logprobs: [] }],
});

export type ResponseEvent = { type: string; sequence_number: number; [field: string]: unknown };

export interface StreamPlan {
  /** The response as it starts: `in_progress`, no output. */
  start: ResponseObject;
  /** The search's item, already done (the search runs before the stream starts, so its failures answer a status). */
  search?: FileSearchCallItem;
  messageId: string;
  chunks: AsyncGenerator<ChatChunk>;
  stripper: CitationStripper;
  /** The finished response: stores it (before `response.completed` leaves) and returns what the client gets. */
  finish(response: ResponseObject, text: string): Promise<ResponseObject>;
}

/**
 * The events of a streamed response. An upstream that fails part-way ends the stream with an `error`
 * event and `response.failed` (the text so far on the message, marked incomplete), as OpenAI's does.
 */
export async function* responseEvents(plan: StreamPlan): AsyncGenerator<ResponseEvent> {
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>): ResponseEvent => ({ type, sequence_number: sequence++, ...fields });
  const { start, search, messageId } = plan;
  yield event('response.created', { response: start });
  yield event('response.in_progress', { response: start });
  const output: ResponseObject['output'] = [];
  if (search) {
    const item_id = search.id;
    yield event('response.output_item.added', { output_index: 0, item: { ...search, status: 'in_progress', results: null } });
    yield event('response.file_search_call.in_progress', { output_index: 0, item_id });
    yield event('response.file_search_call.searching', { output_index: 0, item_id });
    yield event('response.file_search_call.completed', { output_index: 0, item_id });
    yield event('response.output_item.done', { output_index: 0, item: search });
    output.push(search);
  }
  const at = { item_id: messageId, output_index: output.length };
  const part = { ...at, content_index: 0 };
  yield event('response.output_item.added', { output_index: at.output_index, item: { id: messageId, type: 'message', role: 'assistant', status: 'in_progress', content: [] } });
  yield event('response.content_part.added', { ...part, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });

  const text: CitedText = { text: '', annotations: [] };
  // An annotation follows the text up to its index: those at the text so far before this delta, the others after it.
  function* cited(settled: CitedText): Generator<ResponseEvent> {
    const annotate = function* (annotations: FileCitation[]) {
      for (const annotation of annotations) {
        yield event('response.output_text.annotation.added', { ...part, annotation_index: text.annotations.length, annotation });
        text.annotations.push(annotation);
      }
    };
    const before = text.text.length;
    yield* annotate(settled.annotations.filter((a) => a.index <= before));
    if (settled.text) {
      text.text += settled.text;
      yield event('response.output_text.delta', { ...part, delta: settled.text, logprobs: [] });
    }
    yield* annotate(settled.annotations.filter((a) => a.index > before));
  }
  let usage: ChatChunk['usage'];
  let finishReason: string | null = null;
  try {
    for await (const chunk of plan.chunks) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (choice?.finish_reason) finishReason = choice.finish_reason;
      const delta = choice?.delta?.content;
      if (typeof delta === 'string' && delta) yield* cited(plan.stripper.push(delta));
    }
  } catch (error) {
    // The gateway's failures are PlatformErrors already (fetchFailure); anything else is logged, not shown.
    if (!(error instanceof PlatformError)) log.error('responses stream failed', { error: String((error as Error)?.stack ?? error) });
    const failure = error instanceof PlatformError ? error : new PlatformError('upstream_error', "The model route's upstream failed mid-stream.");
    yield* cited(plan.stripper.end());
    yield event('error', { code: failure.code, message: failure.message, param: null });
    const failed: ResponseObject = {
      ...start,
      status: 'failed',
      error: { code: 'server_error', message: failure.message },
      output: [...output, messageItem(messageId, text, 'incomplete')],
    };
    yield event('response.failed', { response: failed });
    return;
  }
  yield* cited(plan.stripper.end());
  const done = messageItem(messageId, text, finishReason === 'length' ? 'incomplete' : 'completed');
  yield event('response.output_text.done', { ...part, text: text.text, logprobs: [] });
  yield event('response.content_part.done', { ...part, part: done.content[0] });
  yield event('response.output_item.done', { output_index: at.output_index, item: done });
  const incomplete = done.status === 'incomplete';
  const response = await plan.finish(
    {
      ...start,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      output: [...output, done],
      ...(responseUsage(usage) ? { usage: responseUsage(usage) } : {}),
    },
    text.text,
  );
  yield event(incomplete ? 'response.incomplete' : 'response.completed', { response });
}
