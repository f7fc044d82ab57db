/**
 * Knowledge jobs on AWS (docs/decisions/knowledge-jobs-aws.md): the routes run as Lambda behind API
 * Gateway runs them (test/helpers/lambda-front.ts) over DynamoDB (dynalite), S3 (s3rver) and S3
 * Vectors (in memory behind a client mock), and the job's steps and pieces are run by the
 * knowledge-jobs queue's Lambda handler (lambdas/consumers/knowledge-jobs.ts) given the SQS events the
 * event source mapping would send, one message an invocation. A video uploaded through presigned part
 * URLs is probed by the start route through a presigned GET (ffprobe reads s3rver by ranges), cut,
 * transcribed, extracted, reconciled, framed and published into a cloud collection whose query cites an
 * entry's time; the platform event reaches a pull subscription; the jobs sweep's handler runs.
 *
 * ffmpeg and ffprobe are the ffmpeg layer's own AArch64 binaries, from its asset as CDK bundles it for
 * a deploy (what Lambda mounts at /opt), run through `qemu-aarch64-static` where it is installed,
 * FFMPEG_PATH naming the layer's ffmpeg and ffprobe found beside it as on Lambda; Debian's ffmpeg where
 * qemu is not (or with KNOWLEDGE_JOBS_AWS_FFMPEG=debian). What the consumer asked of S3, S3 Vectors and SQS stays inside lib/knowledge-jobs.ts's
 * grants, and every route's S3 request and signed URL inside its own synthesized role.
 */
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { handler as knowledgeJobs } from '../../lambdas/consumers/knowledge-jobs.js';
import { handler as knowledgeJobsSweep } from '../../lambdas/consumers/knowledge-jobs-sweep.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { JOBS_QUEUE } from '../../lambdas/knowledge/jobs/pipeline.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { FFMPEG_LAYER_PATHS, FfmpegLayer } from '../../lib/ffmpeg-layer.js';
import { KNOWLEDGE_JOBS_OBJECTS, KNOWLEDGE_JOBS_SENDS, KNOWLEDGE_JOBS_VECTOR_ACTIONS } from '../../lib/knowledge-jobs.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeKnowledgeChat, type FakeKnowledgeChat } from '../helpers/fake-knowledge-chat.js';
import { startFakeTranscriber, type FakeTranscriber } from '../helpers/fake-transcriber.js';
import { call, sha256, type Client } from '../helpers/knowledge-calls.js';
import { recordingFile } from '../helpers/knowledge-files.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';
import { standInListParts, type PresignedParts } from '../helpers/presigned-parts.js';
import type { S3rverBucket } from '../helpers/s3rver.js';
import type { S3VectorsMock } from '../helpers/s3vectors-mock.js';
import { allowedStatements, flatTemplate, leadingKeyPattern, logicalIdIn, routeFunctions, synthStack, type AllowStatement } from '../infra/helpers.js';

/** Runs an AArch64 program on this machine, where installed (Debian's qemu-user-static). */
const QEMU = '/usr/bin/qemu-aarch64-static';
const LAYER_BINARIES = existsSync(QEMU) && process.env.KNOWLEDGE_JOBS_AWS_FFMPEG !== 'debian';

let engine: Engine;
let s3: S3rverBucket;
let s3vectors: S3VectorsMock;
let parts: PresignedParts;
let ai: LambdaFront;
let eventsFront: LambdaFront;
let embedder: FakeEmbedder;
let transcriber: FakeTranscriber;
let chat: FakeKnowledgeChat;
let c: Client;
let org: string;
let workspace: string;
let appId: string;
/** The layer's asset and the wrappers that run its programs (each run noted in runs.log), when qemu is installed. */
let layerDir: string | undefined;
let job: any;
/** What the consumer's handler asked of S3, S3 Vectors and SQS while it ran (the routes share these clients). */
let consuming = false;
const consumerSent = { s3: [] as { command: string; key: string }[], vectors: [] as string[], queue: [] as string[] };
/** What each route's function asked of S3 (URLs it signed included: S3 authorizes them as its role), with S3's answer. */
const routeSent: { route: string; command: string; key: string; copySource?: string; status: number }[] = [];

/**
 * The layer's ffmpeg and ffprobe, as Lambda finds them: the layer synthesized alone with bundling on
 * (as a deploy builds it), its asset's `bin/` standing for /opt/bin. Beside its asset, a wrapper per
 * program runs the asset's binary under qemu and notes the run, so the test can tell they ran;
 * FFMPEG_PATH names the ffmpeg wrapper and the settings find ffprobe beside it, as on Lambda.
 */
function layerPrograms(dir: string): string {
  const app = new App({ outdir: join(dir, 'cdk.out') });
  const stack = new Stack(app, 'FfmpegLayerOnly');
  new FfmpegLayer(stack, 'Ffmpeg');
  app.synth();
  const [layer] = Object.values(Template.fromStack(stack).findResources('AWS::Lambda::LayerVersion')) as { Properties: { Content: { S3Key: string } } }[];
  const asset = join(dir, 'cdk.out', `asset.${layer.Properties.Content.S3Key.replace(/\.zip$/, '')}`);
  const bin = join(dir, 'opt-bin');
  mkdirSync(bin);
  for (const name of ['ffmpeg', 'ffprobe'] as const) {
    const program = join(asset, posix.relative('/opt', FFMPEG_LAYER_PATHS[name]));
    writeFileSync(join(bin, name), `#!/bin/sh\necho ${name} >> '${join(dir, 'runs.log')}'\nexec '${QEMU}' '${program}' "$@"\n`);
    chmodSync(join(bin, name), 0o755);
  }
  return join(bin, 'ffmpeg');
}

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  layerDir = LAYER_BINARIES ? mkdtempSync(join(tmpdir(), 'ffmpeg-layer-run-')) : undefined;
  useSettings({ modelRoutesCacheMs: 0, ...(layerDir ? { ffmpegPath: layerPrograms(layerDir) } : {}) });
  const started = await startAwsDataEngine('knowledge-jobs-aws');
  ({ engine, s3, s3vectors } = started);
  parts = standInListParts(engine);
  s3.client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Key?: string; CopySource?: string };
      if (consuming) consumerSent.s3.push({ command: String(context.commandName), key: String(input.Key) });
      // The Events routes this test calls send nothing to S3.
      const sent = consuming ? undefined : { route: ai?.invocations.at(-1)?.route ?? 'test', command: String(context.commandName), key: String(input.Key), copySource: input.CopySource, status: 200 };
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
  [embedder, transcriber, chat] = await Promise.all([startFakeEmbedder(), startFakeTranscriber(), startFakeKnowledgeChat()]);
  const tenants = new Tenants(engine.kv, () => Date.now());
  org = (await tenants.createOrganization('jobs-aws')).id;
  workspace = (await tenants.createWorkspace(org, 'main')).id;
  // An application's key: a job's event goes to its application's workspace.
  appId = (await tenants.createApplication(workspace, 'meetings', ['knowledge'])).id;
  c = { url: '', key: (await tenants.createSecretKey(org, appId)).key };
  const routes = new ModelRoutes(engine.kv, () => Date.now());
  await routes.set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000, default: true });
  await routes.set(org, { id: 'whisper', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: transcriber.baseUrl, upstream_model: 'whisper-1', timeout_ms: 20_000, default: true, price_per_minute: 0.006 });
  await routes.set(org, { id: 'gpt', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: chat.baseUrl, upstream_model: 'gpt-fake', timeout_ms: 20_000, default: true, price_in_per_mtok: 2.5, price_out_per_mtok: 10 });
  await createVectorDatabase(engine, workspace, 'emb');
  [ai, eventsFront] = await Promise.all([startLambdaFront('ai'), startLambdaFront('events')]);
  c.url = ai.url;
}, 120_000);

afterAll(async () => {
  await Promise.all([ai?.close(), eventsFront?.close(), embedder?.close(), transcriber?.close(), chat?.close()]);
  await engine?.close();
  useSettings();
  if (layerDir) rmSync(layerDir, { recursive: true, force: true });
});

const op = () => `op-${randomUUID()}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

const sqsEvent = (message: { id: string; body: string; receipt: string; receiveCount: number }): SQSEvent => ({
  Records: [
    {
      messageId: message.id,
      receiptHandle: message.receipt,
      body: message.body,
      attributes: { ApproximateReceiveCount: String(message.receiveCount), SentTimestamp: String(Date.now()), SenderId: 'test', ApproximateFirstReceiveTimestamp: String(Date.now()) },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${JOBS_QUEUE}`,
      awsRegion: 'us-east-1',
    },
  ],
});

/**
 * What the event source mapping does with the knowledge-jobs queue until the job ends: one message an
 * invocation of the consumer's Lambda handler, deleted unless the answer names it failed.
 */
async function runJob(id: string, timeoutMs = 240_000): Promise<{ job: any; invocations: number }> {
  const until = Date.now() + timeoutMs;
  let invocations = 0;
  for (;;) {
    const view = await call(c, 'GET', `/v1/knowledge/jobs/${id}`);
    expect(view.status, view.text).toBe(200);
    if (['completed', 'failed', 'cancelled'].includes(view.body.status)) return { job: view.body, invocations };
    if (Date.now() > until) throw new Error(`job ${id} still ${view.body.status} at ${view.body.step}`);
    const [message] = await engine.queue.receive(JOBS_QUEUE, { max: 1, visibilitySeconds: 900 });
    if (!message) {
      await sleep(200);
      continue;
    }
    consuming = true;
    const from = s3vectors.stub.calls().length;
    const answer = await knowledgeJobs(sqsEvent(message)).finally(() => (consuming = false));
    consumerSent.vectors.push(...s3vectors.stub.calls().slice(from).map((sent) => `s3vectors:${(sent.args[0] as object).constructor.name.replace(/Command$/, '')}`));
    expect(answer).toEqual({ batchItemFailures: [] });
    await engine.queue.delete(JOBS_QUEUE, message.receipt);
    invocations += 1;
  }
}

const events = (method: string, path: string, body?: unknown) => call({ url: eventsFront.url, key: c.key }, method, `/v1/workspaces/${workspace}${path}`, body);

describe('a knowledge job on AWS', () => {
  let subscription: string;
  let transcriptions: number;

  it('starts from a video uploaded to presigned part URLs: probed through a presigned GET and priced before any upstream call', async () => {
    const created = await events('POST', '/subscriptions', { types: ['knowledge.job.completed', 'knowledge.job.failed'], delivery: { mode: 'pull' } });
    expect(created.status, created.text).toBe(201);
    subscription = created.body.subscription_id;
    const recording = await upload(await recordingFile({ seconds: 60 }), 'standup.mp4', 'video/mp4');
    const before = { transcriptions: transcriber.requests.length, chat: chat.requests.length, embeddings: embedder.calls.length };
    const started = await call(c, 'POST', '/v1/knowledge/jobs', { upload_id: recording, max_price_usd: '5', power: 'medium', max_pointers: 4 }, { 'x-operation-id': op() });
    expect(started.status, started.text).toBe(202);
    expect(started.body).toMatchObject({ job_id: expect.stringMatching(/^job_/), status_url: `/v1/knowledge/jobs/${started.body.job_id}` });
    expect({ transcriptions: transcriber.requests.length, chat: chat.requests.length, embeddings: embedder.calls.length }).toEqual(before);
    // The start route signed a GET of the recording for ffprobe (its role's s3:GetObject on ai-uploads/).
    expect(routeSent.some((r) => r.route === 'ai.knowledge.jobs.create' && r.command === 'GetObjectCommand' && r.key.startsWith('ai-uploads/'))).toBe(true);
    const view = await call(c, 'GET', `/v1/knowledge/jobs/${started.body.job_id}`);
    expect(view.body).toMatchObject({ status: 'queued', step: 'probe', estimate_usd: expect.any(String) });
    job = view.body;
    transcriptions = before.transcriptions;
  }, 120_000);

  it("runs its steps and pieces on the consumer's Lambda handler, a message an invocation, to a published collection with entries and frames", async () => {
    const { job: done, invocations } = await runJob(job.job_id);
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'completed', step: 'publish', error: null, collection_id: expect.stringMatching(/^col_/) });
    expect(done.entries).toBeGreaterThan(0);
    expect(done.frames).toBeGreaterThan(0);
    expect(done.frames).toBeLessThanOrEqual(4);
    // Six steps and at least one piece, each its own invocation.
    expect(invocations).toBeGreaterThanOrEqual(7);
    expect(transcriber.requests.length - transcriptions).toBeGreaterThanOrEqual(1);
    job = done;
  }, 300_000);

  if (LAYER_BINARIES) {
    it("ran the ffmpeg layer's own ffprobe and ffmpeg, found by FFMPEG_PATH as on Lambda", () => {
      const runs = readFileSync(join(layerDir!, 'runs.log'), 'utf8').trim().split('\n');
      expect(new Set(runs)).toEqual(new Set(['ffmpeg', 'ffprobe']));
    });
  }

  it("publishes a cloud collection whose query returns an entry with its verbatim quote and the time it was said", async () => {
    const items = await call(c, 'GET', `/v1/collections/${job.collection_id}/items?limit=100`);
    expect(items.status, items.text).toBe(200);
    expect(items.body.data.map((i: any) => i.status)).toEqual(items.body.data.map(() => 'done'));
    const entriesItem = items.body.data.find((i: any) => i.filename.endsWith('.entries.json'));
    expect(entriesItem).toBeDefined();
    const chunks = await call(c, 'GET', `/v1/collections/${job.collection_id}/items/${entriesItem.item_id}/chunks?limit=100`);
    const entry = chunks.body.data[0];
    expect(entry.text).toMatch(/^Quote: ".+"$/m);
    expect(entry.locator).toMatch(/^t=\d\d:\d\d:\d\d/);
    const q = await call(c, 'POST', `/v1/collections/${job.collection_id}/query`, { query: entry.text, top_k: 3 });
    expect(q.status, q.text).toBe(200);
    expect(q.body.matches.some((m: any) => m.citation.chunk_id === entry.chunk_id && /^t=/.test(m.citation.locator))).toBe(true);
    // Frames are items of their own, JPEGs cited at a time.
    expect(items.body.data.filter((i: any) => i.content_type === 'image/jpeg').length).toBe(job.frames);
  }, 60_000);

  it('publishes knowledge.job.completed to a pull subscription of the workspace', async () => {
    const pulled = await events('POST', `/subscriptions/${subscription}/pull`, { max: 10 });
    expect(pulled.status, pulled.text).toBe(200);
    expect(pulled.body.messages).toHaveLength(1);
    expect(pulled.body.messages[0]).toMatchObject({ type: 'knowledge.job.completed', idempotency_key: `${job.job_id}.completed`, tenant: { organization_id: org, workspace_id: workspace, application_id: appId }, data: { job_id: job.job_id, status: 'completed' } });
  });

  it("the jobs sweep's handler finds nothing due once the job is done", async () => {
    expect(await knowledgeJobsSweep()).toEqual({ swept: 0 });
  });

  it('the consumer asked of S3, S3 Vectors and SQS only what its role grants (lib/knowledge-jobs.ts)', () => {
    const objects = KNOWLEDGE_JOBS_OBJECTS as Record<string, readonly string[]>;
    const grants: Record<string, readonly string[]> = {
      GetObjectCommand: objects['s3:GetObject'],
      HeadObjectCommand: objects['s3:GetObject'],
      PutObjectCommand: objects['s3:PutObject'],
      DeleteObjectCommand: objects['s3:DeleteObject'],
    };
    expect(consumerSent.s3.length).toBeGreaterThan(0);
    for (const { command, key } of consumerSent.s3) expect((grants[command] ?? []).some((p) => key.startsWith(p)), `${command} ${key}`).toBe(true);
    // The recording read (a presigned GET signed, a head), the job's files written and removed, the collection written.
    expect(consumerSent.s3.some((s) => s.command === 'GetObjectCommand' && s.key.startsWith('ai-uploads/'))).toBe(true);
    expect(consumerSent.s3.some((s) => s.command === 'PutObjectCommand' && s.key.startsWith('knowledge-jobs/'))).toBe(true);
    expect(consumerSent.s3.some((s) => s.command === 'DeleteObjectCommand' && s.key.startsWith('knowledge-jobs/'))).toBe(true);
    expect(consumerSent.s3.some((s) => s.command === 'PutObjectCommand' && s.key.startsWith('knowledge/'))).toBe(true);
    expect(consumerSent.s3.filter((s) => s.command === 'DeleteObjectCommand' && s.key.startsWith('ai-uploads/'))).toEqual([]);
    expect(consumerSent.vectors).toContain('s3vectors:PutVectors');
    for (const action of consumerSent.vectors) expect(KNOWLEDGE_JOBS_VECTOR_ACTIONS).toContain(action);
    expect(consumerSent.queue).toContain(JOBS_QUEUE);
    for (const queue of consumerSent.queue) expect(KNOWLEDGE_JOBS_SENDS).toContain(queue);
  });

  it("every route's S3 requests, and the URLs it signs, are allowed by its own role", () => {
    const { stack } = synthStack();
    const template = flatTemplate(stack);
    const functions = routeFunctions(template);
    const bucket = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.storage.bucket), 'Arn'] });
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
    expect([...checked]).toContain('ai.knowledge.jobs.create');
    // The start route holds the ffmpeg layer it probed with.
    expect(functions.get('ai.knowledge.jobs.create')!.props.Environment.Variables.FFMPEG_PATH).toBe('/opt/bin/ffmpeg');
  }, 120_000);
});
