/**
 * Provider `openai-compatible`: any server speaking OpenAI's API at the route's base URL (OpenAI,
 * vLLM, Ollama, LM Studio, Azure-style gateways). The request goes out as sent, with the route's
 * upstream model; answers and stream chunks come back with the route id as `model`. Requests go out
 * on keep-alive connections (upstream-http.ts).
 */
import type { ChatBody, ChatChunk, ChatCompletion, EmbeddingList, EmbeddingsBody, ModelProvider, UpstreamCall } from '../../types.js';
import { upstreamError } from '../../upstream-errors.js';
import { readServerSentEvents } from './sse.js';
import { discard, jsonAnswer, MAX_ANSWER_BYTES, MAX_EVENT_BYTES, post, readText, type UpstreamResponse } from '../upstream-http.js';

const url = (call: UpstreamCall, path: string) => `${call.route.base_url!.replace(/\/+$/, '')}${path}`;

async function send(call: UpstreamCall, path: string, body: Record<string, unknown>): Promise<UpstreamResponse> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: body.stream ? 'text/event-stream' : 'application/json' };
  if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`;
  const payload = { ...body, model: call.route.upstream_model ?? body.model };
  const res = await post(url(call, path), headers, JSON.stringify(payload), call.signal);
  if (res.status < 200 || res.status > 299) {
    discard(res.body);
    throw upstreamError(`status ${res.status}`);
  }
  return res;
}

async function json<T>(call: UpstreamCall, res: UpstreamResponse): Promise<T> {
  return (await jsonAnswer(res, call.route.max_answer_bytes ?? MAX_ANSWER_BYTES, call.signal)) as T;
}

export const openAiCompatible: ModelProvider = {
  async chat(call, body) {
    const answer = await json<ChatCompletion>(call, await send(call, '/chat/completions', { ...body, stream: false }));
    if (!answer || !Array.isArray(answer.choices)) throw upstreamError('the answer has no choices');
    return { ...answer, model: call.route.id };
  },

  async *chatStream(call, body: ChatBody) {
    const res = await send(call, '/chat/completions', { ...body, stream: true });
    for await (const data of readServerSentEvents(res.body, call.route.max_event_bytes ?? MAX_EVENT_BYTES, call.signal)) {
      if (data === '[DONE]') return;
      let chunk: ChatChunk;
      try {
        chunk = JSON.parse(data) as ChatChunk;
      } catch {
        throw upstreamError('a stream chunk is not JSON');
      }
      // `data: null`, `data: 42`, `data: "text"`, `data: [...]`: no chunk at all, an upstream error.
      if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) throw upstreamError('a stream chunk is not a JSON object');
      if ('error' in chunk) throw upstreamError('the stream reported an error');
      if (chunk.choices !== undefined && !Array.isArray(chunk.choices)) throw upstreamError('a stream chunk has choices that are not a list');
      yield { ...chunk, model: call.route.id };
    }
    // The body ended without `data: [DONE]`: an answer cut off, not a whole one (OpenAI always sends it).
    throw upstreamError('the stream ended without [DONE]');
  },

  async embed(call, body: EmbeddingsBody) {
    const answer = await json<EmbeddingList>(call, await send(call, '/embeddings', body));
    if (!answer || !Array.isArray(answer.data)) throw upstreamError('the answer has no data');
    if (!answer.data.every((d) => d !== null && typeof d === 'object')) throw upstreamError('the answer has a vector that is not an object');
    return { ...answer, model: call.route.id };
  },
};
