/**
 * LangChain.js' `@langchain/openai` (1.5.8, over the official SDK) against the platform's Responses API:
 * a ChatOpenAI given the built-in file_search tool calls `/v1/responses` (LangChain picks the Responses
 * API for built-in tools), and gets the answer's text with the file citations as its content blocks'
 * annotations, whole and streamed; `useResponsesApi: true` without tools is a plain response; a second
 * turn that hands LangChain's AIMessage back (with the earlier output items, `file_search_call`
 * included) continues the conversation. LangChain has no class for files or vector stores: the store
 * is set up here through the platform's own routes (the SDK's `vectorStores` do the same).
 */
import { ChatOpenAI, tools } from '@langchain/openai';
import { HumanMessage, type AIMessage, type AIMessageChunk } from '@langchain/core/messages';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addItem, createCollection, settledCollection, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { pdfFile } from '../helpers/knowledge-files.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';

const PAGES = [['Page one is about the harbour and its lighthouse keepers.'], ['Page two explains the volcanic geology of the island in detail.']];
const QUESTION = 'What is the island made of? Its volcanic geology.';

let w: OpenAiWorld;
let vs = '';
let pdfId = '';
let model: ChatOpenAI;

beforeAll(async () => {
  w = await startOpenAiWorld();
  const c: Client = { url: w.p.urls.ai, key: w.p.credentials.secret_key };
  const collectionId = await createCollection(c, 'cloud', 'Handbook');
  vs = `vs_${collectionId.slice('col_'.length)}`;
  pdfId = await uploadFile(c, await pdfFile(PAGES), 'handbook.pdf', 'application/pdf');
  expect((await addItem(c, collectionId, { upload_id: pdfId })).status).toBe(202);
  expect((await settledCollection(c, collectionId)).counts).toMatchObject({ done: 1, failed: 0 });
  // organization: null, as for the SDK: OPENAI_ORG_ID in a developer's environment must not name another tenant.
  model = new ChatOpenAI({ model: 'chat', apiKey: w.p.credentials.secret_key, maxRetries: 0, configuration: { baseURL: `${w.p.urls.ai}/v1`, organization: null, project: null } });
}, 120_000);

afterAll(async () => {
  await w?.close();
});

const chatCalls = () => w.upstream.requests.filter((r) => r.path.endsWith('/chat/completions'));
type TextBlock = { type: 'text'; text: string; annotations?: Array<Record<string, unknown>> };
const textBlocks = (m: AIMessage | AIMessageChunk) => (Array.isArray(m.content) ? (m.content as TextBlock[]).filter((b) => b.type === 'text') : []);

describe('ChatOpenAI with the file_search tool', () => {
  let first: AIMessage;

  it('calls the Responses API and answers the text with file citations as annotations', async () => {
    w.upstream.behavior.chunks = ['The island is volcanic [', '1]', '.'];
    const calls = chatCalls().length;
    first = await model.invoke(QUESTION, { tools: [tools.fileSearch({ vectorStoreIds: [vs] })] });
    expect(first.text).toBe('The island is volcanic.');
    const [block] = textBlocks(first);
    expect(block.annotations).toEqual([{ type: 'citation', source: 'file_citation', title: 'handbook.pdf', startIndex: 22, file_id: pdfId }]);
    expect(first.response_metadata).toMatchObject({ object: 'response', status: 'completed', model: 'chat' });
    expect(String(first.response_metadata.id)).toMatch(/^resp_/);
    expect(first.usage_metadata).toMatchObject({ input_tokens: 11, output_tokens: 7, total_tokens: 18 });
    // One grounded call reached the chat upstream, with the passages.
    expect(chatCalls().length).toBe(calls + 1);
    expect(JSON.stringify(chatCalls().at(-1)!.body.messages)).toContain('volcanic geology of the island');
  });

  it('streams the same text and annotations', async () => {
    w.upstream.behavior.chunks = ['The island is volcanic [', '1]', '.'];
    let whole: AIMessageChunk | undefined;
    let pieces = 0;
    for await (const chunk of await model.stream(QUESTION, { tools: [tools.fileSearch({ vectorStoreIds: [vs] })] })) {
      whole = whole ? whole.concat(chunk) : chunk;
      pieces++;
    }
    expect(pieces).toBeGreaterThan(1);
    expect(whole!.text).toBe('The island is volcanic.');
    const annotations = textBlocks(whole!).flatMap((b) => b.annotations ?? []);
    expect(annotations).toEqual([expect.objectContaining({ type: 'citation', source: 'file_citation', title: 'handbook.pdf', startIndex: 22, file_id: pdfId })]);
  });

  it('takes its own AIMessage back in a second turn (earlier output items, file_search_call included)', async () => {
    w.upstream.behavior.chunks = ['Basalt, mostly.'];
    const second = await model.invoke([new HumanMessage(QUESTION), first, new HumanMessage('Which rock exactly?')], { tools: [tools.fileSearch({ vectorStoreIds: [vs] })] });
    expect(second.text).toBe('Basalt, mostly.');
    const messages = chatCalls().at(-1)!.body.messages as Array<{ role: string; content: unknown }>;
    // The earlier answer went back as the assistant's turn, without its marker; the new question last.
    expect(messages.filter((m) => m.role !== 'system')).toEqual([
      { role: 'user', content: QUESTION },
      { role: 'assistant', content: 'The island is volcanic.' },
      { role: 'user', content: 'Which rock exactly?' },
    ]);
  });
});

describe('ChatOpenAI with useResponsesApi', () => {
  it('makes a plain response without tools', async () => {
    w.upstream.behavior.chunks = ['Hello there.'];
    const plain = new ChatOpenAI({ model: 'chat', useResponsesApi: true, apiKey: w.p.credentials.secret_key, maxRetries: 0, configuration: { baseURL: `${w.p.urls.ai}/v1`, organization: null, project: null } });
    const answer = await plain.invoke('Say hello.');
    expect(answer.text).toBe('Hello there.');
    expect(String(answer.response_metadata.id)).toMatch(/^resp_/);
    expect(chatCalls().at(-1)!.body.messages).toEqual([{ role: 'user', content: 'Say hello.' }]);
  });
});
