/**
 * Provider `http`: a generic run route (spec 4.5, docs/ai/run.md). The run's `input` is POSTed as
 * JSON, unchanged (the text the client sent, run.ts), to the route's `base_url` (the whole URL, no path added), with the route's API key
 * as a Bearer token when it names one; the upstream's JSON object (or array) is the answer. The
 * gateway frame (gateway.ts) gives the call its key, its deadline and its limits.
 */
import type { UpstreamCall } from '../../types.js';
import { routeUnavailable, upstreamError } from '../../upstream-errors.js';
import { discard, jsonAnswer, MAX_ANSWER_BYTES, post } from '../upstream-http.js';

export async function httpRun(call: UpstreamCall, input: string): Promise<object> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`;
  const res = await post(call.route.base_url!, headers, input, call.signal);
  // Redirects are not followed: the route's URL is not where the upstream is (docs/ai/run.md).
  if (res.status >= 300 && res.status <= 399) {
    discard(res.body);
    throw routeUnavailable(`it redirects (status ${res.status})`);
  }
  const answer = await jsonAnswer(res, call.route.max_answer_bytes ?? MAX_ANSWER_BYTES, call.signal);
  if (answer === null || typeof answer !== 'object') throw upstreamError('the answer is not a JSON object or array');
  return answer;
}
