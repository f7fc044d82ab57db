/**
 * A knowledge job on AWS whose processor dies mid-step (issue 36, Deliver 5; docs/decisions/knowledge-jobs-aws.md),
 * run as the collections' AWS test runs items (ai-collection-items-aws.test.ts): the routes as Lambda
 * behind test/helpers/lambda-front.ts over DynamoDB (dynalite), S3 (s3rver) and S3 Vectors (in memory
 * behind a client mock); the knowledge-jobs queue's Lambda handler (lambdas/consumers/knowledge-jobs.ts)
 * given the SQS events the event source mapping would send, one message an invocation; the jobs sweep's
 * handler (lambdas/consumers/knowledge-jobs-sweep.ts) invoked as its schedule would.
 *
 * - The start probes the recording with ffprobe through a presigned S3 URL (the S3 blob store has no
 *   local file): what S3 served it, counted by a recorder in front of s3rver, is a small part of the file.
 * - A processor stalls on its model during extraction and its invocation dies: the job stays `running`;
 *   the sweep leaves it while its lease holds and sends the step again once the lease lapsed (the
 *   engine's clock moved on); another processor finishes it, and the stalled one, when its call ends,
 *   finds the job taken over and leaves it. The job completes: a cloud collection whose query returns an
 *   entry cited by time, and its frames; extraction paid once.
 * - What the consumer, the sweep and the start route asked of S3, S3 Vectors and SQS is allowed by each
 *   one's role in the synthesized template (lib/knowledge-jobs.ts, the route grants).
 * - ffmpeg and ffprobe are found by path as on Lambda: FFMPEG_PATH is the consumer's in the template
 *   (the layer's /opt/bin/ffmpeg), read under a stand-in of /opt holding the layer's own AArch64
 *   programs run by qemu-aarch64-static where it is installed (else Debian's, behind the same paths).
 *   The layer's asset is test/infra/ffmpeg-layer.test.ts's, its functions test/infra/knowledge-jobs.test.ts's.
 */
import { execFileSync, execSync } from 'node:child_process';
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { SQSEvent } from 'aws-lambda';
import type { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { handler as knowledgeJobs } from '../../lambdas/consumers/knowledge-jobs.js';
import { handler as knowledgeJobsSweep } from '../../lambdas/consumers/knowledge-jobs-sweep.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Clock, Engine, QueueMessage } from '../../lambdas/engine/ports.js';
import { jobKey, JOB_SWEEP_PARTITION } from '../../lambdas/knowledge/jobs/job-keys.js';
import { START_PROBE_TIMEOUT_MS } from '../../lambdas/knowledge/jobs/media-input.js';
import { JOBS_QUEUE, parseJobMessage, type JobMessage } from '../../lambdas/knowledge/jobs/pipeline.js';
import { ENV, useSettings } from '../../lambdas/shared/settings.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { FFMPEG_LAYER_PATHS } from '../../lib/ffmpeg-layer.js';
import { PROJECT_ROOT } from '../../lib/function-defaults.js';
import { KNOWLEDGE_JOBS_SENDS, KNOWLEDGE_JOBS_VECTOR_ACTIONS } from '../../lib/knowledge-jobs.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeKnowledgeChat, type FakeKnowledgeChat } from '../helpers/fake-knowledge-chat.js';
import { startFakeTranscriber, type FakeTranscriber } from '../helpers/fake-transcriber.js';
import { call, sha256, type Client } from '../helpers/knowledge-calls.js';
import { recordingAt } from '../helpers/knowledge-files.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';
import { standInListParts, type PresignedParts } from '../helpers/presigned-parts.js';
import type { S3rverBucket } from '../helpers/s3rver.js';
import type { S3VectorsMock } from '../helpers/s3vectors-mock.js';
import { allowedStatements, consumerFunction, flatTemplate, leadingKeyPattern, logicalIdIn, routeFunctions, synthStack, type AllowStatement, type RouteFunctionResource } from '../infra/helpers.js';

/** Where Lambda mounts a layer. */
const LAYER_MOUNT = '/opt';
/** Runs an AArch64 program on this machine, where installed (Debian's qemu-user-static). */
const QEMU = '/usr/bin/qemu-aarch64-static';

let engine: Engine;
let s3: S3rverBucket;
let s3vectors: S3VectorsMock;
let parts: PresignedParts;
let gateway: LambdaFront;
let embedder: FakeEmbedder;
let transcriber: FakeTranscriber;
let chat: FakeKnowledgeChat;
let c: Client;
let org: string;
let dir: string;
let stack: PlatformStack;
let template: Template;
let recording: { bytes: Uint8Array; size: number };
let recorder: { server: Server; origin: string };
/** The engine's clock: moved on by the test (a lease lapsing) while real time passes as usual. */
let offsetMs = 0;
const clock: Clock = { now: () => Date.now() + offsetMs, sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) };

/** Whose AWS calls these are: a route's function (the front's last invocation), the consumer, the sweep, or the test looking. */
/**
 * Who is calling S3 or SQS: the invocation's own (AsyncLocalStorage), so a stalled invocation that
 * wakes later is still its function's, not whoever runs then; `route` outside any.
 */
const callers = new AsyncLocalStorage<'consumer' | 'sweep' | 'test'>();
const callerNow = (): 'route' | 'consumer' | 'sweep' | 'test' => callers.getStore() ?? 'route';
const sent: { caller: string; route?: string; service: 's3' | 'vectors' | 'sqs'; command: string; key: string; copySource?: string }[] = [];
/** Each presigned GET ffmpeg or ffprobe made (through the recorder in front of s3rver), with the bytes S3 served before the reader hung up. */
const served: { caller: string; range: string; status: number; bytes: number }[] = [];
/** The layer stand-in's runs: the program, its process id and its input (`-i`); each run's own report is in `reports`. */
let runsLog: string;
let reports: string;
let layerPrograms: 'the layer\'s arm64 builds under qemu' | "Debian's";

/**
 * A stand-in for Lambda's /opt with the layer's layout (FFMPEG_LAYER_PATHS): `bin/ffmpeg` and
 * `bin/ffprobe`, each a wrapper that notes its run and runs the layer's own program under qemu (the
 * one the layer's bundling copies, made executable as it does: the package ships ffprobe 0744, and the
 * static build run from a file without the execute bit exits 1 saying nothing), else Debian's.
 */
function layerMount(root: string): void {
  const bin = join(root, posix.relative(LAYER_MOUNT, posix.dirname(FFMPEG_LAYER_PATHS.ffmpeg)));
  mkdirSync(bin, { recursive: true });
  let installed: Record<'ffmpeg' | 'ffprobe', string> | undefined;
  if (existsSync(QEMU)) {
    try {
      installed = JSON.parse(execFileSync(process.execPath, [join(PROJECT_ROOT, 'scripts', 'ffmpeg-layer.mjs')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    } catch {
      installed = undefined; // not installed and no network: Debian's below
    }
  }
  const real = {} as Record<'ffmpeg' | 'ffprobe', string>;
  for (const name of ['ffmpeg', 'ffprobe'] as const) {
    if (installed) {
      const copy = join(root, '..', `arm64-${name}`);
      copyFileSync(installed[name], copy);
      chmodSync(copy, 0o755);
      real[name] = `'${QEMU}' '${copy}'`;
    } else real[name] = `'${execSync(`command -v ${name}`, { encoding: 'utf8' }).trim()}'`;
  }
  layerPrograms = installed ? "the layer's arm64 builds under qemu" : "Debian's";
  for (const name of ['ffmpeg', 'ffprobe'] as const) {
    // FFREPORT: the program's own log at `verbose`, apart from its stderr, ending with what it read of its input ("Statistics: N bytes read").
    const script = [
      '#!/bin/sh',
      'input=; prev=',
      'for a in "$@"; do [ "$prev" = "-i" ] && input="$a"; prev="$a"; done',
      `printf '%s %s %s\\n' ${name} $$ "$input" >> '${runsLog}'`,
      `FFREPORT='file=${reports}/${name}-'$$'.log:level=40' exec ${real[name]} "$@"`,
    ];
    writeFileSync(join(bin, name), `${script.join('\n')}\n`);
    chmodSync(join(bin, name), 0o755);
  }
}

/** Each run of the stand-in's programs: which, its input (a URL or a path; empty for `-version`), and the bytes it read of that input by its own count. */
const runs = () =>
  existsSync(runsLog)
    ? readFileSync(runsLog, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const [program, pid, ...input] = line.split(' ');
          return { program, input: input.join(' '), bytesRead: bytesRead(join(reports, `${program}-${pid}.log`)) };
        })
    : [];

/** What ffmpeg's report says the run read of its input (its AVIOContext's statistics), or undefined. */
function bytesRead(report: string): number | undefined {
  if (!existsSync(report)) return undefined;
  const counts = [...readFileSync(report, 'utf8').matchAll(/Statistics: (\d+) bytes read/g)].map((m) => Number(m[1]));
  return counts.length ? counts.reduce((a, b) => a + b, 0) : undefined;
}

/**
 * A recorder in front of s3rver for presigned GETs: the URL the store signs points here, and each
 * request goes on to s3rver as it came (its Host too, which the signature covers), counting what S3
 * sends back until the reader hangs up.
 */
async function presignedRecorder(s3Endpoint: string): Promise<{ server: Server; origin: string }> {
  const upstream = new URL(s3Endpoint);
  const server = createServer((req, res) => {
    const entry = { caller: callerNow(), range: String(req.headers.range ?? ''), status: 0, bytes: 0 };
    served.push(entry);
    const out = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } }, (answer) => {
      entry.status = answer.statusCode ?? 0;
      res.writeHead(entry.status, answer.headers);
      answer.on('data', (chunk: Buffer) => {
        if (res.destroyed) return void answer.destroy();
        entry.bytes += chunk.length;
        if (!res.write(chunk)) {
          answer.pause();
          res.once('drain', () => answer.resume());
        }
      });
      answer.on('end', () => res.end());
    });
    out.on('error', () => res.destroy());
    res.on('close', () => out.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A model that takes a request and never answers, until `hangUp` (a stalled upstream). */
async function stalledUpstream(): Promise<{ url: string; requests: number; hangUp(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer(() => void stalled.requests++);
  const stalled = {
    url: '',
    requests: 0,
    hangUp: () => sockets.forEach((s) => s.destroy()),
    close: () => new Promise<void>((resolve) => (stalled.hangUp(), server.close(() => resolve()))),
  };
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stalled.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return stalled;
}

const setChat = (baseUrl: string) =>
  new ModelRoutes(engine.kv, () => engine.clock.now()).set(org, { id: 'gpt', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: baseUrl, upstream_model: 'gpt-fake', timeout_ms: 60_000, default: true, price_in_per_mtok: 2.5, price_out_per_mtok: 10 });

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  dir = mkdtempSync(join(tmpdir(), 'knowledge-jobs-aws-lease-'));
  runsLog = join(dir, 'runs.log');
  reports = join(dir, 'reports');
  mkdirSync(reports);
  ({ stack } = synthStack());
  template = flatTemplate(stack);
  // FFMPEG_PATH as the template gives it to the consumer, read under the stand-in of /opt.
  const ffmpegPath = consumerFunction(template, 'knowledge-jobs').props.Environment.Variables[ENV.ffmpegPath] as string;
  expect(ffmpegPath).toBe(FFMPEG_LAYER_PATHS.ffmpeg);
  expect(routeFunctions(template).get('ai.knowledge.jobs.create')!.props.Environment.Variables[ENV.ffmpegPath]).toBe(ffmpegPath);
  const opt = join(dir, 'opt');
  layerMount(opt);
  useSettings({ modelRoutesCacheMs: 0, ffmpegPath: join(opt, posix.relative(LAYER_MOUNT, ffmpegPath)) });

  ({ engine, s3, s3vectors } = await startAwsDataEngine('knowledge-jobs-aws-lease', { clock }));
  parts = standInListParts(engine);
  s3.client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Key?: string; CopySource?: string };
      sent.push({ caller: callerNow(), ...(callerNow() === 'route' ? { route: gateway?.invocations.at(-1)?.route ?? 'test' } : {}), service: 's3', command: String(context.commandName), key: String(input.Key), copySource: input.CopySource });
      return next(args);
    },
    { step: 'initialize', name: 'recordS3' },
  );
  const send = engine.queue.send.bind(engine.queue);
  engine.queue.send = (queue, body, options) => {
    sent.push({ caller: callerNow(), ...(callerNow() === 'route' ? { route: gateway?.invocations.at(-1)?.route ?? 'test' } : {}), service: 'sqs', command: 'SendMessage', key: queue });
    return send(queue, body, options);
  };
  recorder = await presignedRecorder(s3.endpoint);
  const sign = engine.blobs.downloadUrl!.bind(engine.blobs);
  engine.blobs.downloadUrl = async (key, seconds) => {
    const url = new URL(await sign(key, seconds));
    expect(url.origin).toBe(s3.endpoint);
    return `${recorder.origin}${url.pathname}${url.search}`;
  };
  useEngine(engine);

  [embedder, transcriber, chat] = await Promise.all([startFakeEmbedder(), startFakeTranscriber(), startFakeKnowledgeChat()]);
  const tenants = new Tenants(engine.kv, () => Date.now());
  org = (await tenants.createOrganization('jobs-aws-lease')).id;
  const workspace = (await tenants.createWorkspace(org, 'main')).id;
  c = { url: '', key: (await tenants.createSecretKey(org)).key };
  const routes = new ModelRoutes(engine.kv, () => engine.clock.now());
  await routes.set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000, default: true });
  await routes.set(org, { id: 'whisper', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: transcriber.baseUrl, upstream_model: 'whisper-1', timeout_ms: 20_000, default: true, price_per_minute: 0.006 });
  await setChat(chat.baseUrl);
  await createVectorDatabase(engine, workspace, 'emb');
  gateway = await startLambdaFront('ai');
  c.url = gateway.url;
  // Large for its length (8 Mbit/s of noise: 20 MB), its index at the front: what a probe needs is in its first kilobytes.
  const file = await recordingAt(join(dir, 'standup.mp4'), { seconds: 20, size: '640x480', videoBitrate: '8M' });
  recording = { bytes: new Uint8Array(readFileSync(file)), size: statSync(file).size };
}, 120_000);

afterAll(async () => {
  await gateway?.close();
  await Promise.all([embedder?.close(), transcriber?.close(), chat?.close()]);
  if (recorder) {
    recorder.server.closeAllConnections();
    await new Promise<void>((resolve) => recorder.server.close(() => resolve()));
  }
  await engine?.close();
  useSettings();
  if (dir) rmSync(dir, { recursive: true, force: true });
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

const sqsEvent = (messages: QueueMessage[]): SQSEvent => ({
  Records: messages.map((m) => ({
    messageId: m.id,
    receiptHandle: m.receipt,
    body: m.body,
    attributes: { ApproximateReceiveCount: String(m.receiveCount), SentTimestamp: String(Date.now()), SenderId: 'test', ApproximateFirstReceiveTimestamp: String(Date.now()) },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${JOBS_QUEUE}`,
    awsRegion: 'us-east-1',
  })),
});

/** The next message of the knowledge-jobs queue as the event source mapping receives it (900 s: the function's timeout). */
const receive = async (): Promise<QueueMessage | undefined> => (await engine.queue.receive(JOBS_QUEUE, { max: 1, visibilitySeconds: 900 }))[0];

/** One invocation of the consumer's handler with one message, which is then deleted (the answer names no failure). */
async function consume(message: QueueMessage): Promise<void> {
  const from = s3vectors.stub.calls().length;
  const answer = await callers.run('consumer', () => knowledgeJobs(sqsEvent([message])));
  for (const v of s3vectors.stub.calls().slice(from)) sent.push({ caller: 'consumer', service: 'vectors', command: `s3vectors:${(v.args[0] as object).constructor.name.replace(/Command$/, '')}`, key: '' });
  expect(answer).toEqual({ batchItemFailures: [] });
  await engine.queue.delete(JOBS_QUEUE, message.receipt);
}

async function sweep(): Promise<{ swept: number }> {
  return callers.run('sweep', () => knowledgeJobsSweep(undefined));
}

async function getJob(id: string) {
  const r = await call(c, 'GET', `/v1/knowledge/jobs/${id}`);
  expect(r.status, r.text).toBe(200);
  return r.body;
}

/**
 * The event source mapping: each message to the handler until the job is finished, or until `stopAt`
 * names one (returned, left in flight). A message sent with a delay is waited for.
 */
async function drive(job: string, handled: JobMessage[], stopAt?: (m: JobMessage) => boolean): Promise<QueueMessage | undefined> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const message = await receive();
    if (!message) {
      if (['completed', 'failed', 'cancelled'].includes((await getJob(job)).status)) return undefined;
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    const body = parseJobMessage(message.body);
    expect(body, message.body).toBeDefined();
    if (stopAt?.(body!)) return message;
    handled.push(body!);
    await consume(message);
  }
  throw new Error(`job ${job} not finished within 60 s; handled ${handled.map((m) => m.step).join(', ')}`);
}

describe('a knowledge job on AWS whose processor dies mid-step', () => {
  let jobId: string;
  const handled: JobMessage[] = [];
  let dying: Promise<unknown>;
  let stalled: Awaited<ReturnType<typeof stalledUpstream>>;

  it('starts: the recording probed with ffprobe through a presigned S3 URL, S3 serving a small part of it', async () => {
    const uploadId = await upload(recording.bytes, 'standup.mp4', 'video/mp4');
    expect(engine.blobs.filePath).toBeUndefined(); // S3: no local file to read
    const [servedFrom, runsFrom] = [served.length, runs().length];
    const upstreamCalls = () => [transcriber.requests.length, chat.requests.length, embedder.calls.length];
    const before = upstreamCalls();
    const started = await call(c, 'POST', '/v1/knowledge/jobs', { upload_id: uploadId, max_price_usd: '5', max_pointers: 3 });
    expect(started.status, started.text).toBe(202);
    jobId = started.body.job_id;
    expect(started.body).toMatchObject({ poll_after_seconds: expect.any(Number), status_url: `/v1/knowledge/jobs/${jobId}` });
    // ffprobe, at the layer's path, read the presigned URL by ranges.
    const probes = runs().slice(runsFrom).filter((r) => r.input);
    expect(probes.map((r) => r.program)).toEqual(['ffprobe']);
    expect(probes[0].input.startsWith(`${recorder.origin}/`)).toBe(true);
    expect(new URL(probes[0].input).searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    // ffprobe read a small part of the file (by its own count); S3 sent it that and what TCP took ahead
    // of it until it hung up (socket buffers: megabytes here on loopback, not the file's length).
    const reads = served.slice(servedFrom);
    const sentBytes = reads.reduce((n, r) => n + r.bytes, 0);
    console.log(`the start's probe (${layerPrograms}): read ${probes[0].bytesRead} of ${recording.size} bytes; S3 sent ${sentBytes} in ${reads.length} GETs (${reads.map((r) => `${r.status} ${r.range || 'no range'}`).join('; ')})`);
    expect(recording.size).toBeGreaterThan(15_000_000);
    expect(probes[0].bytesRead).toBeGreaterThan(0);
    expect(probes[0].bytesRead).toBeLessThan(recording.size / 20);
    expect(reads.length).toBeGreaterThan(0);
    for (const r of reads) expect([200, 206]).toContain(r.status);
    expect(sentBytes).toBeGreaterThanOrEqual(probes[0].bytesRead!);
    const job = await getJob(jobId);
    expect(job).toMatchObject({ status: 'queued', step: 'probe', max_price_usd: '5' });
    expect(Number(job.estimate_usd)).toBeGreaterThan(0);
    // Priced before any paid work: no upstream was called.
    expect(upstreamCalls()).toEqual(before);
  }, 60_000);

  it('runs its steps and its transcription piece through the consumer; a processor stalls on extraction and dies', async () => {
    const next = await drive(jobId, handled, (m) => m.step === 'extract');
    expect(next, 'the extract step was sent').toBeDefined();
    expect(handled.map((m) => m.step)).toEqual(['probe', 'transcribe', 'piece', 'transcribe']);
    expect(transcriber.requests.length).toBe(1);
    expect(await getJob(jobId)).toMatchObject({ status: 'running', step: 'extract', progress: { pieces_done: 1, pieces_total: 1 } });
    // ffmpeg cut the audio from the presigned URL too.
    expect(runs().some((r) => r.program === 'ffmpeg' && r.input.startsWith(`${recorder.origin}/`))).toBe(true);

    // A processor takes the extract step and waits on a model that does not answer; then its invocation
    // dies (Lambda's timeout): the message is gone here (SQS brings it back only after 5,400 s).
    stalled = await stalledUpstream();
    await setChat(stalled.url);
    dying = callers.run('consumer', () => knowledgeJobs(sqsEvent([next!])));
    await engine.queue.delete(JOBS_QUEUE, next!.receipt);
    const deadline = Date.now() + 10_000;
    while (stalled.requests === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(stalled.requests).toBe(1);
    expect(await engine.kv.get(jobKey(org, '-', jobId))).toMatchObject({ status: 'running', step: 'extract', attempt: 1 });
  }, 60_000);

  it('the jobs sweep leaves the step while its lease holds, and sends it again once the lease lapsed', async () => {
    expect(await sweep()).toEqual({ swept: 0 });
    expect(await receive()).toBeUndefined();
    // Two leases later on the engine's clock (the dead processor renews nothing):
    offsetMs += 2 * 60_000 + 5_000;
    await setChat(chat.baseUrl);
    expect((await sweep()).swept).toBeGreaterThanOrEqual(1);
    const again = await receive();
    expect(again && parseJobMessage(again.body)).toEqual({ org, app: '-', job: jobId, step: 'extract' });
    // Its lease entry moved on: the next sweep sends nothing more.
    const entries = (await engine.kv.query({ pk: JOB_SWEEP_PARTITION })).items.filter((e) => String(e.sk).includes(jobId));
    expect(entries).toHaveLength(1);
    await sweep();
    expect(await receive()).toBeUndefined();
    // Another processor takes the job over (a new attempt) and extracts.
    handled.push(parseJobMessage(again!.body)!);
    await consume(again!);
    expect(await engine.kv.get(jobKey(org, '-', jobId))).toMatchObject({ status: 'running', step: 'reconcile' });
  }, 60_000);

  it('completes: a cloud collection whose query returns an entry cited by time, and its frames; extraction paid once', async () => {
    await drive(jobId, handled);
    expect(handled.map((m) => m.step)).toEqual(['probe', 'transcribe', 'piece', 'transcribe', 'extract', 'reconcile', 'frames', 'publish']);
    // The stalled processor's call ends (the model hangs up): it finds the job taken over and leaves it as it is.
    stalled.hangUp();
    expect(await dying).toEqual({ batchItemFailures: [] });
    await stalled.close();
    const job = await getJob(jobId);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect(job).toMatchObject({ error: null, collection_id: expect.stringMatching(/^col_/) });
    expect(job.entries).toBeGreaterThan(0);
    expect(job.frames).toBeGreaterThan(0);
    expect(job.frames).toBeLessThanOrEqual(3);
    expect(Number(job.spent_usd)).toBeGreaterThan(0);
    expect(Number(job.spent_usd)).toBeLessThanOrEqual(Number(job.estimate_usd));
    expect(transcriber.requests.length).toBe(1);
    expect(chat.calls.extract).toBe(1);

    const q = await call(c, 'POST', `/v1/collections/${job.collection_id}/query`, { query: 'Said', top_k: 10 });
    expect(q.status, q.text).toBe(200);
    const entry = q.body.matches.find((m: any) => /^(Decision|Action item|Question|Fact):/.test(m.text));
    expect(entry, q.text).toBeDefined();
    expect(entry.citation).toMatchObject({ collection_id: job.collection_id, locator: expect.stringMatching(/^t=\d\d:\d\d:\d\d-\d\d:\d\d:\d\d$/) });
    const items = await call(c, 'GET', `/v1/collections/${job.collection_id}/items?limit=100`);
    expect(items.status, items.text).toBe(200);
    const frames = items.body.data.filter((i: any) => i.content_type === 'image/jpeg');
    expect(frames).toHaveLength(job.frames);
    for (const f of frames) expect(f).toMatchObject({ status: 'done', filename: expect.stringMatching(/^standup\.frame-\d\d-\d\d-\d\d\.jpg$/) });
    // Every ffmpeg run (the audio cut, each frame) read the presigned URL; a frame, a part of it.
    const ffmpegRuns = runs().filter((r) => r.program === 'ffmpeg' && r.input);
    console.log(`ffmpeg's runs (${layerPrograms}), bytes read of ${recording.size}: ${ffmpegRuns.map((r) => r.bytesRead).join(', ')}`);
    expect(ffmpegRuns.length).toBeGreaterThanOrEqual(1 + job.frames);
    for (const r of ffmpegRuns) expect(r.input.startsWith(`${recorder.origin}/`), r.input).toBe(true);
    for (const r of ffmpegRuns.slice(1)) expect(r.bytesRead).toBeLessThan(recording.size / 4);
    // The job's scratch files are gone.
    const left = await callers.run('test', () => s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `knowledge-jobs/${org}/${jobId}/` })));
    expect(left.KeyCount ?? 0).toBe(0);
  }, 90_000);

  it("the start's probe gives up well within its route function's timeout, so a recording ffprobe is slow on is a 400, not Lambda's 5xx", () => {
    const create = routeFunctions(template).get('ai.knowledge.jobs.create')!;
    // The rest of the start (the uploads, the routes, the hold, the job written) takes a second or two.
    expect(START_PROBE_TIMEOUT_MS / 1000 + 5).toBeLessThanOrEqual(create.props.Timeout);
  });

  it("what the consumer, the sweep and the routes asked of S3, S3 Vectors and SQS is allowed by each one's role in the template", () => {
    const bucket = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.storage.bucket), 'Arn'] });
    const allows = (statements: AllowStatement[], action: string, resource: (json: unknown) => boolean) =>
      statements.some((st) => st.actions.some((a) => leadingKeyPattern(a).test(action)) && ([] as unknown[]).concat(JSON.parse(st.resources)).some(resource));
    const objectIs = (key: string) => (json: unknown) => {
      const join = (json as { 'Fn::Join'?: [string, [unknown, string]] })['Fn::Join'];
      return !!join && JSON.stringify(join[1][0]) === bucket && leadingKeyPattern(join[1][1].slice(1)).test(key);
    };
    const queueIs = (name: string) => (json: unknown) => JSON.stringify(json) === JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.queues.byName[name as keyof typeof stack.queues.byName].queue), 'Arn'] });
    /** IAM's reading of a request: the action it needs on its resource. */
    const needs = (r: (typeof sent)[number]): { action: string; resource: (json: unknown) => boolean; what: string }[] => {
      if (r.service === 'sqs') return [{ action: 'sqs:SendMessage', resource: queueIs(r.key), what: r.key }];
      if (r.service === 'vectors') return [{ action: r.command, resource: () => true, what: 'the vector indexes' }];
      const on = (action: string) => [{ action, resource: objectIs(r.key), what: r.key }];
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
          return [...on('s3:PutObject'), { action: 's3:GetObject', resource: objectIs(decodeURIComponent(r.copySource!.slice(r.copySource!.indexOf('/') + 1))), what: r.copySource! }];
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
    const routes = routeFunctions(template);
    const functionOf = (r: (typeof sent)[number]): RouteFunctionResource | undefined =>
      r.caller === 'consumer' ? consumerFunction(template, 'knowledge-jobs') : r.caller === 'sweep' ? consumerFunction(template, 'knowledge-jobs-sweep') : routes.get(r.route!);
    const asked = new Map<string, Set<string>>();
    for (const r of sent.filter((x) => x.caller !== 'test' && x.route !== 'test')) {
      const who = r.caller === 'route' ? r.route! : r.caller;
      const fn = functionOf(r);
      expect(fn, who).toBeDefined();
      const statements = allowedStatements(template, fn!);
      for (const need of needs(r)) expect(allows(statements, need.action, need.resource), `${who}: ${need.action} ${need.what}`).toBe(true);
      asked.set(who, (asked.get(who) ?? new Set()).add(`${r.service} ${r.command}`));
    }
    // The consumer read the recording (signed GETs) and its own files, wrote and removed them, wrote the collection, put its vectors, sent its steps.
    expect([...asked.get('consumer')!].sort()).toEqual(expect.arrayContaining(['s3 DeleteObjectCommand', 's3 GetObjectCommand', 's3 HeadObjectCommand', 's3 PutObjectCommand', 'sqs SendMessage', 'vectors s3vectors:PutVectors']));
    expect(sent.some((r) => r.caller === 'consumer' && r.command === 'GetObjectCommand' && r.key.startsWith('ai-uploads/'))).toBe(true);
    for (const r of sent.filter((x) => x.caller === 'consumer')) {
      if (r.service === 'vectors') expect(KNOWLEDGE_JOBS_VECTOR_ACTIONS).toContain(r.command);
      if (r.service === 'sqs') expect(KNOWLEDGE_JOBS_SENDS).toContain(r.key);
      // The recording is never removed by the job: the uploads sweep does, keep_source_hours after the start.
      if (r.command === 'DeleteObjectCommand') expect(r.key.startsWith('ai-uploads/'), r.key).toBe(false);
    }
    // The sweep only sent the step again: no objects, no vectors.
    expect([...asked.get('sweep')!]).toEqual(['sqs SendMessage']);
    // The start signed the recording's GET for ffprobe and sent the job's first step.
    expect([...asked.get('ai.knowledge.jobs.create')!]).toEqual(expect.arrayContaining(['s3 GetObjectCommand', 'sqs SendMessage']));
  });
});
