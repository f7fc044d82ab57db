/**
 * Collection items on AWS (docs/decisions/knowledge-items-aws.md): the routes run as Lambda behind API
 * Gateway runs them (test/helpers/lambda-front.ts: buffered answers, 6 MB an invocation) over DynamoDB
 * (dynalite), S3 (s3rver) and S3 Vectors (in memory behind a client mock), and items are processed by
 * the knowledge queue's Lambda handler (lambdas/consumers/knowledge-items.ts) given the SQS events the
 * event source mapping would send. A file uploaded through presigned part URLs becomes a cloud item
 * whose query cites its page; a local_vectors item takes the client's vectors; a download package over
 * what a function may answer is a 307 to a presigned S3 URL; a deleted item leaves nothing behind. What
 * processing asks of S3, S3 Vectors and SQS stays inside the grants of lib/knowledge-items.ts. The
 * attack's hostile files, in one batch, each fail alone while the handler returns normally.
 */
import { randomUUID } from 'node:crypto';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { handler as knowledgeItems } from '../../lambdas/consumers/knowledge-items.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { LAMBDA_MAX_BODY_BYTES } from '../../lambdas/http/event.js';
import { indexSweepKey, itemKey, packageBlobKey } from '../../lambdas/knowledge/collection-keys.js';
import { sweepIndexes } from '../../lambdas/knowledge/index-sweep.js';
import { countsWrite } from '../../lambdas/knowledge/collections.js';
import { MAX_ATTEMPTS } from '../../lambdas/knowledge/processing.js';
import { createVectorDatabase, readDatabase } from '../../lambdas/vector/databases.js';
import { KNOWLEDGE_BLOB_PREFIXES, KNOWLEDGE_ITEMS_VECTOR_ACTIONS } from '../../lib/knowledge-items.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { fakeVector, startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { markdownFile, paragraphs, pdfFile } from '../helpers/knowledge-files.js';
import { deepNestingDocx, pngAsMarkdown, repeatedPagePdf, tinyParagraphsDocx, zipBombDocx, type HostileFile } from '../helpers/hostile-files.js';
import { call, sha256, type Client } from '../helpers/knowledge-calls.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';
import { standInListParts, type PresignedParts } from '../helpers/presigned-parts.js';
import type { S3rverBucket } from '../helpers/s3rver.js';
import type { S3VectorsMock } from '../helpers/s3vectors-mock.js';
import { allowedStatements, flatTemplate, leadingKeyPattern, logicalIdIn, routeFunctions, synthStack, type AllowStatement } from '../infra/helpers.js';

let engine: Engine;
let s3: S3rverBucket;
let s3vectors: S3VectorsMock;
let parts: PresignedParts;
let gateway: LambdaFront;
let embedder: FakeEmbedder;
let c: Client;
let org: string;
let workspace: string;
/** What the consumer's handler asked of S3, S3 Vectors and SQS while it ran (the routes share these clients). */
let consuming = false;
/** The test's own look at the store (not a route's). */
let looking = false;
const consumerSent = { s3: [] as { command: string; key: string }[], vectors: [] as string[], queue: [] as string[] };
/** What each route's function asked of S3 (URLs it signed included: S3 authorizes them as its role), with S3's answer. */
const routeSent: { route: string; command: string; key: string; copySource?: string; status: number }[] = [];

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  const started = await startAwsDataEngine('ai-collection-items-aws');
  ({ engine, s3, s3vectors } = started);
  parts = standInListParts(engine);
  s3.client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Key?: string; CopySource?: string };
      if (consuming) consumerSent.s3.push({ command: String(context.commandName), key: String(input.Key) });
      const sent = consuming || looking ? undefined : { route: gateway?.invocations.at(-1)?.route ?? 'test', command: String(context.commandName), key: String(input.Key), copySource: input.CopySource, status: 200 };
      if (sent) routeSent.push(sent);
      try {
        return await next(args);
      } catch (error) {
        if (sent) sent.status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? 0;
        throw error;
      }
    },
    { step: 'initialize', name: 'recordS3' },
  );
  const send = engine.queue.send.bind(engine.queue);
  engine.queue.send = (queue, body, options) => (consuming && consumerSent.queue.push(queue), send(queue, body, options));
  useEngine(engine);
  embedder = await startFakeEmbedder();
  const tenants = new Tenants(engine.kv, () => Date.now());
  org = (await tenants.createOrganization('items-aws')).id;
  workspace = (await tenants.createWorkspace(org, 'main')).id;
  c = { url: '', key: (await tenants.createSecretKey(org)).key };
  await new ModelRoutes(engine.kv, () => Date.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000, default: true });
  await createVectorDatabase(engine, workspace, 'emb');
  gateway = await startLambdaFront('ai');
  c.url = gateway.url;
}, 120_000);

afterAll(async () => {
  await gateway?.close();
  await embedder?.close();
  await engine?.close();
});

const op = () => `op-${randomUUID()}`;

/** Uploads `bytes` as a client does on AWS: start, each part to its presigned S3 URL, complete. */
async function upload(bytes: Uint8Array, filename: string, contentType: string): Promise<string> {
  const id = op();
  const start = await call(c, 'POST', '/v1/uploads', { filename, content_type: contentType, size: bytes.length, sha256: sha256(bytes) }, { 'x-operation-id': id });
  expect(start.status, start.text).toBe(201);
  for (const part of start.body.parts) {
    expect(new URL(part.url).origin).toBe(s3.endpoint);
    await parts.send(part.url, bytes.subarray((part.number - 1) * start.body.part_size, part.number * start.body.part_size));
  }
  const done = await call(c, 'POST', `/v1/uploads/${id}/complete`, {});
  expect([done.status, done.body.status]).toEqual([200, 'completed']);
  return id;
}

const sqsEvent = (messages: { id: string; body: string; receipt: string; receiveCount: number }[]): SQSEvent => ({
  Records: messages.map((m) => ({
    messageId: m.id,
    receiptHandle: m.receipt,
    body: m.body,
    attributes: { ApproximateReceiveCount: String(m.receiveCount), SentTimestamp: String(Date.now()), SenderId: 'test', ApproximateFirstReceiveTimestamp: String(Date.now()) },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:knowledge',
    awsRegion: 'us-east-1',
  })),
});

/**
 * What the event source mapping does with the knowledge queue: one message an invocation of the
 * consumer's Lambda handler, deleted unless the answer names it failed; until none is left.
 */
async function processQueue(): Promise<number> {
  let handled = 0;
  for (;;) {
    const [message] = await engine.queue.receive('knowledge', { max: 1, visibilitySeconds: 900 });
    if (!message) return handled;
    consuming = true;
    const from = s3vectors.stub.calls().length;
    const answer = await knowledgeItems(sqsEvent([message])).finally(() => (consuming = false));
    consumerSent.vectors.push(...s3vectors.stub.calls().slice(from).map((call) => `s3vectors:${(call.args[0] as object).constructor.name.replace(/Command$/, '')}`));
    expect(answer).toEqual({ batchItemFailures: [] });
    await engine.queue.delete('knowledge', message.receipt);
    handled += 1;
  }
}

async function addAndProcess(collection: string, body: object) {
  const added = await call(c, 'POST', `/v1/collections/${collection}/items`, body);
  expect(added.status, added.text).toBe(202);
  expect(await processQueue()).toBeGreaterThanOrEqual(1);
  const item = await call(c, 'GET', `/v1/collections/${collection}/items/${added.body.item_id}`);
  expect(item.body, item.text).toMatchObject({ status: 'done', error: null });
  return item.body;
}

async function createCollection(mode: string): Promise<string> {
  const r = await call(c, 'POST', '/v1/collections', { mode });
  expect(r.status, r.text).toBe(201);
  return r.body.id;
}

const vectorKeys = () => [...s3vectors.indexes().values()].flatMap((index) => [...index.vectors.keys()]);

describe("hostile files through the knowledge consumer's Lambda handler (issue 32)", () => {
  it('each fails alone with its reason in one batch, the ordinary item beside them is done, and the handler returns normally', async () => {
    const col = await createCollection('download');
    const files: HostileFile[] = [await repeatedPagePdf(), zipBombDocx(), tinyParagraphsDocx(), deepNestingDocx(), pngAsMarkdown()];
    const hostile: string[] = [];
    for (const file of files) {
      const added = await call(c, 'POST', `/v1/collections/${col}/items`, { upload_id: await upload(file.bytes, file.filename, file.contentType) });
      expect(added.status, added.text).toBe(202);
      hostile.push(added.body.item_id);
    }
    const ordinary = await call(c, 'POST', `/v1/collections/${col}/items`, { text: markdownFile(), filename: 'guide.md' });
    expect(ordinary.status, ordinary.text).toBe(202);

    // One batch of every message, as an event source mapping with a larger batch would send them.
    const messages = await engine.queue.receive('knowledge', { max: 10, visibilitySeconds: 900 });
    expect(messages).toHaveLength(files.length + 1);
    const started = Date.now();
    expect(await knowledgeItems(sqsEvent(messages))).toEqual({ batchItemFailures: [] });
    expect(Date.now() - started).toBeLessThan(60_000);
    for (const m of messages) await engine.queue.delete('knowledge', m.receipt);

    const items = await Promise.all(hostile.map(async (id) => (await call(c, 'GET', `/v1/collections/${col}/items/${id}`)).body));
    expect(items.map((i) => [i.filename, i.status, i.error?.code])).toEqual([
      ['repeated-page.pdf', 'failed', 'too_large'],
      ['zip-bomb.docx', 'failed', 'too_large'],
      ['tiny-paragraphs.docx', 'failed', 'too_large'],
      ['deep-nesting.docx', 'failed', expect.stringMatching(/^(too_large|parse_error)$/)],
      ['image.md', 'failed', 'unsupported_type'],
    ]);
    for (const i of items) expect(i.error.message.length).toBeGreaterThan(0);
    expect((await call(c, 'GET', `/v1/collections/${col}/items/${ordinary.body.item_id}`)).body).toMatchObject({ status: 'done', error: null });
  }, 120_000);
});

describe('collection items on AWS', () => {
  const pages = [['The harbour has two lighthouses.'], ['Basalt columns line the northern cliffs of the island.'], ['Ferries leave at nine.']];
  let cloud: string;
  let item: any;

  it('an upload sent to presigned part URLs becomes a cloud item, processed by the knowledge consumer; the query cites its page', async () => {
    cloud = await createCollection('cloud');
    const uploadId = await upload(await pdfFile(pages), 'island.pdf', 'application/pdf');
    item = await addAndProcess(cloud, { upload_id: uploadId });
    expect(item).toMatchObject({ upload_id: uploadId, filename: 'island.pdf', package_id: expect.stringMatching(/^pkg_/), chunk_count: expect.any(Number) });
    const q = await call(c, 'POST', `/v1/collections/${cloud}/query`, { query: 'basalt columns on the cliffs', top_k: 2 });
    expect(q.status, q.text).toBe(200);
    expect(q.body.matches[0]).toMatchObject({
      text: expect.stringContaining('Basalt columns'),
      citation: { collection_id: cloud, item_id: item.item_id, package_id: item.package_id, chunk_id: expect.stringMatching(/^chk_/), locator: 'page=2' },
    });
    expect(q.body.indexing).toEqual({ indexed: 1, total: 1, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 });
    // The collection's creation registered the workspace index with the index sweep, whose pass over it keeps every served chunk.
    const { index } = (await readDatabase(engine, workspace))!;
    expect(await engine.kv.get(indexSweepKey(org, workspace, index))).toMatchObject({ org, workspace, index });
    const before = [...s3vectors.indexes().get(index)!.vectors.keys()].filter((k) => k.startsWith(`${item.item_id}.`));
    expect(before).toHaveLength(item.chunk_count);
    expect((await sweepIndexes(engine)).removed).toBe(0);
    expect([...s3vectors.indexes().get(index)!.vectors.keys()].filter((k) => k.startsWith(`${item.item_id}.`))).toEqual(before);
  }, 60_000);

  it('a local_vectors item: the client reads its chunks, stores its vectors in the collection index, and queries with its own vector', async () => {
    const col = await createCollection('local_vectors');
    const calls = embedder.calls.length;
    const done = await addAndProcess(col, { text: markdownFile(), filename: 'guide.md' });
    const chunks = await call(c, 'GET', `/v1/collections/${col}/items/${done.item_id}/chunks?limit=500`);
    expect(chunks.status, chunks.text).toBe(200);
    const vectors = chunks.body.data.map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) }));
    const put = await call(c, 'PUT', `/v1/collections/${col}/items/${done.item_id}/vectors`, { vectors });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ stored: vectors.length, vectors_stored: vectors.length, indexed: true });
    expect(s3vectors.indexes().has(`kcv-${col.slice(4)}`)).toBe(true);
    const q = await call(c, 'POST', `/v1/collections/${col}/query`, { query: 'apt', vector: fakeVector('Use apt.') });
    expect(q.status, q.text).toBe(200);
    expect(q.body.matches[0].citation).toMatchObject({ item_id: done.item_id, locator: 'heading=Install > Linux > Debian' });
    expect(embedder.calls.length).toBe(calls);
  }, 60_000);

  it("a download package over what a function may answer is a 307 to a presigned S3 URL; a small one comes inline", async () => {
    const col = await createCollection('download');
    const text = paragraphs(1300, 12).map((p, i) => (i % 40 === 0 ? `# Part ${i}\n\n${p}` : p)).join('\n\n');
    const big = await addAndProcess(col, { upload_id: await upload(Buffer.from(text), 'big.md', 'text/markdown') });
    const res = await fetch(`${c.url}/v1/collections/${col}/items/${big.item_id}/package`, { headers: { authorization: `Bearer ${c.key}` }, redirect: 'manual' });
    expect(res.status).toBe(307);
    const location = new URL(res.headers.get('location')!);
    expect(location.origin).toBe(s3.endpoint);
    expect(location.pathname).toContain(packageBlobKey(org, workspace, col, big.item_id, big.package_id));
    const file = await fetch(location);
    expect(file.status).toBe(200);
    const lines = (await file.text()).trim().split('\n');
    expect(lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)).toBeGreaterThan(LAMBDA_MAX_BODY_BYTES);
    expect(JSON.parse(lines[0])).toMatchObject({ object: 'package', package_id: big.package_id, chunk_count: big.chunk_count });

    const small = await addAndProcess(col, { text: 'A short note.', filename: 'note.txt' });
    const inline = await call(c, 'GET', `/v1/collections/${col}/items/${small.item_id}/package`);
    expect(inline.status).toBe(200);
    expect(inline.text.trim().split('\n').map((l) => JSON.parse(l).object)).toEqual(['package', 'section', 'chunk']);
  }, 120_000);

  it('deleting an item takes it out of queries at once, and removes its package and vectors', async () => {
    const before = vectorKeys().filter((k) => k.startsWith(`${item.item_id}.`));
    expect(before.length).toBe(item.chunk_count);
    const del = await call(c, 'DELETE', `/v1/collections/${cloud}/items/${item.item_id}`);
    expect([del.status, del.body]).toEqual([200, { item_id: item.item_id, deleted: true }]);
    const q = await call(c, 'POST', `/v1/collections/${cloud}/query`, { query: 'basalt columns on the cliffs' });
    expect(q.body.matches).toEqual([]);
    expect(vectorKeys().filter((k) => k.startsWith(`${item.item_id}.`))).toEqual([]);
    looking = true;
    expect(await engine.blobs.head(packageBlobKey(org, workspace, cloud, item.item_id, item.package_id)).finally(() => (looking = false))).toBeUndefined();
  });

  it("the consumer asked of S3, S3 Vectors and SQS only what its role grants (lib/knowledge-items.ts)", () => {
    const grants: Record<string, string[]> = {
      GetObjectCommand: [KNOWLEDGE_BLOB_PREFIXES.uploads, KNOWLEDGE_BLOB_PREFIXES.collections],
      HeadObjectCommand: [KNOWLEDGE_BLOB_PREFIXES.uploads, KNOWLEDGE_BLOB_PREFIXES.collections],
      PutObjectCommand: [KNOWLEDGE_BLOB_PREFIXES.collections],
      DeleteObjectCommand: [KNOWLEDGE_BLOB_PREFIXES.collections],
    };
    expect(consumerSent.s3.length).toBeGreaterThan(0);
    for (const { command, key } of consumerSent.s3) expect((grants[command] ?? []).some((p) => key.startsWith(p)), `${command} ${key}`).toBe(true);
    expect(new Set(consumerSent.s3.map((s) => s.command))).toEqual(new Set(['HeadObjectCommand', 'GetObjectCommand', 'PutObjectCommand']));
    expect([...new Set(consumerSent.vectors)]).toEqual(['s3vectors:PutVectors']);
    for (const action of consumerSent.vectors) expect(KNOWLEDGE_ITEMS_VECTOR_ACTIONS).toContain(action);
    for (const queue of consumerSent.queue) expect(queue).toBe('knowledge');
  });

  // Open (docs/decisions/knowledge-items-aws.md, "Open"): a run Lambda kills (out of memory, past 840 s)
  // never reaches processing's catch, so its attempts are never judged and the collections sweep sends
  // the item again each time its lease lapses, for ever. When a claim fails such an item, drop `.fails`.
  it('an item whose processing died MAX_ATTEMPTS times (the function killed) is failed at its next claim, not processed again', async () => {
    const col = await createCollection('download');
    const added = await call(c, 'POST', `/v1/collections/${col}/items`, { text: 'A file that kills its processor.', filename: 'k.txt' });
    expect(added.status, added.text).toBe(202);
    // What MAX_ATTEMPTS killed runs leave: processing, every attempt spent, the lease lapsed.
    const key = itemKey(org, workspace, col, added.body.item_id);
    await engine.kv.transact([
      { update: key, set: { state: 'processing', attempt: MAX_ATTEMPTS, lease_until: Math.floor(Date.now() / 1000) - 1 } },
      countsWrite(org, workspace, col, 'queued', 'processing'),
    ]);
    await processQueue();
    const item = await call(c, 'GET', `/v1/collections/${col}/items/${added.body.item_id}`);
    expect(item.body.status).toBe('failed');
    expect(item.body.error.code).toBe('too_large');
  });

  it("every route's S3 requests, and the URLs it signs, are allowed by its own role: the AI API's blob grants name its prefixes only", () => {
    const { stack } = synthStack();
    const template = flatTemplate(stack);
    const functions = routeFunctions(template);
    const bucket = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.storage.bucket), 'Arn'] });
    /** IAM's reading of an S3 request: the actions it needs and the object each is on. */
    const needs = (r: (typeof routeSent)[number]): { action: string; key: string }[] => {
      const on = (action: string) => [{ action, key: r.key }];
      switch (r.command) {
        case 'GetObjectCommand':
        case 'HeadObjectCommand':
          return on('s3:GetObject');
        case 'PutObjectCommand':
        case 'CreateMultipartUploadCommand':
        case 'UploadPartCommand':
        case 'CompleteMultipartUploadCommand':
          return on('s3:PutObject');
        case 'CopyObjectCommand':
          return [...on('s3:PutObject'), { action: 's3:GetObject', key: decodeURIComponent(r.copySource!.slice(r.copySource!.indexOf('/') + 1)) }];
        case 'DeleteObjectCommand':
          return on('s3:DeleteObject');
        case 'AbortMultipartUploadCommand':
          return on('s3:AbortMultipartUpload');
        case 'ListPartsCommand':
          return on('s3:ListMultipartUploadParts');
        default:
          throw new Error(`unexpected S3 request ${r.command}`);
      }
    };
    const allows = (statements: AllowStatement[], action: string, resource: (json: unknown) => boolean) =>
      statements.some((st) => st.actions.some((a) => leadingKeyPattern(a).test(action)) && ([] as unknown[]).concat(JSON.parse(st.resources)).some(resource));
    const objectIs = (key: string) => (json: unknown) => {
      const join = (json as { 'Fn::Join'?: [string, [unknown, string]] })['Fn::Join'];
      return !!join && JSON.stringify(join[1][0]) === bucket && leadingKeyPattern(join[1][1].slice(1)).test(key);
    };
    const checked = new Set<string>();
    for (const r of routeSent.filter((x) => x.route !== 'test')) {
      const fn = functions.get(r.route);
      expect(fn, r.route).toBeDefined();
      const statements = allowedStatements(template, fn!);
      for (const need of needs(r)) expect(allows(statements, need.action, objectIs(need.key)), `${r.route}: ${need.action} ${need.key}`).toBe(true);
      if (r.status === 404) expect(allows(statements, 's3:ListBucket', (json) => JSON.stringify(json) === bucket), `${r.route}: ${r.key} answered 404`).toBe(true);
      checked.add(r.route);
    }
    expect([...checked].sort()).toEqual(expect.arrayContaining(['ai.collections.items.create', 'ai.collections.items.delete', 'ai.collections.items.package', 'ai.uploads.complete', 'ai.uploads.create']));
    // A Data API file is out of an AI function's reach.
    for (const route of checked) expect(allows(allowedStatements(template, functions.get(route)!), 's3:GetObject', objectIs('blobs/org_1/db/file')), route).toBe(false);
  }, 60_000);
});

