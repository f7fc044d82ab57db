/**
 * Provider `http`: a generic run route (spec 4.5, docs/ai/run.md). The run's `input` is POSTed as
 * JSON, unchanged, to the route's `base_url` (the whole URL, no path added), with the route's API key
 * as a Bearer token when it names one; the upstream's JSON object (or array) is the answer. The
 * gateway frame (gateway.ts) gives the call its key, its deadline and its limits.
 */
import type { UpstreamCall } from '../../types.js';
import { upstreamError } from '../../upstream-errors.js';

export async function httpRun(call: UpstreamCall, input: Record<string, unknown>): Promise<object> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`;
  const res = await fetch(call.route.base_url!, { method: 'POST', headers, body: JSON.stringify(input), signal: call.signal, redirect: 'error' });
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    throw upstreamError(`status ${res.status}`);
  }
  const text = await res.text();
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw upstreamError('the answer is not JSON');
  }
  if (answer === null || typeof answer !== 'object') throw upstreamError('the answer is not a JSON object or array');
  return answer;
}
