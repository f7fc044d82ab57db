/**
 * What a call may use, known before it runs (limits.ts reserves on it): input tokens estimated from
 * the text (4 characters a token, as OpenAI's rule of thumb, plus a few per message and per image), and
 * the output ceiling (the request's or the route's, else DEFAULT_MAX_OUTPUT_TOKENS).
 */
import type { CallEstimate } from './limits.js';

export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;
const TOKENS_PER_IMAGE = 765;

export function estimateChat(messages: unknown[], maxOutputTokens: number | undefined): CallEstimate {
  let chars = 0;
  let extra = 0;
  for (const m of messages as { content?: unknown }[]) {
    extra += 4;
    if (typeof m.content === 'string') chars += m.content.length;
    else if (Array.isArray(m.content)) for (const p of m.content as { type?: string; text?: string }[]) p.type === 'image_url' ? (extra += TOKENS_PER_IMAGE) : (chars += p.text?.length ?? 0);
  }
  return { inputTokens: Math.ceil(chars / 4) + extra, maxOutputTokens: maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS };
}

export function estimateEmbeddings(inputs: string[]): CallEstimate {
  return { inputTokens: inputs.reduce((n, s) => n + Math.ceil(s.length / 4), 0), maxOutputTokens: 0 };
}
