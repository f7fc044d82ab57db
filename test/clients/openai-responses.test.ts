/**
 * OpenAI's Responses API through the official SDK, unchanged (`client.responses.*`), over the local
 * platform with the fake embedder and the fake chat upstream: file_search grounded in a vector store
 * (a `cloud` collection made through /v1/collections and /v1/uploads) with its `[n]` markers turned
 * into file citations, whole and streamed (the SDK's own accumulator, which throws on any event it
 * does not expect), stored responses (retrieve, delete, `store: false`, `previous_response_id`
 * reaching the upstream), other tools refused, tenancy (another application, another organization),
 * capabilities, Idempotency-Key, and an upstream that breaks part-way.
 */
import OpenAI, { BadRequestError, NotFoundError, PermissionDeniedError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addItem, createCollection, settledCollection, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { pdfFile } from '../helpers/knowledge-files.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';

const PAGES = [
  ['Page one is about the harbour and its lighthouse keepers.'],
  ['Page two explains the volcanic geology of the island in detail.'],
  ['Page three lists the ferry timetable for the winter season.'],
];
const QUESTION = 'What is the island made of? Its volcanic geology.';

let w: OpenAiWorld;
let c: Client;
let client: OpenAI;
let collectionId = '';
let vs = '';
let pdfId = '';

beforeAll(async () => {
  w = await startOpenAiWorld();
  c = { url: w.p.urls.ai, key: w.p.credentials.secret_key };
  client = w.client;
  collectionId = await createCollection(c, 'cloud', 'Handbook');
  vs = `vs_${collectionId.slice('col_'.length)}`;
  pdfId = await uploadFile(c, await pdfFile(PAGES), 'handbook.pdf', 'application/pdf');
  expect((await addItem(c, collectionId, { upload_id: pdfId })).status).toBe(202);
  expect((await addItem(c, collectionId, { text: 'Puffins nest on the northern cliffs every spring.', filename: 'birds.txt' })).status).toBe(202);
  expect((await settledCollection(c, collectionId)).counts).toMatchObject({ done: 2, failed: 0 });
}, 120_000);

afterAll(async () => {
  await w?.close();
});

const tools = (): OpenAI.Responses.Tool[] => [{ type: 'file_search', vector_store_ids: [vs] }];
const messageOf = (r: OpenAI.Responses.Response) => r.output.find((o) => o.type === 'message') as OpenAI.Responses.ResponseOutputMessage;
const textOf = (r: OpenAI.Responses.Response) => messageOf(r).content[0] as OpenAI.Responses.ResponseOutputText;
const lastUpstream = () => w.upstream.requests.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!;

describe('responses.create with file_search', () => {
  let whole: OpenAI.Responses.Response;

  it('answers through the chat route with the passages, the markers made file citations', async () => {
    w.upstream.behavior.chunks = ['The island is volcanic [', '1]', '.'];
    whole = await client.responses.create({ model: 'chat', input: QUESTION, tools: tools(), include: ['file_search_call.results'] });
    expect(whole).toMatchObject({ object: 'response', status: 'completed', model: 'chat', error: null, store: true });
    expect(whole.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(whole.output_text).toBe('The island is volcanic.');
    const [search, message] = whole.output as [OpenAI.Responses.ResponseFileSearchToolCall, OpenAI.Responses.ResponseOutputMessage];
    expect(search).toMatchObject({ type: 'file_search_call', status: 'completed', queries: [QUESTION] });
    expect(search.id).toMatch(/^fs_[0-9a-f]{32}$/);
    expect(search.results![0]).toMatchObject({ file_id: pdfId, filename: 'handbook.pdf', text: expect.stringContaining('volcanic geology') });
    expect(message).toMatchObject({ type: 'message', role: 'assistant', status: 'completed' });
    expect(message.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(textOf(whole).annotations).toEqual([
      { type: 'file_citation', file_id: pdfId, filename: 'handbook.pdf', index: 22, citation: expect.objectContaining({ collection_id: collectionId, locator: 'page=2' }) },
    ]);
    expect(whole.usage).toMatchObject({ input_tokens: 11, output_tokens: 7, total_tokens: 18 });
    // The passages reached the upstream's prompt, between the request's tags.
    expect(JSON.stringify(lastUpstream().body.messages)).toContain('Page two explains the volcanic geology of the island');
  });

  it('keeps results off the search item unless included', async () => {
    const r = await client.responses.create({ model: 'chat', input: QUESTION, tools: tools() });
    expect((r.output[0] as OpenAI.Responses.ResponseFileSearchToolCall).results).toBeNull();
    expect(textOf(r).annotations[0]).toMatchObject({ file_id: pdfId, index: 22 });
  });

  it('streams OpenAI’s events in order, and the SDK’s accumulated response is the whole one', async () => {
    w.upstream.behavior.chunks = ['The island is volcanic [', '1]', '.'];
    const stream = client.responses.stream({ model: 'chat', input: QUESTION, tools: tools(), include: ['file_search_call.results'] });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const streamed = await stream.finalResponse();
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.file_search_call.in_progress',
      'response.file_search_call.searching',
      'response.file_search_call.completed',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.annotation.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as OpenAI.Responses.ResponseTextDeltaEvent).delta)).toEqual(['The island is volcanic', '.']);
    expect(streamed.output_text).toBe('The island is volcanic.');
    expect(streamed.status).toBe('completed');
    expect(textOf(streamed).annotations).toEqual(textOf(whole).annotations);
    expect((streamed.output[0] as OpenAI.Responses.ResponseFileSearchToolCall).results).toEqual((whole.output[0] as OpenAI.Responses.ResponseFileSearchToolCall).results);
    expect(streamed.usage).toMatchObject({ input_tokens: 11, output_tokens: 3 });
    // Stored before response.completed left: retrievable at once.
    expect((await client.responses.retrieve(streamed.id)).output_text).toBe('The island is volcanic.');
  });

  it('writes each event with its `event:` line and ends without [DONE]', async () => {
    w.upstream.behavior.chunks = ['Basalt [1]', '.'];
    const res = await fetch(`${w.p.urls.ai}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.p.credentials.secret_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat', input: QUESTION, tools: tools(), stream: true }),
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const blocks = (await res.text()).split('\n\n').filter(Boolean);
    for (const block of blocks) {
      const [eventLine, dataLine, ...rest] = block.split('\n');
      expect(rest).toEqual([]);
      expect(eventLine).toBe(`event: ${JSON.parse(dataLine.slice('data: '.length)).type}`);
    }
    expect(blocks.at(-1)).toMatch(/^event: response\.completed\n/);
    expect(blocks.join('')).not.toContain('[DONE]');
  });

  it('runs no search with tool_choice none', async () => {
    w.upstream.behavior.chunks = ['No search [1].'];
    const r = await client.responses.create({ model: 'chat', input: QUESTION, tools: tools(), tool_choice: 'none' });
    expect(r.output.map((o) => o.type)).toEqual(['message']);
    expect(r.output_text).toBe('No search [1].');
    expect(JSON.stringify(lastUpstream().body.messages)).not.toContain('volcanic geology of the island');
  });
});

describe('stored responses', () => {
  it('previous_response_id carries the conversation to the upstream, without the earlier instructions', async () => {
    w.upstream.behavior.chunks = ['Hello, Ada.'];
    const first = await client.responses.create({ model: 'chat', instructions: 'Be brief.', input: 'My name is Ada.' });
    w.upstream.behavior.chunks = ['You are Ada.'];
    const second = await client.responses.create({ model: 'chat', input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is my name?' }] }], previous_response_id: first.id });
    expect(second).toMatchObject({ previous_response_id: first.id, output_text: 'You are Ada.' });
    expect(lastUpstream().body.messages).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hello, Ada.' },
      { role: 'user', content: [{ type: 'text', text: 'What is my name?' }] },
    ]);
    const third = await client.responses.create({ model: 'chat', input: 'And again?', previous_response_id: second.id });
    expect(third.output_text).toBe('You are Ada.');
    expect(lastUpstream().body.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
  });

  it('retrieve answers the stored response; delete forgets it', async () => {
    w.upstream.behavior.chunks = ['Kept.'];
    const r = await client.responses.create({ model: 'chat', input: 'Keep this.' });
    const got = await client.responses.retrieve(r.id);
    expect(got).toEqual(r);
    await client.responses.delete(r.id);
    await expect(client.responses.retrieve(r.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.responses.delete(r.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('store: false keeps nothing: retrieve is 404 and previous_response_id 400', async () => {
    const r = await client.responses.create({ model: 'chat', input: 'Forget this.', store: false });
    expect((r as unknown as { store: boolean }).store).toBe(false);
    await expect(client.responses.retrieve(r.id)).rejects.toBeInstanceOf(NotFoundError);
    const next = client.responses.create({ model: 'chat', input: 'Go on.', previous_response_id: r.id });
    await expect(next).rejects.toBeInstanceOf(BadRequestError);
    await expect(next).rejects.toMatchObject({ code: 'invalid_body', param: 'previous_response_id' });
  });

  it("another application's or organization's response is 404, and unusable as previous_response_id", async () => {
    const r = await client.responses.create({ model: 'chat', input: 'Mine.' });
    const app = await w.tenants.createApplication(w.p.credentials.workspace_id, 'other app', ['ai.chat', 'knowledge']);
    const appClient = w.clientFor((await w.tenants.createSecretKey(w.p.credentials.organization_id, app.id)).key);
    await expect(appClient.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404, code: 'response_not_found' });
    await expect(appClient.responses.delete(r.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(appClient.responses.create({ model: 'chat', input: 'x', previous_response_id: r.id })).rejects.toMatchObject({ status: 400, param: 'previous_response_id' });
    const other = await w.otherOrganization();
    await expect(other.client.responses.retrieve(r.id)).rejects.toBeInstanceOf(NotFoundError);
    // Still there for its own application.
    expect((await client.responses.retrieve(r.id)).id).toBe(r.id);
  });
});

describe('refusals', () => {
  it('any other tool is 400 unsupported_field naming it', async () => {
    const call = client.responses.create({ model: 'chat', input: 'x', tools: [{ type: 'function', name: 'f', parameters: {}, strict: false }] });
    await expect(call).rejects.toBeInstanceOf(BadRequestError);
    await expect(call).rejects.toMatchObject({ code: 'unsupported_field', param: 'tools.0.type', type: 'invalid_request_error' });
    await expect(client.responses.create({ model: 'chat', input: 'x', background: true })).rejects.toMatchObject({ status: 400, code: 'unsupported_field' });
  });

  it("another organization's vector store is 404, before any upstream call", async () => {
    const other = await w.otherOrganization();
    const calls = w.upstream.requests.length;
    await expect(other.client.responses.create({ model: 'chat', input: QUESTION, tools: tools() })).rejects.toMatchObject({ status: 404, code: 'collection_not_found' });
    expect(w.upstream.requests.length).toBe(calls);
  });

  it('file_search needs the knowledge capability; the route needs ai.chat', async () => {
    const keyOf = async (name: string, caps: string[]) => {
      const app = await w.tenants.createApplication(w.p.credentials.workspace_id, name, caps as never);
      return w.clientFor((await w.tenants.createSecretKey(w.p.credentials.organization_id, app.id)).key);
    };
    const chatOnly = await keyOf('chat only', ['ai.chat']);
    const refused = chatOnly.responses.create({ model: 'chat', input: QUESTION, tools: tools() });
    await expect(refused).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(refused).rejects.toMatchObject({ code: 'capability_not_enabled' });
    w.upstream.behavior.chunks = ['Plain.'];
    expect((await chatOnly.responses.create({ model: 'chat', input: 'Hi' })).output_text).toBe('Plain.');
    const knowledgeOnly = await keyOf('knowledge only', ['knowledge']);
    await expect(knowledgeOnly.responses.create({ model: 'chat', input: 'Hi' })).rejects.toMatchObject({ status: 403, code: 'capability_not_enabled' });
  });
});

describe('idempotency and failures', () => {
  it('an Idempotency-Key answers the kept response again, without a second upstream call', async () => {
    w.upstream.behavior.chunks = ['Once [1].'];
    const key = `resp-${Date.now()}`;
    const first = await client.responses.create({ model: 'chat', input: QUESTION, tools: tools() }, { headers: { 'Idempotency-Key': key } });
    const calls = w.upstream.requests.length;
    const { data: again, response } = await client.responses.create({ model: 'chat', input: 'anything else' }, { headers: { 'Idempotency-Key': key } }).withResponse();
    expect(response.headers.get('x-idempotent-replay')).toBe('true');
    expect(again.id).toBe(first.id);
    expect(again.output_text).toBe('Once.');
    expect(w.upstream.requests.length).toBe(calls);
  });

  it('an upstream that breaks part-way ends the stream with error and response.failed', async () => {
    // The chunk right before the break may go down with the connection: a blank one.
    w.upstream.behavior.chunks = ['The island ', 'is volcanic [1].', ' ', 'never sent'];
    w.upstream.behavior.breakAfter = 3;
    w.upstream.behavior.chunkDelayMs = 30;
    try {
      const stream = await client.responses.create({ model: 'chat', input: QUESTION, tools: tools(), stream: true });
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const types = events.map((e) => e.type);
      expect(types.slice(-2)).toEqual(['error', 'response.failed']);
      expect(types).not.toContain('response.completed');
      expect(events.at(-2)).toMatchObject({ type: 'error', code: expect.stringMatching(/^(upstream_error|route_unavailable)$/), param: null });
      const failed = events.at(-1) as OpenAI.Responses.ResponseFailedEvent;
      expect(failed.response).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
      // The text that came before the break, its marker made a citation.
      expect(textOf(failed.response).text.trimEnd()).toBe('The island is volcanic.');
      expect(textOf(failed.response).annotations).toHaveLength(1);
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));

      // The SDK's stream helper treats OpenAI's `error` event as the stream's failure.
      const helper = client.responses.stream({ model: 'chat', input: QUESTION, tools: tools() });
      await expect(helper.finalResponse()).rejects.toMatchObject({ type: 'error' });
    } finally {
      w.upstream.behavior.breakAfter = undefined;
      w.upstream.behavior.chunkDelayMs = 0;
    }
  });
});
