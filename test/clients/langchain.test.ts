/**
 * The LangChain.js integration (clients/typescript/langchain) against the local platform and its fake
 * upstreams: retrieval chains (retriever → formatted documents → ChatPromptTemplate → a chat model
 * over the platform's /v1/chat/completions → StringOutputParser) over a knowledge collection and over
 * the vector database, whose retrieved passages must reach the chat upstream's prompt; the vector
 * store's adds (ids, flattened metadata, scopes, skips), searches (scores, filters), deletes and its
 * refusal of vectors; the embeddings over /v1/embeddings.
 */
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Document, type DocumentInterface } from '@langchain/core/documents';
import { SimpleChatModel } from '@langchain/core/language_models/chat_models';
import type { BaseMessage } from '@langchain/core/messages';
import { StringOutputParser } from '@langchain/core/output_parsers';
import { ChatPromptTemplate } from '@langchain/core/prompts';
import { RunnablePassthrough, RunnableSequence } from '@langchain/core/runnables';
import { createAiClient, addCollectionItem, unwrap, waitForItem, PlatformApiError, type AiClient, type CollectionIndexing } from '../../clients/typescript/src/index.js';
import { CollectionRetriever, flattenMetadata, PlatformEmbeddings, PlatformIngestError, PlatformVectorStore, toPlatformFilter } from '../../clients/typescript/langchain/index.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { fakeVector, startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { GUIDE } from '../helpers/island-guide.js';

/** A chat model over the platform's chat completions with the official openai SDK, each call with an X-Operation-Id of its own (spec 4.1). */
class PlatformChat extends SimpleChatModel {
  constructor(private readonly openai: OpenAI) {
    super({});
  }

  _llmType(): string {
    return 'platform-chat';
  }

  async _call(messages: BaseMessage[]): Promise<string> {
    const role = (m: BaseMessage) => ({ human: 'user', ai: 'assistant', system: 'system' })[m.getType() as 'human' | 'ai' | 'system'] ?? 'user';
    const completion = await this.openai.chat.completions.create(
      { model: 'auto', messages: messages.map((m) => ({ role: role(m), content: m.text }) as OpenAI.ChatCompletionMessageParam) },
      { headers: { 'X-Operation-Id': `op-${randomUUID()}` } },
    );
    return completion.choices[0].message.content ?? '';
  }
}


const PROMPT = ChatPromptTemplate.fromMessages([
  ['system', 'Answer from these sources only, citing them by number.\n\n{context}'],
  ['human', '{question}'],
]);

/** Each document numbered, with where it came from when it has a citation. */
const formatDocuments = (docs: DocumentInterface[]) =>
  docs.map((d, i) => `[${i + 1}]${d.metadata.citation ? ` (${d.metadata.citation.locator})` : ''} ${d.pageContent}`).join('\n\n');

/** An item's processing (a process of its own per file) takes seconds, more on a busy machine. */
const PROCESSING = { intervalMs: 50, timeoutMs: 90_000 };

let p: TestPlatform;
let embedder: FakeEmbedder;
let upstream: FakeOpenAi;
let ai: AiClient;
let chat: PlatformChat;

beforeAll(async () => {
  p = await startTestPlatform();
  embedder = await startFakeEmbedder();
  upstream = await startFakeOpenAi();
  const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  const org = p.credentials.organization_id;
  await routes.set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await routes.set(org, { id: 'chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: upstream.baseUrl, upstream_model: 'gpt-fake', default: true });
  await createVectorDatabase(p.engine, p.credentials.workspace_id, 'emb');
  ai = createAiClient({ baseUrl: p.urls.ai, credential: p.credentials.secret_key });
  chat = new PlatformChat(new OpenAI({ apiKey: p.credentials.secret_key, baseURL: `${p.urls.ai}/v1`, maxRetries: 0 }));
});

afterAll(async () => {
  await upstream?.close();
  await embedder?.close();
  await p?.close();
});

beforeEach(() => {
  upstream.requests.length = 0;
});

/** The system and user messages the chat upstream was asked with last. */
const upstreamPrompt = () => {
  const messages = upstream.requests.at(-1)!.body.messages as { role: string; content: string }[];
  return { system: messages.find((m) => m.role === 'system')!.content, user: messages.find((m) => m.role === 'user')!.content };
};

describe('a retrieval chain over a knowledge collection', () => {
  it('retrieves the cited chunk, hands it to the chat model through the prompt, and answers what the model said', { timeout: 2 * PROCESSING.timeoutMs }, async () => {
    const collection = unwrap(await ai.POST('/v1/collections', { body: { mode: 'cloud', name: 'Island' } })).id;
    const item = await addCollectionItem(ai, collection, { text: GUIDE, filename: 'guide.md' });
    expect(await waitForItem(ai, collection, item.item_id, PROCESSING)).toMatchObject({ status: 'done' });

    const indexing: CollectionIndexing[] = [];
    const retriever = new CollectionRetriever({ client: ai, collectionId: collection, topK: 1, onIndexing: (i) => indexing.push(i) });
    const chain = RunnableSequence.from([{ context: retriever.pipe(formatDocuments), question: new RunnablePassthrough() }, PROMPT, chat, new StringOutputParser()]);
    upstream.behavior.chunks = ['It leaves at 08:00 and 16:00 [1].'];

    const answer = await chain.invoke('When does the winter ferry leave the harbour?');

    expect(answer).toBe('It leaves at 08:00 and 16:00 [1].');
    const prompt = upstreamPrompt();
    expect(prompt.system).toContain('[1] (heading=Island guide > Ferry > Winter) ');
    expect(prompt.system).toContain('The winter ferry leaves the harbour at 08:00 and 16:00.');
    expect(prompt.system).not.toContain('Volcanic rock');
    expect(prompt.user).toBe('When does the winter ferry leave the harbour?');
    expect(indexing).toEqual([{ indexed: 1, total: 1, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 }]);
  });

  it('answers documents whose metadata is the score and the citation', { timeout: 2 * PROCESSING.timeoutMs }, async () => {
    const collection = unwrap(await ai.POST('/v1/collections', { body: { mode: 'cloud' } })).id;
    const item = await waitForItem(ai, collection, (await addCollectionItem(ai, collection, { text: GUIDE, filename: 'guide.md' })).item_id, PROCESSING);
    const docs = await new CollectionRetriever({ client: ai, collectionId: collection, topK: 2 }).invoke('volcanic rock cliffs');
    expect(docs).toHaveLength(2);
    expect(docs[0]).toMatchObject({
      id: `${item.item_id}/${docs[0].metadata.citation.chunk_id}`,
      pageContent: expect.stringContaining('Volcanic rock forms the cliffs of the island.'),
      metadata: { score: expect.any(Number), citation: { collection_id: collection, item_id: item.item_id, package_id: item.package_id, chunk_id: expect.stringMatching(/^chk_/), locator: 'heading=Island guide > Geology' } },
    });
    expect(docs[0].metadata.score).toBeGreaterThanOrEqual(docs[1].metadata.score);
  });

  it('throws the platform’s error for a collection that is not there', async () => {
    const error = await new CollectionRetriever({ client: ai, collectionId: 'col_00000000000000000000000000000000' }).invoke('x').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PlatformApiError);
    expect(error).toMatchObject({ status: 404, code: 'collection_not_found' });
  });
});

describe('PlatformVectorStore', () => {
  it('feeds a retrieval chain: asRetriever over the stored passages, the best one in the prompt', async () => {
    const store = new PlatformVectorStore({ client: ai, scope: 'local' });
    await store.addDocuments([
      new Document({ pageContent: 'Refunds reach your card within five days.', metadata: { source: 'faq.md' } }),
      new Document({ pageContent: 'Parcels ship from the harbour warehouse every morning.', metadata: { source: 'faq.md' } }),
    ]);
    const chain = RunnableSequence.from([{ context: store.asRetriever(1).pipe(formatDocuments), question: new RunnablePassthrough() }, PROMPT, chat, new StringOutputParser()]);
    upstream.behavior.chunks = ['Within five days [1].'];
    expect(await chain.invoke('When do refunds reach my card?')).toBe('Within five days [1].');
    expect(upstreamPrompt().system).toContain('[1] Refunds reach your card within five days.');
    expect(upstreamPrompt().system).not.toContain('Parcels');
  });

  it('stores documents under their ids with flat metadata and finds them by text with scores and filters', async () => {
    const store = new PlatformVectorStore({ client: ai });
    const ids = await store.addDocuments(
      [
        new Document({ id: 'doc-lighthouse', pageContent: 'The lighthouse keeper climbs the tower at dusk.', metadata: { source: 'coast.md', tag: ['coast', 'night'], loc: { lines: { from: 3, to: 4 } }, skip: null } }),
        new Document({ pageContent: 'The bakery sells fresh bread at dawn.', metadata: { id: 'doc-bakery', source: 'town.md', tag: ['town'], year: 2026, open: true } }),
        new Document({ pageContent: 'The town hall opens at nine.', metadata: { source: 'town.md', tag: ['town'] } }),
      ],
      { ids: [undefined as unknown as string, undefined as unknown as string, 'doc-hall'] },
    );
    expect(ids).toEqual(['doc-lighthouse', 'doc-bakery', 'doc-hall']);

    const [[best, score]] = await store.similaritySearchWithScore('the lighthouse keeper at dusk', 1);
    expect(best).toMatchObject({ id: 'doc-lighthouse', pageContent: 'The lighthouse keeper climbs the tower at dusk.', metadata: { source: 'coast.md', tag: ['coast', 'night'], 'loc.lines.from': 3, 'loc.lines.to': 4 } });
    expect(best.metadata).not.toHaveProperty('skip');
    expect(score).toBeGreaterThan(0.5);

    const town = await store.similaritySearch('the lighthouse keeper at dusk', 5, { tag: ['town', 'village'] });
    expect(town.map((d) => d.id).sort()).toEqual(['doc-bakery', 'doc-hall']);
    expect(town.find((d) => d.id === 'doc-bakery')!.metadata).toEqual({ id: 'doc-bakery', source: 'town.md', tag: ['town'], year: 2026, open: true });
    expect((await store.similaritySearch('bread', 5, { source: 'coast.md' })).map((d) => d.id)).toEqual(['doc-lighthouse']);
  });

  it('keeps the scopes apart: local for this key only, hybrid searching both', async () => {
    // A second organization-wide key of the same organization: a local scope of its own.
    const { key } = await new Tenants(p.engine.kv, () => p.engine.clock.now()).createSecretKey(p.credentials.organization_id);
    const other = createAiClient({ baseUrl: p.urls.ai, credential: key });
    await new PlatformVectorStore({ client: ai, scope: 'local' }).addDocuments([new Document({ id: 'mine-only', pageContent: 'A private note about the orchard.' })]);
    expect((await new PlatformVectorStore({ client: ai, mode: 'hybrid' }).similaritySearch('private note about the orchard', 1)).map((d) => d.id)).toEqual(['mine-only']);
    expect((await new PlatformVectorStore({ client: other, scope: 'local' }).similaritySearch('private note about the orchard', 5)).map((d) => d.id)).toEqual([]);
  });

  it('deletes documents by id, and a passage grouped under a documentId goes with its document', async () => {
    const store = new PlatformVectorStore({ client: ai });
    await store.addDocuments([new Document({ id: 'del-a', pageContent: 'Zebras graze on the savanna.' })]);
    await store.addDocuments([new Document({ id: 'del-b#1', pageContent: 'Zebras sleep standing up.' }), new Document({ id: 'del-b#2', pageContent: 'Zebras have stripes.' })], { documentId: 'del-b' });
    expect((await store.similaritySearch('zebras', 10)).map((d) => d.id).filter((id) => id?.startsWith('del-')).sort()).toEqual(['del-a', 'del-b#1', 'del-b#2']);
    await store.delete({ ids: ['del-a', 'del-b', 'never-added'] });
    expect((await store.similaritySearch('zebras', 10)).map((d) => d.id).filter((id) => id?.startsWith('del-'))).toEqual([]);
    // A deleted document takes passages again only at a higher generation.
    await expect(store.addDocuments([new Document({ id: 'del-a', pageContent: 'Zebras are back.' })])).rejects.toMatchObject({ name: 'PlatformIngestError', skipped: [{ index: 0, id: 'del-a', reason: 'document_deleted' }] });
    await store.addDocuments([new Document({ id: 'del-a', pageContent: 'Zebras are back.' })], { generation: 2 });
    expect((await store.similaritySearch('zebras are back', 1)).map((d) => d.pageContent)).toEqual(['Zebras are back.']);
  });

  it('reports the documents the platform skipped, after storing the others', async () => {
    const store = new PlatformVectorStore({ client: ai });
    const error = await store
      .addDocuments([new Document({ id: 'ok-1', pageContent: 'Owls hunt at night.' }), new Document({ id: 'bad-1', pageContent: 'Bad key.', metadata: { ['k'.repeat(65)]: 'x' } }), new Document({ id: 'blank', pageContent: '   ' })])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PlatformIngestError);
    expect(error).toMatchObject({ ingested: 1, ids: ['ok-1', 'bad-1', 'blank'], skipped: [{ index: 1, id: 'bad-1', reason: 'invalid_metadata' }, { index: 2, id: 'blank', reason: 'invalid_text' }] });
    expect((await store.similaritySearch('owls hunt at night', 1)).map((d) => d.id)).toEqual(['ok-1']);
  });

  it('sends more than 100 documents in calls of 100', async () => {
    const store = new PlatformVectorStore({ client: ai, scope: 'local' });
    const calls = embedder.calls.length;
    const ids = await store.addDocuments(Array.from({ length: 130 }, (_, i) => new Document({ pageContent: `Numbered passage ${i} of the batch.` })));
    expect(new Set(ids).size).toBe(130);
    expect(embedder.calls.slice(calls).map((c) => c.length)).toEqual([100, 30]);
  });

  it('refuses vectors: the platform embeds and searches by text', async () => {
    const store = new PlatformVectorStore({ client: ai });
    await expect(store.addVectors()).rejects.toThrow(/by text/);
    await expect(store.similaritySearchVectorWithScore()).rejects.toThrow(/by text/);
  });

  it('throws the platform’s invalid_field for a k or filter it refuses', async () => {
    const store = new PlatformVectorStore({ client: ai });
    await expect(store.similaritySearch('x', 51)).rejects.toMatchObject({ name: 'PlatformApiError', status: 400, code: 'invalid_field', param: 'top_k' });
    await expect(store.similaritySearch('x', 1, { color: 'red' } as never)).rejects.toMatchObject({ code: 'invalid_field', param: 'filter.color' });
  });

  it('maps filters and flattens metadata as the platform takes them', () => {
    expect(toPlatformFilter({ tag: ['a', 'b'], kind: 'faq', language: { $in: ['en'] }, source: undefined })).toEqual({ tag: { $in: ['a', 'b'] }, kind: 'faq', language: { $in: ['en'] } });
    expect(toPlatformFilter({})).toBeUndefined();
    expect(flattenMetadata({ a: { b: { c: 1 } }, d: new Date(Date.UTC(2026, 0, 2)), e: [1, true, 'x'], f: [{ g: 1 }], h: Number.NaN, i: null, j: () => 1 })).toEqual({
      'a.b.c': 1,
      d: '2026-01-02T00:00:00.000Z',
      e: ['1', 'true', 'x'],
      f: '[{"g":1}]',
    });
  });
});

describe('PlatformEmbeddings', () => {
  it('embeds through /v1/embeddings with the default route, in order and in batches', async () => {
    const embeddings = new PlatformEmbeddings({ client: ai, batchSize: 2 });
    expect(await embeddings.embedQuery('harbour lights')).toEqual(fakeVector('harbour lights'));
    const calls = embedder.calls.length;
    expect(await embeddings.embedDocuments(['one', 'two', 'three'])).toEqual([fakeVector('one'), fakeVector('two'), fakeVector('three')]);
    expect(embedder.calls.slice(calls)).toEqual([['one', 'two'], ['three']]);
  });

  it('throws the platform’s error, without retrying a refusal', async () => {
    const calls = embedder.calls.length;
    await expect(new PlatformEmbeddings({ client: ai, model: 'no-such-route' }).embedQuery('x')).rejects.toMatchObject({ name: 'PlatformApiError', status: 400, code: 'model_not_allowed', param: 'model' });
    expect(embedder.calls.length).toBe(calls);
  });
});
