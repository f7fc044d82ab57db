/**
 * What each step of a knowledge job does, through the local server (spec 4.8; docs/ai/knowledge-jobs.md,
 * "Statuses and steps"), with fake transcription, chat and embeddings upstreams that count their calls
 * and recordings made by Debian's ffmpeg: what `power` and the two switches leave out, invented quotes
 * and unsupported statements dropped and counted, an audio-only recording, given transcripts (timed
 * and plain), a 25-minute recording transcribed in concurrent pieces put back on its clock, the job's
 * own price limit, the platform event a pull subscription receives, and how long the source is kept.
 *
 * The steps a job ran are read from the messages its pipeline sends on the `knowledge-jobs` queue (the
 * engine's own queue, watched here, not replaced).
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { setJobRoutes, settledJob } from '../helpers/knowledge-jobs.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeTranscriber, type FakeTranscriber } from '../helpers/fake-transcriber.js';
import { startFakeKnowledgeChat, type FakeKnowledgeChat } from '../helpers/fake-knowledge-chat.js';
import { call, post, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { recordingAt, recordingFile } from '../helpers/knowledge-files.js';
import { waitFor } from '../helpers/wait.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { settings, useSettings } from '../../lambdas/shared/settings.js';
import { FRAME_TRIES_PER_POINTER, JOBS_QUEUE, type JobMessage } from '../../lambdas/knowledge/jobs/pipeline.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let transcriber: FakeTranscriber;
let chat: FakeKnowledgeChat;
let c: Client;
/** A 60 s video (testsrc and a tone) and a 30 s WAV of the tone alone. */
let video: string;
let audio: string;
/** Every message the pipeline sent, by job. */
const sent = new Map<string, JobMessage[]>();

const CONCURRENCY = 3;

beforeAll(async () => {
  useSettings({ modelRoutesCacheMs: 0, knowledgeJobTranscriptionConcurrency: CONCURRENCY });
  p = await startTestPlatform();
  [embedder, transcriber, chat] = await Promise.all([startFakeEmbedder(), startFakeTranscriber(), startFakeKnowledgeChat()]);
  const org = p.credentials.organization_id;
  c = { url: p.urls.ai, key: p.credentials.secret_key };
  await setJobRoutes(p.engine, org, p.credentials.workspace_id, { embedder, transcriber, chat });
  // The engine's queue, watched: each message the pipeline sends is recorded, then sent as it was.
  const queue = p.engine.queue;
  const send = queue.send.bind(queue);
  queue.send = (async (name: string, body: string, options?: unknown) => {
    if (name === JOBS_QUEUE) {
      const m = JSON.parse(body) as JobMessage;
      sent.set(m.job, [...(sent.get(m.job) ?? []), m]);
    }
    return (send as (...args: unknown[]) => Promise<unknown>)(name, body, options);
  }) as typeof queue.send;
  [video, audio] = await Promise.all([
    recordingFile({ seconds: 60 }).then((bytes) => uploadFile(c, bytes, 'standup.mp4', 'video/mp4')),
    recordingFile({ seconds: 30, container: 'wav' }).then((bytes) => uploadFile(c, bytes, 'call.wav', 'audio/wav')),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([transcriber?.close(), embedder?.close(), chat?.close()]);
  await p?.close();
  useSettings();
});

const settled = (id: string, client = c) => settledJob(client, id, 90_000);

/** Starts a job and waits for its end; answers the job and the calls each upstream got meanwhile. */
async function run(body: object, client = c) {
  const before = { ...chat.calls };
  const transcriptions = transcriber.requests.length;
  const started = await post(client, '/v1/knowledge/jobs', body);
  expect(started.status, started.text).toBe(202);
  const job = await settled(started.body.job_id, client);
  const calls = { extract: chat.calls.extract - before.extract, reconcile: chat.calls.reconcile - before.reconcile, other: chat.calls.other - before.other, transcriptions: transcriber.requests.length - transcriptions };
  const steps = (sent.get(job.job_id) ?? []).map((m) => m.step);
  return { job, calls, steps };
}

/** The published collection's items, and the entries item's chunks (text and locator). */
async function published(job: any, client = c) {
  const items = (await call(client, 'GET', `/v1/collections/${job.collection_id}/items?limit=100`)).body.data as any[];
  const entriesItem = items.find((i) => i.filename.endsWith('.entries.json'));
  const entries = entriesItem ? ((await call(client, 'GET', `/v1/collections/${job.collection_id}/items/${entriesItem.item_id}/chunks?limit=500`)).body.data as { text: string; locator: string }[]) : [];
  return { items, entries };
}

const quoteOf = (chunkText: string) => /^Quote: "(.*)"$/m.exec(chunkText)?.[1];

/** Lines the fake chat makes an entry of, with their times on the recording's clock. */
const TIMED_LINES = [
  { at: '00:00:05', end: '00:00:09', text: 'We decided to ship the importer on Friday.' },
  { at: '00:00:12', end: '00:00:17', text: 'Grace will write the migration notes by Thursday.' },
  { at: '00:00:21', end: '00:00:26', text: 'Do we still support the old export format?' },
  { at: '00:00:28', end: '00:00:29', text: 'The nightly build takes forty minutes.' },
];

describe('power and the switches', () => {
  it('light makes no reconciliation call and no frame, and still publishes the transcript and its entries', async () => {
    const { job, calls, steps } = await run({ upload_id: video, max_price_usd: '5', power: 'light' });
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect([job.frames, calls.reconcile, calls.extract, calls.transcriptions]).toEqual([0, 0, 1, 1]);
    expect(steps).not.toContain('frames');
    expect(job.entries).toBeGreaterThan(0);
    const { items, entries } = await published(job);
    expect(items.map((i) => i.content_type).sort()).toEqual(['application/json', 'text/plain; charset=utf-8']);
    expect(items.every((i) => i.status === 'done')).toBe(true);
    expect(entries.length).toBe(job.entries);
  }, 120_000);

  it('medium over an audio-only recording: no frames step, invented quotes dropped and counted', async () => {
    chat.behavior.invent = 2;
    try {
      const { job, calls, steps } = await run({ upload_id: audio, max_price_usd: '5' });
      expect(job.status, JSON.stringify(job)).toBe('completed');
      expect(job.frames).toBe(0);
      expect(steps).not.toContain('frames');
      expect(steps.filter((s) => s === 'piece')).toHaveLength(1);
      expect(job.entries_dropped).toBe(2);
      expect(calls.reconcile).toBeGreaterThan(0);
      const { items, entries } = await published(job);
      expect(items.some((i) => i.content_type === 'image/jpeg')).toBe(false);
      expect(entries).toHaveLength(job.entries);
      // Every published quote is the transcriber's words; none of the invented ones.
      for (const e of entries) expect(quoteOf(e.text)).toMatch(/^piece-0000\.mp3 \d+\.0-\d+\.\d$/);
      expect(entries.some((e) => e.text.includes('board approved'))).toBe(false);
    } finally {
      chat.behavior.invent = 0;
    }
  }, 120_000);

  it('medium: a statement the support check finds unsupported is dropped and counted', async () => {
    chat.behavior.unsupportedMatch = /forty minutes|old export/;
    try {
      const transcript = TIMED_LINES.map((l) => `[${l.at} - ${l.end}] ${l.text}`).join('\n');
      const { job, calls } = await run({ upload_id: audio, max_price_usd: '5', transcript });
      expect(job.status, JSON.stringify(job)).toBe('completed');
      expect([job.entries, job.entries_dropped, calls.reconcile]).toEqual([2, 2, 1]);
      const { entries } = await published(job);
      expect(entries.map((e) => quoteOf(e.text))).toEqual([TIMED_LINES[0].text, TIMED_LINES[1].text]);
    } finally {
      chat.behavior.unsupportedMatch = null;
    }
  }, 120_000);

  it('adaptive_evidence_extraction off at medium: no frames from a video', async () => {
    const { job, calls, steps } = await run({ upload_id: video, max_price_usd: '5', adaptive_evidence_extraction: { enabled: false } });
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect(job.frames).toBe(0);
    expect(steps).not.toContain('frames');
    expect(calls.reconcile).toBeGreaterThan(0);
    const { items } = await published(job);
    expect(items.some((i) => i.content_type === 'image/jpeg')).toBe(false);
  }, 120_000);

  it('adaptive_evidence_reconciliation off: no support check call, but the check in code still drops invented quotes', async () => {
    chat.behavior.invent = 3;
    chat.behavior.unsupported = true;
    try {
      const transcript = TIMED_LINES.map((l) => `[${l.at}] ${l.text}`).join('\n');
      const { job, calls } = await run({ upload_id: audio, max_price_usd: '5', transcript, adaptive_evidence_reconciliation: { enabled: false } });
      expect(job.status, JSON.stringify(job)).toBe('completed');
      // The statements all say UNSUPPORTED: nobody asked, so all four stay.
      expect([calls.reconcile, job.entries, job.entries_dropped]).toEqual([0, 4, 3]);
    } finally {
      chat.behavior.invent = 0;
      chat.behavior.unsupported = false;
    }
  }, 120_000);

  it('max makes two extraction passes: twice the extraction calls of medium for the same transcript', async () => {
    // Long enough for three windows of 6,000 tokens.
    const lines = Array.from({ length: 160 }, (_, i) => `[${clock(i * 6)} - ${clock(i * 6 + 5)}] Line ${i}: ${'the quarterly roadmap review covers budget hiring and the release train '.repeat(8).trim()}`);
    const transcript = lines.join('\n');
    const medium = await run({ upload_id: audio, max_price_usd: '20', transcript });
    const max = await run({ upload_id: audio, max_price_usd: '20', transcript, power: 'max' });
    expect(medium.job.status, JSON.stringify(medium.job)).toBe('completed');
    expect(max.job.status, JSON.stringify(max.job)).toBe('completed');
    expect(medium.calls.extract).toBeGreaterThanOrEqual(3);
    expect(max.calls.extract).toBe(2 * medium.calls.extract);
    // What the second pass finds again is merged away.
    expect(max.job.entries).toBe(medium.job.entries);
  }, 120_000);
});

describe('frames', () => {
  it('a picture that never changes: one frame, after a bounded number of ffmpeg runs, not one per entry', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'still-recording-'));
    const before = settings();
    try {
      const still = await recordingAt(join(dir, 'slides.mp4'), { seconds: 60, picture: 'still' });
      const upload = await uploadFile(c, new Uint8Array(await readFile(still)), 'slides.mp4', 'video/mp4');
      // ffmpeg and ffprobe as FFMPEG_PATH names them: the real programs, each run of ffmpeg written down.
      const log = join(dir, 'runs.log');
      const bin = join(dir, 'bin');
      await promisify(execFile)('mkdir', [bin]);
      for (const program of ['ffmpeg', 'ffprobe']) {
        const real = (await promisify(execFile)('sh', ['-c', `command -v ${program}`])).stdout.trim();
        await writeFile(join(bin, program), `#!/bin/sh\n${program === 'ffmpeg' ? `echo "$*" >> '${log}'\n` : ''}exec '${real}' "$@"\n`);
        await chmod(join(bin, program), 0o755);
      }
      await writeFile(log, '');
      useSettings({ ...before, ffmpegPath: join(bin, 'ffmpeg') });
      // 40 entries, one every 1.5 s.
      const transcript = Array.from({ length: 40 }, (_, i) => `[${clock(i * 1.5)}] Slide point ${i} is on the screen now.`).join('\n');
      const { job } = await run({ upload_id: upload, max_price_usd: '5', transcript, max_pointers: 2 });
      expect(job.status, JSON.stringify(job)).toBe('completed');
      expect(job.entries).toBe(40);
      expect(job.frames).toBe(1);
      const frameRuns = (await readFile(log, 'utf8')).split('\n').filter((line) => line.includes('-frames:v'));
      expect(frameRuns.length).toBeGreaterThan(1);
      expect(frameRuns.length).toBeLessThanOrEqual(2 * FRAME_TRIES_PER_POINTER);
    } finally {
      useSettings(before);
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('given transcripts', () => {
  it('a WebVTT transcript: no transcription call, and the entries cite its times', async () => {
    const vtt = ['WEBVTT', '', ...TIMED_LINES.flatMap((l, i) => [`${i + 1}`, `${l.at}.000 --> ${l.end}.500`, l.text, ''])].join('\n');
    const { job, calls, steps } = await run({ upload_id: audio, max_price_usd: '5', transcript: vtt });
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect([calls.transcriptions, job.progress.pieces_total]).toEqual([0, 0]);
    expect(steps).not.toContain('piece');
    const { entries } = await published(job);
    expect(entries.map((e) => [quoteOf(e.text), e.locator])).toEqual(TIMED_LINES.map((l) => [l.text, `t=${l.at}-${l.end}`]));
  }, 120_000);

  it('[HH:MM:SS] lines: no transcription call, and the entries cite the lines\' times', async () => {
    const transcript = ['Weekly sync', ...TIMED_LINES.map((l) => `[${l.at}] ${l.text}`)].join('\n');
    const { job, calls } = await run({ upload_id: audio, max_price_usd: '5', transcript });
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect(calls.transcriptions).toBe(0);
    const { entries } = await published(job);
    const cited = entries.filter((e) => TIMED_LINES.some((l) => l.text === quoteOf(e.text)));
    expect(cited.map((e) => e.locator.slice(0, 10))).toEqual(TIMED_LINES.map((l) => `t=${l.at}`));
  }, 120_000);

  it('a plain-text transcript: entries cite no time (entry=N)', async () => {
    const transcript = TIMED_LINES.map((l) => l.text).join('\n\n');
    const { job, calls } = await run({ upload_id: audio, max_price_usd: '5', transcript });
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect(calls.transcriptions).toBe(0);
    expect(job.entries).toBeGreaterThan(0);
    const { entries } = await published(job);
    expect(entries.map((e) => e.locator)).toEqual(entries.map((_, i) => `entry=${i + 1}`));
    expect(entries.some((e) => /^Time:/m.test(e.text))).toBe(false);
  }, 120_000);
});

describe('a 25-minute recording', () => {
  it('is transcribed in 3 pieces of at most 10 minutes at once, and its segments are put back on its clock', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'long-recording-'));
    let upload: string;
    try {
      const path = join(dir, 'lecture.mp3');
      // A tone for the first second of each minute, silence between: audio only, 8 kHz mono at 8 kbit/s (about 1.5 MB).
      await promisify(execFile)('ffmpeg', ['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=8000:duration=1500', '-af', "volume='lt(mod(t,60),1)':eval=frame", '-ac', '1', '-ar', '8000', '-b:a', '8k', path]);
      upload = await uploadFile(c, new Uint8Array(await readFile(path)), 'lecture.mp3', 'audio/mpeg');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    transcriber.segmentSeconds = 60;
    transcriber.delayMs = 1_500;
    try {
      const before = transcriber.requests.length;
      const { job, steps } = await run({ upload_id: upload, max_price_usd: '5', power: 'light' });
      expect(job.status, JSON.stringify(job)).toBe('completed');
      const requests = transcriber.requests.slice(before);
      expect(requests).toHaveLength(3);
      expect([job.progress.pieces_done, job.progress.pieces_total]).toEqual([3, 3]);
      expect(steps.filter((s) => s === 'piece')).toHaveLength(3);
      const durations = requests.map((r) => r.file?.duration ?? NaN).sort((a, b) => b - a);
      for (const d of durations) expect(d).toBeLessThanOrEqual(600.5);
      expect(durations.reduce((a, b) => a + b, 0)).toBeCloseTo(1500, -1);
      // Concurrent: every piece's request arrived before the first was answered.
      const arrivals = requests.map((r) => r.receivedAt);
      expect(Math.max(...arrivals) - Math.min(...arrivals)).toBeLessThan(transcriber.delayMs);
      // Each entry's quote names its piece and the time in it; its citation is that time on the recording's
      // clock: the pieces are even (evenPieces), 500 s each here.
      const { entries } = await published(job);
      expect(entries.length).toBe(job.entries);
      const seconds = (stamp: string) => stamp.split(':').reduce((t, part) => t * 60 + Number(part), 0);
      let beyondTen = 0;
      for (const e of entries) {
        const m = /^piece-(\d{4})\.mp3 (\d+\.\d)-(\d+\.\d)$/.exec(quoteOf(e.text) ?? '');
        expect(m, e.text).not.toBeNull();
        const [from, to] = [Number(m![2]), Number(m![3])].map((t) => Number(m![1]) * 500 + t);
        const cited = /^t=(\d\d:\d\d:\d\d)-(\d\d:\d\d:\d\d)$/.exec(e.locator);
        expect(cited, e.locator).not.toBeNull();
        expect(Math.abs(seconds(cited![1]) - from), `${e.locator} for ${m![0]}`).toBeLessThanOrEqual(1);
        expect(Math.abs(seconds(cited![2]) - to), `${e.locator} for ${m![0]}`).toBeLessThanOrEqual(1);
        if (from >= 600) beyondTen++;
      }
      expect(beyondTen).toBeGreaterThan(0);
    } finally {
      transcriber.segmentSeconds = 2;
      transcriber.delayMs = 0;
    }
  }, 120_000);
});

describe('price', () => {
  it('a job whose calls cost far more than estimated stops failed price_limit, with no call past the limit', async () => {
    const transcript = TIMED_LINES.map((l) => `[${l.at}] ${l.text}`).join('\n');
    // The estimate, as the refusal names it.
    const refused = await post(c, '/v1/knowledge/jobs', { upload_id: audio, max_price_usd: '0.000001', transcript });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body.error.code).toBe('budget_exceeded');
    const estimate = Number(/estimated at \$(\d+(?:\.\d+)?)/.exec(refused.body.error.message)?.[1]);
    expect(estimate).toBeGreaterThan(0);
    const max = (estimate + 0.000001).toFixed(6);
    // Each call reports a million prompt tokens: $2.50 at this route's price, far past the job's price.
    chat.behavior.usage = { prompt_tokens: 1_000_000, completion_tokens: 200 };
    try {
      const { job, calls } = await run({ upload_id: audio, max_price_usd: max, transcript });
      expect(job.status, JSON.stringify(job)).toBe('failed');
      expect(job.error.code).toBe('price_limit');
      expect(job.estimate_usd).toBe(estimate.toFixed(6));
      // The first call was made (its worst cost fitted) and paid as billed; nothing after it.
      expect(calls).toEqual({ extract: 1, reconcile: 0, other: 0, transcriptions: 0 });
      expect(Number(job.spent_usd)).toBeGreaterThan(Number(max));
      expect(job.collection_id).toBeNull();
    } finally {
      chat.behavior.usage = null;
    }
  }, 120_000);
});

describe('the platform event', () => {
  it('a pull subscription of the credential\'s workspace receives knowledge.job.completed with the job as its data', async () => {
    const org = p.credentials.organization_id;
    const workspace = p.credentials.workspace_id;
    const tenants = new Tenants(p.engine.kv, () => p.engine.clock.now());
    // An application-bound key: its events go to its application's workspace (an organization-wide key has none).
    const app = await tenants.createApplication(workspace, 'meetings', ['knowledge']);
    const appClient: Client = { url: p.urls.ai, key: (await tenants.createSecretKey(org, app.id)).key };
    const events = (method: string, path: string, body?: unknown) => call({ url: p.urls.events, key: appClient.key }, method, `/v1/workspaces/${workspace}${path}`, body);
    const subscription = await events('POST', '/subscriptions', { types: ['knowledge.job.completed', 'knowledge.job.failed'], delivery: { mode: 'pull' } });
    expect(subscription.status, subscription.text).toBe(201);
    const id = subscription.body.subscription_id as string;

    const recording = await uploadFile(appClient, await recordingFile({ seconds: 30, container: 'wav' }), 'meeting.wav', 'audio/wav');
    const { job } = await run({ upload_id: recording, max_price_usd: '5', transcript: TIMED_LINES.map((l) => `[${l.at}] ${l.text}`).join('\n') }, appClient);
    expect(job.status, JSON.stringify(job)).toBe('completed');

    let messages: any[] = [];
    await waitFor('the job event', async () => {
      const pulled = await events('POST', `/subscriptions/${id}/pull`, { max: 10 });
      expect(pulled.status, pulled.text).toBe(200);
      messages.push(...pulled.body.messages);
      return messages.length > 0;
    }, 10_000, 100);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ type: 'knowledge.job.completed', idempotency_key: `${job.job_id}.completed`, tenant: { organization_id: org, workspace_id: workspace, application_id: app.id }, data: job });
    expect((await events('POST', `/subscriptions/${id}/ack`, { ids: [messages[0].event_id] })).status).toBe(200);
    // Once only.
    messages = (await events('POST', `/subscriptions/${id}/pull`, { max: 10 })).body.messages;
    expect(messages).toEqual([]);
  }, 120_000);
});

describe('the source upload', () => {
  it('is kept keep_source_hours after the start, or as long as the upload keeps it if longer', async () => {
    // A recording of its own: the other tests' jobs (24 h by default) keep theirs longer.
    const recording = await uploadFile(c, await recordingFile({ seconds: 30, container: 'wav' }), 'kept.wav', 'audio/wav');
    const uploadExpires = Date.parse((await call(c, 'GET', `/v1/uploads/${recording}`)).body.expires_at);
    const transcript = TIMED_LINES.map((l) => `[${l.at}] ${l.text}`).join('\n');
    for (const hours of [1, 168]) {
      const { job } = await run({ upload_id: recording, max_price_usd: '5', transcript, keep_source_hours: hours });
      expect(job.status, JSON.stringify(job)).toBe('completed');
      const start = Date.parse(job.created_at);
      const expected = Math.max(start + hours * 3600_000, uploadExpires);
      expect(Math.abs(Date.parse(job.source_expires_at) - expected), `${hours} h: ${job.source_expires_at}, upload ${new Date(uploadExpires).toISOString()}`).toBeLessThanOrEqual(1000);
      if (hours === 168) expect(Date.parse(job.source_expires_at)).toBe(start + 168 * 3600_000);
    }
  }, 120_000);
});

function clock(seconds: number): string {
  seconds = Math.floor(seconds);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(Math.floor(seconds / 3600))}:${two(Math.floor(seconds / 60) % 60)}:${two(seconds % 60)}`;
}
