/**
 * Provider `bedrock` (lambdas/ai/providers/bedrock/) against a mocked Bedrock Runtime client
 * (aws-sdk-client-mock): the Converse request a chat maps to, the answer and the stream mapped back,
 * embeddings for Titan and Cohere, Bedrock's errors as the platform answers them, the abort signal.
 */
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  AccessDeniedException,
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  InvokeModelCommand,
  ModelNotReadyException,
  ThrottlingException,
  ValidationException,
  type ConverseStreamOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { bedrock } from '../../lambdas/ai/providers/bedrock/index.js';
import { providerOf } from '../../lambdas/ai/providers/index.js';
import { ROUTE_DEFAULTS, type ModelRoute } from '../../lambdas/ai/model-routes.js';
import type { ChatChunk, UpstreamCall } from '../../lambdas/ai/types.js';
import { PlatformError } from '../../lambdas/shared/errors.js';

const mock = mockClient(BedrockRuntimeClient);
beforeEach(() => mock.reset());
afterAll(() => mock.restore());

const route = (over: Partial<ModelRoute> = {}): ModelRoute => ({
  id: 'claude',
  organization_id: 'org_1',
  endpoint: '/v1/chat/completions',
  provider: 'bedrock',
  base_url: null,
  upstream_model: 'anthropic.claude-3-5-haiku-20241022-v1:0',
  default: true,
  owned_by: 'org_1',
  created: 1,
  ...ROUTE_DEFAULTS,
  ...over,
});
const callOf = (r: ModelRoute = route(), signal = new AbortController().signal): UpstreamCall => ({ route: r, apiKey: undefined, signal });
/** The options `send` was called with (the mock's call type lists the command only). */
const optionsOf = (call: { args: readonly unknown[] }) => (call.args as unknown[])[1] as { abortSignal?: AbortSignal } | undefined;
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);

describe('bedrock provider', () => {
  it('is the registered provider of bedrock routes, loaded at its first call', async () => {
    mock.on(ConverseCommand).resolves({ output: { message: { role: 'assistant', content: [{ text: 'via the registry' }] } }, stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, metrics: { latencyMs: 1 } });
    const answer = await providerOf(route()).chat(callOf(), { messages: [{ role: 'user', content: 'hi' }] });
    expect(answer.choices[0].message.content).toBe('via the registry');
    expect(mock.commandCalls(ConverseCommand)).toHaveLength(1);
  });

  describe('chat', () => {
    it('maps the request to a Converse request: system blocks, text and image parts, stop, max_tokens', async () => {
      mock.on(ConverseCommand).resolves({ output: { message: { role: 'assistant', content: [{ text: 'ok' }] } }, stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, metrics: { latencyMs: 1 } });
      await bedrock.chat(callOf(), {
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG.toString('base64')}` } }] },
        ],
        stop: 'END',
        max_tokens: 100,
        temperature: 0.2,
        top_p: 0.9,
        user: 'u_derived',
      });
      const calls = mock.commandCalls(ConverseCommand);
      expect(calls).toHaveLength(1);
      expect(calls[0].args[0].input).toEqual({
        modelId: 'anthropic.claude-3-5-haiku-20241022-v1:0',
        system: [{ text: 'Be brief.' }],
        messages: [{ role: 'user', content: [{ text: 'What is this?' }, { image: { format: 'png', source: { bytes: new Uint8Array(PNG) } } }] }],
        inferenceConfig: { maxTokens: 100, temperature: 0.2, topP: 0.9, stopSequences: ['END'] },
      });
    });

    it('maps tool calls, tool results and tools; merges consecutive turns of one role', async () => {
      mock.on(ConverseCommand).resolves({ output: { message: { role: 'assistant', content: [{ text: 'ok' }] } }, stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, metrics: { latencyMs: 1 } });
      await bedrock.chat(callOf(), {
        messages: [
          { role: 'user', content: 'Weather in Paris and Rome?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }, { id: 't2', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } }] },
          { role: 'tool', tool_call_id: 't1', content: '20C' },
          { role: 'tool', tool_call_id: 't2', content: [{ type: 'text', text: '25C' }] },
        ],
        max_completion_tokens: 50,
        stop: ['a', 'b'],
        tools: [{ type: 'function', function: { name: 'weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
        tool_choice: 'required',
      });
      expect(mock.commandCalls(ConverseCommand)[0].args[0].input).toEqual({
        modelId: 'anthropic.claude-3-5-haiku-20241022-v1:0',
        messages: [
          { role: 'user', content: [{ text: 'Weather in Paris and Rome?' }] },
          {
            role: 'assistant',
            content: [
              { toolUse: { toolUseId: 't1', name: 'weather', input: { city: 'Paris' } } },
              { toolUse: { toolUseId: 't2', name: 'weather', input: { city: 'Rome' } } },
            ],
          },
          { role: 'user', content: [{ toolResult: { toolUseId: 't1', content: [{ text: '20C' }] } }, { toolResult: { toolUseId: 't2', content: [{ text: '25C' }] } }] },
        ],
        inferenceConfig: { maxTokens: 50, stopSequences: ['a', 'b'] },
        toolConfig: {
          tools: [{ toolSpec: { name: 'weather', description: 'Weather of a city', inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } } } } } }],
          toolChoice: { any: {} },
        },
      });
    });

    it('refuses what Converse cannot take with a clear 400, before calling Bedrock', async () => {
      const refused = async (body: Record<string, unknown>) => {
        const error = await bedrock.chat(callOf(), { messages: [{ role: 'user', content: 'hi' }], ...body }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(PlatformError);
        return error as PlatformError;
      };
      const link = await refused({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] });
      expect([link.code, link.status]).toEqual(['invalid_messages', 400]);
      expect((await refused({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/bmp;base64,AAAA' } }] }] })).code).toBe('invalid_messages');
      expect((await refused({ messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: 'not json' } }] }] })).code).toBe('invalid_messages');
      expect((await refused({ tools: [{ type: 'web_search' }] })).code).toBe('unsupported_field_for_route');
      expect((await refused({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'none' })).code).toBe('unsupported_field_for_route');
      expect((await refused({ n: 2 })).code).toBe('unsupported_field_for_route');
      expect(mock.calls()).toHaveLength(0);
    });

    it('maps the answer to a chat.completion', async () => {
      mock.on(ConverseCommand).resolves({
        output: { message: { role: 'assistant', content: [{ text: 'Hello' }, { text: ' there' }] } },
        stopReason: 'max_tokens',
        usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
        metrics: { latencyMs: 10 },
      });
      const before = Math.floor(Date.now() / 1000);
      const answer = await bedrock.chat(callOf(), { messages: [{ role: 'user', content: 'hi' }] });
      expect(answer.id).toMatch(/^chatcmpl-[0-9a-f-]{36}$/);
      expect(answer.created).toBeGreaterThanOrEqual(before);
      expect(answer).toEqual({
        id: answer.id,
        object: 'chat.completion',
        created: answer.created,
        model: 'claude',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'length', logprobs: null }],
        usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
      });
    });

    it('maps tool use and every stop reason', async () => {
      mock.on(ConverseCommand).resolves({
        output: { message: { role: 'assistant', content: [{ toolUse: { toolUseId: 'tu_1', name: 'weather', input: { city: 'Paris' } } }] } },
        stopReason: 'tool_use',
        usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7 },
        metrics: { latencyMs: 1 },
      });
      const answer = await bedrock.chat(callOf(), { messages: [{ role: 'user', content: 'hi' }] });
      expect(answer.choices[0]).toEqual({
        index: 0,
        message: { role: 'assistant', content: null, tool_calls: [{ id: 'tu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
        finish_reason: 'tool_calls',
        logprobs: null,
      });
      for (const [stopReason, finish] of [['end_turn', 'stop'], ['stop_sequence', 'stop'], ['content_filtered', 'content_filter'], ['guardrail_intervened', 'content_filter']] as const) {
        mock.on(ConverseCommand).resolves({ output: { message: { role: 'assistant', content: [{ text: 'x' }] } }, stopReason, usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, metrics: { latencyMs: 1 } });
        expect((await bedrock.chat(callOf(), { messages: [{ role: 'user', content: 'hi' }] })).choices[0].finish_reason).toBe(finish);
      }
    });

    it('passes the call signal to the client', async () => {
      mock.on(ConverseCommand).resolves({ output: { message: { role: 'assistant', content: [{ text: 'ok' }] } }, stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, metrics: { latencyMs: 1 } });
      const signal = new AbortController().signal;
      await bedrock.chat(callOf(route(), signal), { messages: [{ role: 'user', content: 'hi' }] });
      expect(optionsOf(mock.commandCalls(ConverseCommand)[0])?.abortSignal).toBe(signal);
    });
  });

  describe('chatStream', () => {
    it('yields chunks as events arrive, in order, with the usage chunk last', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let finished = false;
      async function* events(): AsyncGenerator<ConverseStreamOutput> {
        yield { messageStart: { role: 'assistant' } };
        await gate; // the rest arrives only after the first chunk was read
        yield { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'Hel' } } };
        yield { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'lo' } } };
        yield { contentBlockStop: { contentBlockIndex: 0 } };
        yield { messageStop: { stopReason: 'end_turn' } };
        yield { metadata: { usage: { inputTokens: 7, outputTokens: 2, totalTokens: 9 }, metrics: { latencyMs: 5 } } };
        finished = true;
      }
      mock.on(ConverseStreamCommand).resolves({ stream: events() });
      const signal = new AbortController().signal;
      const stream = bedrock.chatStream(callOf(route(), signal), { messages: [{ role: 'user', content: 'hi' }], stream: true })[Symbol.asyncIterator]();

      const first = await stream.next();
      expect(finished).toBe(false);
      expect(first.value).toMatchObject({ object: 'chat.completion.chunk', model: 'claude', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
      release();
      const rest: ChatChunk[] = [];
      for (let step = await stream.next(); !step.done; step = await stream.next()) rest.push(step.value);
      expect(finished).toBe(true);

      const chunks = [first.value as ChatChunk, ...rest];
      expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
      expect(chunks[0].id).toMatch(/^chatcmpl-/);
      expect(chunks.map((c) => ({ choices: c.choices.map(({ delta, finish_reason }) => ({ delta, finish_reason })), usage: c.usage }))).toEqual([
        { choices: [{ delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: undefined },
        { choices: [{ delta: { content: 'Hel' }, finish_reason: null }], usage: undefined },
        { choices: [{ delta: { content: 'lo' }, finish_reason: null }], usage: undefined },
        { choices: [{ delta: {}, finish_reason: 'stop' }], usage: undefined },
        { choices: [], usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 } },
      ]);
      const sent = mock.commandCalls(ConverseStreamCommand)[0];
      expect(sent.args[0].input).toEqual({ modelId: 'anthropic.claude-3-5-haiku-20241022-v1:0', messages: [{ role: 'user', content: [{ text: 'hi' }] }] });
      expect(optionsOf(sent)?.abortSignal).toBe(signal);
    });

    it('streams tool calls as OpenAI tool_call deltas', async () => {
      async function* events(): AsyncGenerator<ConverseStreamOutput> {
        yield { messageStart: { role: 'assistant' } };
        yield { contentBlockStart: { contentBlockIndex: 1, start: { toolUse: { toolUseId: 'tu_1', name: 'weather' } } } };
        yield { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: '{"city":' } } } };
        yield { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: '"Paris"}' } } } };
        yield { messageStop: { stopReason: 'tool_use' } };
      }
      mock.on(ConverseStreamCommand).resolves({ stream: events() });
      const deltas: unknown[] = [];
      for await (const c of bedrock.chatStream(callOf(), { messages: [{ role: 'user', content: 'hi' }] })) deltas.push([c.choices[0].delta, c.choices[0].finish_reason]);
      expect(deltas).toEqual([
        [{ role: 'assistant', content: '' }, null],
        [{ tool_calls: [{ index: 0, id: 'tu_1', type: 'function', function: { name: 'weather', arguments: '' } }] }, null],
        [{ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, null],
        [{ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }, null],
        [{}, 'tool_calls'],
      ]);
    });

    it('maps an error at the start and an error event inside the stream', async () => {
      mock.on(ConverseStreamCommand).rejects(new ThrottlingException({ message: 'Too many tokens for "secret prompt"', $metadata: { httpStatusCode: 429 } }));
      const early = await bedrock.chatStream(callOf(), { messages: [{ role: 'user', content: 'hi' }] })[Symbol.asyncIterator]().next().catch((e: unknown) => e);
      expect(early).toMatchObject({ code: 'route_unavailable', status: 503 });

      async function* events(): AsyncGenerator<ConverseStreamOutput> {
        yield { messageStart: { role: 'assistant' } };
        yield { modelStreamErrorException: { message: 'the model said "secret prompt"', originalStatusCode: 500, originalMessage: 'x' } } as ConverseStreamOutput;
      }
      mock.on(ConverseStreamCommand).resolves({ stream: events() });
      const stream = bedrock.chatStream(callOf(), { messages: [{ role: 'user', content: 'hi' }] })[Symbol.asyncIterator]();
      await stream.next();
      const late = (await stream.next().catch((e: unknown) => e)) as PlatformError;
      expect([late.code, late.status]).toEqual(['upstream_error', 502]);
      expect(late.message).not.toContain('secret');

      // As the SDK raises an exception event: thrown while iterating, sometimes without the SDK's fields.
      async function* throwing(): AsyncGenerator<ConverseStreamOutput> {
        yield { messageStart: { role: 'assistant' } };
        throw Object.assign(new Error('Too many requests for "secret prompt"'), { name: 'ThrottlingException' });
      }
      mock.on(ConverseStreamCommand).resolves({ stream: throwing() });
      const thrown = bedrock.chatStream(callOf(), { messages: [{ role: 'user', content: 'hi' }] })[Symbol.asyncIterator]();
      await thrown.next();
      expect(await thrown.next().catch((e: unknown) => e)).toMatchObject({ code: 'route_unavailable', status: 503 });
    });
  });

  describe('embed', () => {
    const embedRoute = (model: string) => route({ id: 'emb', endpoint: '/v1/embeddings', upstream_model: model });

    it('calls Titan once per input and answers in input order with the token count', async () => {
      mock.on(InvokeModelCommand).callsFake(async (input: { body: string }) => {
        const { inputText } = JSON.parse(input.body) as { inputText: string };
        // The first input answers last: the order must still be the input's.
        if (inputText === 'a') await new Promise((r) => setTimeout(r, 20));
        return { body: encode({ embedding: [inputText.length, 0.5], inputTextTokenCount: inputText.length }), contentType: 'application/json' };
      });
      const signal = new AbortController().signal;
      const list = await bedrock.embed(callOf(embedRoute('amazon.titan-embed-text-v2:0'), signal), { input: ['a', 'bb', 'ccc'], encoding_format: 'float', dimensions: 256 });
      expect(list).toEqual({
        object: 'list',
        data: [
          { object: 'embedding', index: 0, embedding: [1, 0.5] },
          { object: 'embedding', index: 1, embedding: [2, 0.5] },
          { object: 'embedding', index: 2, embedding: [3, 0.5] },
        ],
        model: 'emb',
        usage: { prompt_tokens: 6, total_tokens: 6 },
      });
      const calls = mock.commandCalls(InvokeModelCommand);
      expect(calls).toHaveLength(3);
      expect(calls[0].args[0].input).toEqual({ modelId: 'amazon.titan-embed-text-v2:0', contentType: 'application/json', accept: 'application/json', body: JSON.stringify({ inputText: 'a', dimensions: 256, normalize: true }) });
      expect(optionsOf(calls[0])?.abortSignal).toBe(signal);
    });

    it('calls Cohere with batches of texts', async () => {
      mock.on(InvokeModelCommand).callsFake(async (input: { body: string }) => {
        const { texts } = JSON.parse(input.body) as { texts: string[] };
        return { body: encode({ id: 'x', response_type: 'embeddings_floats', embeddings: texts.map((t) => [t.length]), texts }), contentType: 'application/json' };
      });
      const inputs = Array.from({ length: 100 }, (_, i) => 'x'.repeat(i + 1));
      const list = await bedrock.embed(callOf(embedRoute('cohere.embed-multilingual-v3')), { input: inputs, encoding_format: 'float' });
      expect(list.data.map((d) => d.embedding)).toEqual(inputs.map((t) => [t.length]));
      expect(list.data.map((d) => d.index)).toEqual(inputs.map((_, i) => i));
      expect(list.usage.prompt_tokens).toBeGreaterThan(0);
      const calls = mock.commandCalls(InvokeModelCommand);
      expect(calls).toHaveLength(2);
      expect(JSON.parse(calls[0].args[0].input.body as string)).toEqual({ texts: inputs.slice(0, 96), input_type: 'search_document' });
      expect(JSON.parse(calls[1].args[0].input.body as string)).toEqual({ texts: inputs.slice(96), input_type: 'search_document' });
    });

    it('takes Cohere v4 embeddings by type', async () => {
      mock.on(InvokeModelCommand).resolves({ body: encode({ embeddings: { float: [[1], [2]] } }) as never, contentType: 'application/json' });
      const list = await bedrock.embed(callOf(embedRoute('cohere.embed-v4:0')), { input: ['a', 'b'] });
      expect(list.data.map((d) => d.embedding)).toEqual([[1], [2]]);
    });
  });

  describe('errors', () => {
    const chat = () => bedrock.chat(callOf(), { messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e as PlatformError);

    it('answers throttling and a model not ready as 503 route_unavailable', async () => {
      mock.on(ConverseCommand).rejects(new ThrottlingException({ message: 'Rate exceeded', $metadata: { httpStatusCode: 429 } }));
      const throttled = await chat();
      expect(throttled).toBeInstanceOf(PlatformError);
      expect([throttled.code, throttled.status]).toEqual(['route_unavailable', 503]);
      mock.on(ConverseCommand).rejects(new ModelNotReadyException({ message: 'warming', $metadata: { httpStatusCode: 429 } }));
      expect((await chat()).code).toBe('route_unavailable');
    });

    it('answers validation and access errors as 502 upstream_error, without AWS\'s message', async () => {
      mock.on(ConverseCommand).rejects(new ValidationException({ message: 'Malformed input: "my secret prompt"', $metadata: { httpStatusCode: 400 } }));
      const invalid = await chat();
      expect([invalid.code, invalid.status]).toEqual(['upstream_error', 502]);
      expect(invalid.message).not.toContain('secret');
      expect(invalid.message).toContain('ValidationException');
      mock.on(ConverseCommand).rejects(new AccessDeniedException({ message: 'no access', $metadata: { httpStatusCode: 403 } }));
      expect((await chat()).code).toBe('upstream_error');
    });

    it('lets network and abort errors through unchanged, for the gateway to map', async () => {
      const abort = Object.assign(new Error('aborted'), { name: 'AbortError' });
      mock.on(ConverseCommand).rejects(abort);
      expect(await chat()).toBe(abort);
      const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
      mock.on(InvokeModelCommand).rejects(reset);
      expect(await bedrock.embed(callOf(route({ upstream_model: 'amazon.titan-embed-text-v2:0' })), { input: ['a'] }).catch((e: unknown) => e)).toBe(reset);
    });
  });
});
