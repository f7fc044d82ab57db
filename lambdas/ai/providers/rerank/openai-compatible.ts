/**
 * Rerank provider `openai-compatible`: the Cohere / Jina shape most rerank servers speak (Cohere,
 * Jina, Voyage, vLLM, Infinity, TEI's OpenAI-style front ends): POST `{base-url}/rerank` with
 * `{model, query, documents, top_n}`, answer `results[{index, relevance_score}]` in any order.
 * Over the gateway's keep-alive node:http client (upstream-http.ts).
 */
import { discard, post, readText } from '../upstream-http.js';
import { checkedResults, reportedTokens, RerankFailure, type Reranker } from './types.js';

/**
 * The most of an answer read. Servers that echo the documents back (Jina does unless told not to) send
 * at most 100 candidates of at most 10 KiB each, JSON-escaped: well under this.
 */
export const MAX_RERANK_ANSWER_BYTES = 8 * 1024 * 1024;

export const openAiCompatibleReranker: Reranker = async (request) => {
  if (!request.baseUrl) throw new RerankFailure('the profile has no base URL');
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (request.apiKey) headers.authorization = `Bearer ${request.apiKey}`;
  const body = JSON.stringify({ model: request.model, query: request.query, documents: request.documents, top_n: request.topN });
  const res = await post(`${request.baseUrl.replace(/\/+$/, '')}/rerank`, headers, body, request.signal);
  if (res.status < 200 || res.status > 299) {
    // The body may echo the key or the documents: only the status goes into the reason.
    discard(res.body);
    throw new RerankFailure(`the reranker answered ${res.status}`);
  }
  let text: string;
  try {
    text = await readText(res.body, MAX_RERANK_ANSWER_BYTES, request.signal);
  } catch (error) {
    if (request.signal.aborted) throw error;
    // readText words its failures for model routes ("The model route's upstream failed: <detail>."): keep the detail.
    const message = String((error as Error)?.message ?? error);
    throw new RerankFailure(`the answer could not be read: ${message.includes(': ') ? message.slice(message.indexOf(': ') + 2).replace(/\.$/, '') : message}`);
  }
  let answer: { results?: unknown; usage?: { total_tokens?: unknown } } | null;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new RerankFailure('the answer is not JSON');
  }
  if (answer === null || typeof answer !== 'object') throw new RerankFailure('the answer is not a JSON object');
  return { results: checkedResults(answer.results, request.documents.length, request.topN), tokens: reportedTokens(answer.usage?.total_tokens) };
};
