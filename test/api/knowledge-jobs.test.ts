/**
 * Knowledge jobs through the local server (spec 4.8; docs/ai/knowledge-jobs.md): recordings made by
 * Debian's ffmpeg, fake transcription, chat and embeddings upstreams that count their calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { setJobRoutes, settledJob } from '../helpers/knowledge-jobs.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeTranscriber, type FakeTranscriber } from '../helpers/fake-transcriber.js';
import { startFakeKnowledgeChat, type FakeKnowledgeChat } from '../helpers/fake-knowledge-chat.js';
import { call, post, query, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { recordingFile } from '../helpers/knowledge-files.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let transcriber: FakeTranscriber;
let chat: FakeKnowledgeChat;
let c: Client;
let video: string;

beforeAll(async () => {
  useSettings({ modelRoutesCacheMs: 0 });
  p = await startTestPlatform();
  [embedder, transcriber, chat] = await Promise.all([startFakeEmbedder(), startFakeTranscriber(), startFakeKnowledgeChat()]);
  const org = p.credentials.organization_id;
  c = { url: p.urls.ai, key: p.credentials.secret_key };
  await setJobRoutes(p.engine, org, p.credentials.workspace_id, { embedder, transcriber, chat });
  video = await uploadFile(c, await recordingFile({ seconds: 60 }), 'standup.mp4', 'video/mp4');
}, 120_000);

afterAll(async () => {
  await Promise.all([transcriber?.close(), embedder?.close(), chat?.close()]);
  await p?.close();
  useSettings();
});


describe('a medium job over a 60 s video', () => {
  it('publishes a cloud collection whose query returns an entry with its verbatim quote and time, and frames', async () => {
    const started = await post(c, '/v1/knowledge/jobs', { upload_id: video, max_price_usd: '5' });
    expect(started.status, started.text).toBe(202);
    expect(started.body.status_url).toBe(`/v1/knowledge/jobs/${started.body.job_id}`);
    const job = await settledJob(c, started.body.job_id, 90_000);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect(job.entries).toBeGreaterThan(0);
    expect(job.frames).toBeGreaterThan(0);
    expect(Number(job.spent_usd)).toBeGreaterThan(0);
    expect(Number(job.spent_usd)).toBeLessThanOrEqual(Number(job.estimate_usd));
    const r = await query(c, job.collection_id, { query: 'Said', top_k: 10 });
    expect(r.status, r.text).toBe(200);
    const entry = r.body.matches.find((m: any) => m.text.startsWith('Decision:') || m.text.startsWith('Fact:'));
    expect(entry, r.text).toBeDefined();
    expect(entry.citation.locator).toMatch(/^t=\d\d:\d\d:\d\d-\d\d:\d\d:\d\d$/);
  }, 120_000);
});
