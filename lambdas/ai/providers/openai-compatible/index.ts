/**
 * Provider `openai-compatible`: any server speaking OpenAI's API at the route's base URL (OpenAI,
 * vLLM, Ollama, LM Studio, Azure-style gateways). The request goes out as sent, with the route's
 * upstream model; answers and stream chunks come back with the route id as `model`. Node's fetch
 * (undici) keeps connections alive and reuses them per origin.
 */
import type { ChatBody, ChatChunk, ChatCompletion, EmbeddingList, EmbeddingsBody, ModelProvider, UpstreamCall } from '../../types.js';
import { upstreamError } from '../../upstream-errors.js';
import { readServerSentEvents } from './sse.js';

const url = (call: UpstreamCall, path: string) => `${call.route.base_url!.replace(/\/+$/, '')}${path}`;

async function post(call: UpstreamCall, path: string, body: Record<string, unknown>): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: body.stream ? 'text/event-stream' : 'application/json' };
  if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`;
  const payload = { ...body, model: call.route.upstream_model ?? body.model };
  const res = await fetch(url(call, path), { method: 'POST', headers, body: JSON.stringify(payload), signal: call.signal, redirect: 'error' });
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    throw upstreamError(`status ${res.status}`);
  }
  return res;
}

async function json<T>(res: Response): Promise<T> {
  try {
    return (await res.json()) as T;
  } catch {
    throw upstreamError('the answer is not JSON');
  }
}

export const openAiCompatible: ModelProvider = {
  async chat(call, body) {
    const answer = await json<ChatCompletion>(await post(call, '/chat/completions', { ...body, stream: false }));
    if (!answer || !Array.isArray(answer.choices)) throw upstreamError('the answer has no choices');
    return { ...answer, model: call.route.id };
  },

  async *chatStream(call, body: ChatBody) {
    const res = await post(call, '/chat/completions', { ...body, stream: true });
    if (!res.body) throw upstreamError('the stream has no body');
    for await (const data of readServerSentEvents(res.body)) {
      if (data === '[DONE]') return;
      let chunk: ChatChunk;
      try {
        chunk = JSON.parse(data) as ChatChunk;
      } catch {
        throw upstreamError('a stream chunk is not JSON');
      }
      if (chunk && typeof chunk === 'object' && 'error' in chunk) throw upstreamError('the stream reported an error');
      yield { ...chunk, model: call.route.id };
    }
  },

  async embed(call, body: EmbeddingsBody) {
    const answer = await json<EmbeddingList>(await post(call, '/embeddings', body));
    if (!answer || !Array.isArray(answer.data)) throw upstreamError('the answer has no data');
    return { ...answer, model: call.route.id };
  },
};
