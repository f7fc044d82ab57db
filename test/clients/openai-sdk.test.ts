/**
 * Issue 38's acceptance, end to end with the official `openai` SDK unchanged (only the base URL and the
 * key differ from OpenAI): files.create of a PDF and a DOCX made here, a vector store, a file batch
 * uploaded and polled, a search that finds the right page, a response with the file_search tool, whole
 * and streamed, with its citations, files.delete, another organization's store unseen, and an upload
 * retried with one Idempotency-Key counted once. Each part's own tests go further
 * (test/clients/openai-files, -vector-stores, -search, -responses).
 */
import OpenAI, { NotFoundError, toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docxFile, OUTLINE, pdfFile } from '../helpers/knowledge-files.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';

/** Three pages, each on its own subject, so a search has one right page. */
const PAGES = [
  ['Ferry timetable.', 'The winter ferry leaves the harbour at eight and at four.', 'Tickets are sold on board.'],
  ['Island geology.', 'Volcanic basalt rock forms the steep cliffs of the island.', 'The lava cooled into columns.'],
  ['Birds of the island.', 'Puffins nest on the northern slopes in spring.', 'Gulls follow the fishing boats.'],
];

/**
 * Words of page 2 itself: the fake embedder hashes words into 32 dimensions, where a short query of
 * four words can collide with another document's as closely as with its own page.
 */
const QUESTION = 'Volcanic basalt rock forms the steep cliffs';

let w: OpenAiWorld;
let client: OpenAI;
let pdf: Uint8Array;
let docx: Uint8Array;

beforeAll(async () => {
  w = await startOpenAiWorld();
  client = w.client;
  pdf = await pdfFile(PAGES);
  docx = await docxFile(OUTLINE);
});

afterAll(async () => {
  await w?.close();
});

describe('the OpenAI SDK over the platform', () => {
  let vectorStore: OpenAI.VectorStores.VectorStore;
  let pdfId = '';

  it('files.create stores a PDF and a DOCX made by the test, each once under one Idempotency-Key', async () => {
    const key = `file-retry-${Date.now()}`;
    const first = await client.files.create({ file: await toFile(pdf, 'island.pdf', { type: 'application/pdf' }), purpose: 'assistants' }, { headers: { 'Idempotency-Key': key } });
    const again = await client.files.create({ file: await toFile(pdf, 'island.pdf', { type: 'application/pdf' }), purpose: 'assistants' }, { headers: { 'Idempotency-Key': key } });
    expect(first).toMatchObject({ object: 'file', bytes: pdf.byteLength, filename: 'island.pdf', purpose: 'assistants' });
    expect(again.id).toBe(first.id);
    const word = await client.files.create({ file: await toFile(docx, 'install.docx'), purpose: 'assistants' });
    expect(word).toMatchObject({ object: 'file', bytes: docx.byteLength, filename: 'install.docx' });
    const listed = [];
    for await (const f of client.files.list()) listed.push(f.id);
    expect(listed.filter((id) => id === first.id)).toHaveLength(1);
    expect(listed).toContain(word.id);
    expect(Buffer.from(await (await client.files.content(first.id)).arrayBuffer()).equals(Buffer.from(pdf))).toBe(true);
    pdfId = first.id;
  });

  it('vectorStores.create, then fileBatches.uploadAndPoll indexes both files', async () => {
    vectorStore = await client.vectorStores.create({ name: 'island', metadata: { team: 'guides' } });
    expect(vectorStore).toMatchObject({ object: 'vector_store', name: 'island', metadata: { team: 'guides' }, status: 'completed' });
    expect(vectorStore.id).toMatch(/^vs_[0-9a-f]{32}$/);
    const batch = await client.vectorStores.fileBatches.uploadAndPoll(
      vectorStore.id,
      { files: [await toFile(pdf, 'island.pdf', { type: 'application/pdf' }), await toFile(docx, 'install.docx')] },
      { pollIntervalMs: 100 },
    );
    expect(batch).toMatchObject({ object: 'vector_store.files_batch', status: 'completed', file_counts: { completed: 2, failed: 0, in_progress: 0, total: 2 } });
    const store = await client.vectorStores.retrieve(vectorStore.id);
    expect(store.file_counts).toMatchObject({ completed: 2, total: 2 });
  }, 120_000);

  it('vectorStores.search finds the right page of the PDF first, with its citation', async () => {
    const page = await client.vectorStores.search(vectorStore.id, { query: QUESTION, max_num_results: 3 });
    const results = page.data;
    expect(results.length).toBeGreaterThan(0);
    expect(results[0]).toMatchObject({ filename: 'island.pdf', content: [{ type: 'text', text: expect.stringContaining('Volcanic basalt') }] });
    expect((results[0] as any).citation.locator).toBe('page=2');
  });

  it('responses.create with file_search answers through the chat route, citing the file, whole and streamed', async () => {
    w.upstream.behavior.chunks = ['The cliffs are volcanic basalt [', '1]', '.'];
    const tools: OpenAI.Responses.Tool[] = [{ type: 'file_search', vector_store_ids: [vectorStore.id] }];
    const response = await client.responses.create({ model: 'chat', input: QUESTION, tools });
    expect(response.output_text).toBe('The cliffs are volcanic basalt.');
    const message = response.output.find((o) => o.type === 'message') as OpenAI.Responses.ResponseOutputMessage;
    const text = message.content[0] as OpenAI.Responses.ResponseOutputText;
    expect(text.annotations[0]).toMatchObject({ type: 'file_citation', filename: 'island.pdf', index: 'The cliffs are volcanic basalt'.length });
    // The passages reached the chat upstream's prompt.
    expect(JSON.stringify(w.upstream.requests.at(-1)!.body.messages)).toContain('Volcanic basalt rock forms the steep cliffs');

    const stream = client.responses.stream({ model: 'chat', input: QUESTION, tools });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    const streamed = await stream.finalResponse();
    expect(streamed.output_text).toBe('The cliffs are volcanic basalt.');
    expect(types[0]).toBe('response.created');
    expect(types).toContain('response.output_text.annotation.added');
    expect(types.at(-1)).toBe('response.completed');
    const streamedText = (streamed.output.find((o) => o.type === 'message') as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
    expect(streamedText.annotations).toEqual(text.annotations);
  });

  it("another organization's key finds no vector store, file or response of this one", async () => {
    const other = await w.otherOrganization();
    await expect(other.client.vectorStores.retrieve(vectorStore.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(other.client.vectorStores.search(vectorStore.id, { query: 'volcanic' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(other.client.files.retrieve(pdfId)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('files.delete removes a file; a store keeps what it indexed from it', async () => {
    expect(await client.files.delete(pdfId)).toEqual({ id: pdfId, object: 'file', deleted: true });
    await expect(client.files.retrieve(pdfId)).rejects.toBeInstanceOf(NotFoundError);
    // The store's copy of the PDF is the file uploadAndPoll made: deleted too, its chunks stay searchable (as OpenAI's).
    const inStore = [];
    for await (const f of client.vectorStores.files.list(vectorStore.id)) inStore.push(f.id);
    const names = await Promise.all(inStore.map(async (id) => [id, (await client.files.retrieve(id)).filename] as const));
    const storedPdf = names.find(([, name]) => name === 'island.pdf')![0];
    await client.files.delete(storedPdf);
    const page = await client.vectorStores.search(vectorStore.id, { query: QUESTION });
    expect(page.data[0]).toMatchObject({ file_id: storedPdf, filename: 'island.pdf' });
  });
});
