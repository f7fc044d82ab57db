/**
 * Crash safety of a knowledge job (docs/ai/knowledge-jobs.md, "Crashes"): `npm start` over a DATA_DIR
 * with KNOWLEDGE_LEASE_S=3 (a development setting: a step's lease is this when under 60 s) runs a job
 * over a 12-minute recording (two transcription pieces) whose transcript takes three extraction
 * windows, and every process of it is killed with SIGKILL as the second window's extraction call
 * reaches the fake chat upstream; restarted on the same DATA_DIR, then:
 *
 * - the job completes (the jobs sweep sends the extract step again once its dead lease lapsed), soon:
 *   within SETTLE_MS of the restart;
 * - transcription was paid once: the fake transcriber got one request per piece, none after the kill;
 * - the window extracted before the kill is not asked again (its answer was stored), the one killed
 *   mid-call is asked again, the third once.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeTranscriber, type FakeTranscriber, type FakeTranscriptionRequest } from '../helpers/fake-transcriber.js';
import { startFakeKnowledgeChat, type FakeKnowledgeChat } from '../helpers/fake-knowledge-chat.js';
import { adminAsyncOk, adminOk } from '../helpers/cli.js';
import { call, post, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { waitFor } from '../helpers/wait.js';

/** After the restart, the job is finished within this (a lease of 3 s, a sweep every 5 s, then the rest of the job). */
const SETTLE_MS = 45_000;
const MINUTES = 12;
/** A transcript segment every this many seconds, each about 200 tokens: some 15,000 tokens, three windows of 6,000. */
const SEGMENT_SECONDS = 10;

const dataDir = mkdtempSync(join(tmpdir(), 'knowledge-jobs-crash-'));
let server: LocalProcess | undefined;
let embedder: FakeEmbedder | undefined;
let transcriber: FakeTranscriber | undefined;
let chat: FakeKnowledgeChat | undefined;

afterAll(async () => {
  if (server) await crashLocalProcess(server);
  await Promise.all([embedder?.close(), transcriber?.close(), chat?.close()]);
  rmSync(dataDir, { recursive: true, force: true });
});

const start = async () => (server = await startLocalProcess({ DATA_DIR: dataDir, KNOWLEDGE_LEASE_S: '3' }));

const WORDS = ['budget', 'roadmap', 'hiring', 'release', 'migration', 'customers', 'support', 'latency', 'billing', 'onboarding'];

/** Segments every SEGMENT_SECONDS of the piece, each a long sentence naming the piece and its time (so quotes are unique). */
function segments(request: FakeTranscriptionRequest) {
  const duration = request.file?.duration ?? 0;
  const list: { id: number; start: number; end: number; text: string }[] = [];
  for (let start = 0, id = 0; start < duration - 1e-6; start += SEGMENT_SECONDS, id++) {
    const words = Array.from({ length: 150 }, (_, i) => WORDS[(i * 7 + id) % WORDS.length]).join(' ');
    list.push({ id, start, end: Math.min(duration, start + SEGMENT_SECONDS), text: ` ${request.file?.name} at ${start}: ${words}.` });
  }
  return { text: list.map((s) => s.text).join(''), duration, segments: list, usage: { type: 'duration', seconds: Math.ceil(duration) } };
}

/** The window of an extraction request (`part N of M`), from its user message. */
function windowOf(body: Record<string, any>): string {
  const user = String(body.messages?.find((m: any) => m.role === 'user')?.content ?? '');
  return /TRANSCRIPT \(part (\d+) of (\d+)/.exec(user)?.slice(1, 3).join('/') ?? '1/1';
}

it('completes a job killed with SIGKILL during extraction, paying for no finished call twice', async () => {
  [embedder, transcriber, chat] = await Promise.all([startFakeEmbedder(), startFakeTranscriber(), startFakeKnowledgeChat()]);
  transcriber.mode = 'script';
  transcriber.script = segments;
  await start();
  const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
  const org = credentials.organization_id as string;
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'emb', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', embedder.baseUrl, '--model', 'fake-embed', '--default');
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'whisper', '--endpoint', '/v1/audio/transcriptions', '--provider', 'openai-compatible', '--base-url', transcriber.baseUrl, '--model', 'whisper-1', '--default', '--price-per-minute', '0.006');
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'gpt', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', chat.baseUrl, '--model', 'gpt-fake', '--default', '--price-in-per-mtok', '2.5', '--price-out-per-mtok', '10');
  await adminAsyncOk(dataDir, 'vector-db', 'create', '--workspace', credentials.workspace_id, '--embedding-route', 'emb');
  let c: Client = { url: server!.urls.ai, key: credentials.secret_key };

  // A tone, audio only, 8 kHz mono at 8 kbit/s: small to upload, two pieces to transcribe.
  const path = join(dataDir, 'meeting.mp3');
  await promisify(execFile)('ffmpeg', ['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=8000:duration=${MINUTES * 60}`, '-ac', '1', '-b:a', '8k', path]);
  const upload = await uploadFile(c, new Uint8Array(await readFile(path)), 'meeting.mp3', 'audio/mpeg');

  // The kill: as the second window's extraction call arrives (the first window's answer is stored by then).
  let killed: Promise<void> | undefined;
  let killedAt = 0;
  chat.behavior.delayMs = 300;
  chat.onExtract = () => {
    if (chat!.calls.extract === 2 && !killed) {
      killedAt = Date.now();
      killed = crashLocalProcess(server!);
    }
  };
  const started = await post(c, '/v1/knowledge/jobs', { upload_id: upload, max_price_usd: '5' });
  expect(started.status, started.text).toBe(202);
  const id = started.body.job_id as string;
  await waitFor('the kill during extraction', () => killed !== undefined, 90_000, 50);
  await killed;
  const transcriptionsBeforeKill = transcriber.requests.length;
  const extractBeforeKill = chat.requests.filter((r) => r.response_format?.json_schema?.name === 'knowledge_entries').map(windowOf);
  expect(extractBeforeKill).toEqual(['1/3', '2/3']);

  chat.onExtract = undefined;
  chat.behavior.delayMs = 0;
  await start();
  c = { url: server!.urls.ai, key: credentials.secret_key };
  let job: any;
  await waitFor(
    'the job to finish after the restart',
    async () => {
      job = (await call(c, 'GET', `/v1/knowledge/jobs/${id}`)).body;
      return ['completed', 'failed', 'cancelled'].includes(job.status);
    },
    SETTLE_MS,
    200,
  );
  const recoveredInS = ((Date.now() - killedAt) / 1000).toFixed(1);
  expect(job.status, `${JSON.stringify(job)} (finished ${recoveredInS} s after the kill)`).toBe('completed');
  expect(job.entries).toBeGreaterThan(0);

  // Transcription paid once: a request per piece, none after the kill.
  expect([job.progress.pieces_done, job.progress.pieces_total]).toEqual([2, 2]);
  expect(transcriber.requests).toHaveLength(2);
  expect(transcriptionsBeforeKill).toBe(2);
  expect(transcriber.requests.map((r) => r.file?.name).sort()).toEqual(['piece-0000.mp3', 'piece-0001.mp3']);

  // The window stored before the kill is not asked again; the one cut short is, and the third once.
  const extract = chat.requests.filter((r) => r.response_format?.json_schema?.name === 'knowledge_entries').map(windowOf);
  expect(extract).toEqual(['1/3', '2/3', '2/3', '3/3']);
  console.log(`knowledge job crash: killed at the second extraction call; completed ${recoveredInS} s after the kill; ${job.entries} entries, ${chat.calls.reconcile} support checks`);
}, 180_000);
