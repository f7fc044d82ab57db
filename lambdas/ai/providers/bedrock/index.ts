/**
 * Provider `bedrock`: Amazon Bedrock Runtime, chat through the Converse API (ConverseCommand,
 * ConverseStreamCommand; one request shape for every chat model Bedrock hosts) and embeddings through
 * InvokeModel (Titan Text Embeddings v2, one input a call; Cohere Embed, 96 a call). The route's
 * upstream_model is the model id (or an inference profile id / ARN). One client per process, with the
 * SDK's own region and credentials (the function's role): Bedrock routes take no API key. The mapping
 * is in mapping.ts.
 */
import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand, InvokeModelCommand } from '@aws-sdk/client-bedrock-runtime';
import type { EmbeddingList, ModelProvider, UpstreamCall } from '../../types.js';
import { upstreamError } from '../../upstream-errors.js';
import { bedrockError, cohereAnswer, cohereBody, COHERE_BATCH, completionOf, converseInput, isCohere, streamMapper, titanAnswer, titanBody } from './mapping.js';

let client: BedrockRuntimeClient | undefined;
/** The process's client, made at its first call (the region as the SDK reads it: AWS_REGION in Lambda). */
export const bedrockClient = (): BedrockRuntimeClient => (client ??= new BedrockRuntimeClient({}));

/** Embedding calls in flight at once for one request. */
const EMBED_CONCURRENCY = 8;

async function send<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw bedrockError(error);
  }
}

/** Runs `work` on every item, at most `limit` at once; results in item order. */
async function pooled<I, O>(items: I[], limit: number, work: (item: I) => Promise<O>): Promise<O[]> {
  const out = new Array<O>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

const invoke = (call: UpstreamCall, modelId: string, body: string) =>
  send(() => bedrockClient().send(new InvokeModelCommand({ modelId, contentType: 'application/json', accept: 'application/json', body }), { abortSignal: call.signal }));

export const bedrock: ModelProvider = {
  async chat(call, body) {
    const input = converseInput(call.route, body);
    const out = await send(() => bedrockClient().send(new ConverseCommand(input), { abortSignal: call.signal }));
    return completionOf(call.route, out);
  },

  async *chatStream(call, body) {
    const input = converseInput(call.route, body);
    const out = await send(() => bedrockClient().send(new ConverseStreamCommand(input), { abortSignal: call.signal }));
    if (!out.stream) throw upstreamError('the stream has no body');
    const map = streamMapper(call.route);
    try {
      for await (const event of out.stream) {
        const chunk = map(event);
        if (chunk) yield chunk;
      }
    } catch (error) {
      throw bedrockError(error);
    }
  },

  async embed(call, body) {
    const modelId = call.route.upstream_model ?? call.route.id;
    const inputs = body.input;
    let vectors: number[][];
    let tokens = 0;
    if (isCohere(modelId)) {
      const batches = Array.from({ length: Math.ceil(inputs.length / COHERE_BATCH) }, (_, b) => inputs.slice(b * COHERE_BATCH, (b + 1) * COHERE_BATCH));
      const answers = await pooled(batches, EMBED_CONCURRENCY, async (texts) => cohereAnswer((await invoke(call, modelId, cohereBody(texts))).body, texts));
      vectors = answers.flatMap((a) => a.embeddings);
      tokens = answers.reduce((n, a) => n + a.tokens, 0);
    } else {
      const answers = await pooled(inputs, EMBED_CONCURRENCY, async (text) => titanAnswer((await invoke(call, modelId, titanBody(text, body.dimensions))).body));
      vectors = answers.map((a) => a.embedding);
      tokens = answers.reduce((n, a) => n + a.tokens, 0);
    }
    const list: EmbeddingList = {
      object: 'list',
      data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
      model: call.route.id,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
    return list;
  },
};
