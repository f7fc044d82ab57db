/**
 * What a call may use, known before it runs (limits.ts reserves on it):
 * - `inputTokens`, an estimate for tokens a minute: 4 characters a token (OpenAI's rule of thumb), plus
 *   a few per message and per image; corrected to the real count when the call settles;
 * - `inputTokensBound`, the worst case the budget holds: every text's UTF-8 bytes (a token of the
 *   byte-level BPE tokenizers of OpenAI, Llama 3, Mistral or Claude is at least one byte), the JSON of
 *   what else becomes prompt (tools, a response format, parts that are neither text nor image), the
 *   messages' framing, and IMAGE_TOKENS_BOUND per image (docs/decisions/ai-limits.md);
 * - `maxOutputTokens`, the output ceiling (the request's or the route's, else DEFAULT_MAX_OUTPUT_TOKENS).
 */
import type { CallEstimate } from './limits.js';

export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;
const TOKENS_PER_IMAGE = 765;
/**
 * The most tokens one image costs on the models we know: GPT-4o high detail 1,445 (8 tiles), GPT-4.1
 * and o-series 2,489 (1,536 patches × 1.62), Claude about 1,600. Not GPT-4o mini, which counts an image
 * as up to 48,169 tokens at a price 33 times lower (docs/decisions/ai-limits.md).
 */
export const IMAGE_TOKENS_BOUND = 2_500;
/** Role and separators of a message (OpenAI counts 3, and 1 for a name), and the reply's priming. */
const PER_MESSAGE = 4;
const PER_REQUEST = 3;

const utf8Bytes = (text: string) => Buffer.byteLength(text, 'utf8');
const jsonBytes = (value: unknown) => (value === undefined ? 0 : utf8Bytes(JSON.stringify(value)));

/** `alsoPrompt`: what else the upstream turns into input tokens (tools, response_format). */
export function estimateChat(messages: unknown[], maxOutputTokens: number | undefined, alsoPrompt: unknown[] = []): CallEstimate {
  let chars = 0;
  let extra = 0;
  let bound = PER_REQUEST + alsoPrompt.reduce<number>((n, v) => n + jsonBytes(v), 0);
  for (const m of messages as { content?: unknown; name?: unknown; tool_calls?: unknown }[]) {
    extra += PER_MESSAGE;
    bound += PER_MESSAGE + (typeof m.name === 'string' ? utf8Bytes(m.name) : 0) + jsonBytes(m.tool_calls);
    if (typeof m.content === 'string') {
      chars += m.content.length;
      bound += utf8Bytes(m.content);
    } else if (Array.isArray(m.content)) {
      for (const p of m.content as { type?: string; text?: unknown }[]) {
        if (p.type === 'image_url') {
          extra += TOKENS_PER_IMAGE;
          bound += IMAGE_TOKENS_BOUND;
        } else if (typeof p.text === 'string') {
          chars += p.text.length;
          bound += utf8Bytes(p.text);
        } else bound += jsonBytes(p);
      }
    }
  }
  return { inputTokens: Math.ceil(chars / 4) + extra, inputTokensBound: bound, maxOutputTokens: maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS };
}

export function estimateEmbeddings(inputs: string[]): CallEstimate {
  return {
    inputTokens: inputs.reduce((n, s) => n + Math.ceil(s.length / 4), 0),
    inputTokensBound: inputs.reduce((n, s) => n + utf8Bytes(s), 0),
    maxOutputTokens: 0,
  };
}
