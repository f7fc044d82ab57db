/**
 * Recordings (lambdas/knowledge/extract/media.ts) with a real ffmpeg and a fake transcription
 * upstream (real HTTP on loopback): the audio track sent as mono 16 kHz MP3 to the organization's
 * default transcription route, the segments as sections located by time, long audio cut into pieces
 * whose times are put back on the recording's clock, every failure answered with its reason (or
 * thrown as the gateway's upstream_error), limits and usage, and the way without ffmpeg.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { ModelRoutes, type RouteInput } from '../../lambdas/ai/model-routes.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { transcribeRecording, type RecordingFile } from '../../lambdas/knowledge/extract/media.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { activityRecordOf, flushActivity, type ActivityRecord } from '../../lambdas/activity/activity.js';
import { segmentEvents } from '../../lambdas/activity/segments.js';
import { recordingFile } from '../helpers/knowledge-files.js';
import { startFakeTranscriber, type FakeTranscriber, type FakeTranscriberMode } from '../helpers/fake-transcriber.js';

let dir: string;
let scratch: string;
let engine: Engine;
let fake: FakeTranscriber;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
let seq = 0;
const KEY_ENV = `TRANSCRIBE_TEST_KEY_${process.pid}`;
const previousTmp = process.env.TMPDIR;
let video4s: Uint8Array;
let wav7s: Uint8Array;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'media-'));
  engine = createEmbeddedEngine({ dataDir: dir, clock });
  fake = await startFakeTranscriber();
  process.env[KEY_ENV] = 'tk-test-secret';
  [video4s, wav7s] = await Promise.all([recordingFile({ seconds: 4 }), recordingFile({ seconds: 7, container: 'wav' })]);
  // The temporary files of the code under test go here, so the test can see them removed.
  scratch = mkdtempSync(join(tmpdir(), 'media-scratch-'));
  process.env.TMPDIR = scratch;
});
afterAll(async () => {
  process.env.TMPDIR = previousTmp;
  delete process.env[KEY_ENV];
  useSettings();
  await fake?.close();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});
beforeEach(() => {
  fake.mode = 'answer';
  fake.segmentSeconds = 2;
  fake.requests.length = 0;
  useSettings();
});

const principalOf = (organizationId: string): Principal => ({
  kind: 'secret_key', credentialId: `key_${seq++}`, organizationId, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null,
});

/** A new organization whose default transcription route is the fake. */
async function organization(route: Partial<RouteInput> = {}): Promise<{ org: string; principal: Principal }> {
  const org = `org_media_${seq++}`;
  await new ModelRoutes(engine.kv, () => clock.now()).set(org, {
    id: 'whisper', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: fake.baseUrl, upstream_model: 'whisper-1', default: true, api_key_env: KEY_ENV, ...route,
  });
  return { org, principal: principalOf(org) };
}

const video = (bytes = video4s): RecordingFile => ({ bytes, contentType: 'video/mp4', filename: 'talk.mp4', format: 'video' });
const audio = (bytes = wav7s, contentType = 'audio/wav'): RecordingFile => ({ bytes, contentType, filename: 'talk.wav', format: 'audio' });

async function usageEvents(org: string): Promise<ActivityRecord[]> {
  await flushActivity(engine);
  const day = new Date(clock.now()).toISOString().slice(0, 10);
  const page = await engine.kv.query({ pk: `act#${org}#${day}` });
  return page.items.flatMap(segmentEvents).map(activityRecordOf).filter((r) => r.kind === 'ai.usage');
}

/** The code of the PlatformError `p` rejects with (and that its message keeps the upstream's body out). */
async function thrownCode(p: Promise<unknown>): Promise<string> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PlatformError);
  expect((error as Error).message).not.toContain('sk-secret');
  return (error as PlatformError).code;
}

describe('transcribeRecording', () => {
  it("sends a video's audio track as mono 16 kHz MP3 to the default route, and gives the segments as sections located by time", async () => {
    const { principal } = await organization();
    fake.mode = 'script';
    fake.script = () => ({ text: 'Hello there. General Kenobi.', duration: 4, segments: [{ start: 0, end: 2, text: ' Hello there.' }, { start: 2, end: 4.5, text: ' General Kenobi.' }] });
    expect(await transcribeRecording(engine, principal, video(), undefined, { sectionSeconds: 0 })).toEqual({
      sections: [
        { text: 'Hello there.', locator: 't=00:00:00-00:00:02' },
        { text: 'General Kenobi.', locator: 't=00:00:02-00:00:04' },
      ],
    });
    expect(fake.requests).toHaveLength(1);
    const [request] = fake.requests;
    expect(request.path).toBe('/v1/audio/transcriptions');
    expect(request.headers.authorization).toBe('Bearer tk-test-secret');
    expect(request.fields).toEqual({ model: 'whisper-1', response_format: 'verbose_json', 'timestamp_granularities[]': 'segment' });
    expect(request.file).toMatchObject({ name: 'piece0000.mp3', type: 'audio/mpeg', codec: 'mp3', sampleRate: 16000, channels: 1 });
    expect(request.file!.duration).toBeCloseTo(4, 0);
    // 32 kbit/s: 4 s is about 16 kB, whatever the video weighed.
    expect(request.file!.size).toBeLessThan(20_000);
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('joins consecutive segments into sections of up to a minute by default', async () => {
    const { principal } = await organization();
    fake.mode = 'script';
    const segments = Array.from({ length: 40 }, (_, i) => ({ start: i * 2, end: i * 2 + 2, text: ` Sentence ${i}.` }));
    fake.script = () => ({ text: '', duration: 80, segments });
    const out = await transcribeRecording(engine, principal, video());
    expect(out).toEqual({
      sections: [
        { text: Array.from({ length: 30 }, (_, i) => `Sentence ${i}.`).join(' '), locator: 't=00:00:00-00:01:00' },
        { text: Array.from({ length: 10 }, (_, i) => `Sentence ${30 + i}.`).join(' '), locator: 't=00:01:00-00:01:20' },
      ],
    });
  });

  it("cuts long audio into pieces and puts each piece's segment times back on the recording's clock", async () => {
    const { principal } = await organization();
    const out = await transcribeRecording(engine, principal, audio(await recordingFile({ seconds: 9, container: 'wav' })), undefined, { pieceSeconds: 3, sectionSeconds: 0 });
    expect(fake.requests.map((r) => r.file?.name)).toEqual(['piece0000.mp3', 'piece0001.mp3', 'piece0002.mp3']);
    // The fake's segments are 2 s of each piece; the pieces start at 0, about 3 and about 6 s.
    expect(out).toEqual({
      sections: [
        { text: expect.stringMatching(/^piece0000\.mp3 0\.0-2\.0$/), locator: 't=00:00:00-00:00:02' },
        { text: expect.stringMatching(/^piece0000\.mp3 2\.0-3\.\d$/), locator: 't=00:00:02-00:00:03' },
        { text: expect.stringMatching(/^piece0001\.mp3 0\.0-2\.0$/), locator: 't=00:00:03-00:00:05' },
        { text: expect.stringMatching(/^piece0001\.mp3 2\.0-3\.\d$/), locator: 't=00:00:05-00:00:06' },
        { text: expect.stringMatching(/^piece0002\.mp3 0\.0-2\.0$/), locator: 't=00:00:06-00:00:08' },
        { text: expect.stringMatching(/^piece0002\.mp3 2\.0-3\.\d$/), locator: 't=00:00:08-00:00:09' },
      ],
    });
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('cuts a recording into equal pieces, so the last is never a sliver', async () => {
    const { principal } = await organization();
    // 7 s in pieces of at most 3 s: three of about 2.3 s, not 3, 3 and 1; and 6.02 s: two of about 3 s, not 3, 3 and 0.02.
    await transcribeRecording(engine, principal, audio(), undefined, { pieceSeconds: 3 });
    expect(fake.requests.map((r) => Math.round(r.file!.duration! * 10) / 10)).toEqual([2.3, 2.3, 2.3]);
    fake.requests.length = 0;
    await transcribeRecording(engine, principal, audio(await recordingFile({ seconds: 6.02, container: 'wav' })), undefined, { pieceSeconds: 3 });
    expect(fake.requests).toHaveLength(2);
  });

  it('takes an answer without segments as one section over its duration', async () => {
    const { principal } = await organization();
    fake.mode = 'text-only';
    fake.segmentSeconds = 100;
    const out = await transcribeRecording(engine, principal, video());
    expect(out).toEqual({ sections: [{ text: expect.stringMatching(/^piece0000\.mp3 0\.0-4\.\d$/), locator: 't=00:00:00-00:00:04' }] });
  });

  it('takes a transcription route only on provider openai-compatible', async () => {
    const routes = new ModelRoutes(engine.kv, () => clock.now());
    const org = `org_media_${seq++}`;
    await expect(routes.set(org, { id: 't', endpoint: '/v1/audio/transcriptions', provider: 'bedrock', upstream_model: 'm' })).rejects.toThrow(/serves .*not \/v1\/audio\/transcriptions/);
    await expect(routes.set(org, { id: 't', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: fake.baseUrl })).resolves.toMatchObject({ endpoint: '/v1/audio/transcriptions' });
  });

  it('fails unsupported_type, saying what to configure, when the organization has no default transcription route', async () => {
    const none = principalOf(`org_media_${seq++}`);
    const out = await transcribeRecording(engine, none, video());
    expect(out).toMatchObject({ failed: 'unsupported_type', message: expect.stringContaining('--endpoint /v1/audio/transcriptions') });
    // A transcription route that is not the default is not picked.
    const { principal } = await organization({ default: false });
    expect(await transcribeRecording(engine, principal, video())).toMatchObject({ failed: 'unsupported_type', message: expect.stringContaining('--default') });
    expect(fake.requests).toHaveLength(0);
  });

  it('throws upstream_error for an error answer and for every kind of junk, never with the upstream body', async () => {
    const { principal } = await organization({ max_answer_bytes: 4096 });
    const modes: FakeTranscriberMode[] = ['fail', 'not-json', 'segments-not-list', 'time-not-finite', 'text-missing', 'huge'];
    for (const mode of modes) {
      fake.mode = mode;
      expect([mode, await thrownCode(transcribeRecording(engine, principal, video()))]).toEqual([mode, 'upstream_error']);
    }
    expect(fake.requests).toHaveLength(modes.length);
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('answers parse_error for a file ffmpeg cannot read, and empty_text for a video without sound or a silent transcript', async () => {
    const { principal } = await organization();
    expect(await transcribeRecording(engine, principal, audio(new Uint8Array(randomBytes(5000)), 'audio/mpeg'))).toEqual({ failed: 'parse_error' });
    expect(await transcribeRecording(engine, principal, video(await recordingFile({ seconds: 2, audio: false })))).toEqual({ failed: 'empty_text' });
    expect(fake.requests).toHaveLength(0);
    fake.mode = 'silent';
    expect(await transcribeRecording(engine, principal, video())).toEqual({ failed: 'empty_text' });
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('answers too_large for a recording over the longest taken, or when ffmpeg runs past its time; stops when the caller aborts', async () => {
    const { principal } = await organization();
    expect(await transcribeRecording(engine, principal, audio(), undefined, { maxSeconds: 5 })).toMatchObject({ failed: 'too_large', message: expect.stringContaining('longer than') });
    expect(await transcribeRecording(engine, principal, audio(), undefined, { timeoutMs: 1 })).toMatchObject({ failed: 'too_large', message: expect.stringContaining('took longer than') });
    const gone = new AbortController();
    gone.abort(new Error('the processing run ended'));
    await expect(transcribeRecording(engine, principal, audio(), gone.signal)).rejects.toThrow();
    expect(fake.requests).toHaveLength(0);
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('records each call as ai.usage with its seconds of audio, and counts it against the requests a minute', async () => {
    const { org, principal } = await organization();
    await transcribeRecording(engine, principal, audio(), undefined, { pieceSeconds: 3 });
    const events = await usageEvents(org);
    expect(events).toHaveLength(3);
    expect(events.map((e) => [e.route, e.status])).toEqual([['whisper', 200], ['whisper', 200], ['whisper', 200]]);
    const seconds = events.reduce((sum, e) => sum + (e.usage?.audio_seconds ?? 0), 0);
    expect(seconds).toBeGreaterThan(6.9);
    expect(seconds).toBeLessThan(7.5);

    await new AiOrgSettings(engine.kv, () => clock.now()).setLimits(org, { rpm: 4 });
    // 3 pieces fit in 4 calls a minute; the next recording's second piece does not.
    await transcribeRecording(engine, principal, audio(), undefined, { pieceSeconds: 3 });
    expect(await thrownCode(transcribeRecording(engine, principal, audio(), undefined, { pieceSeconds: 3 }))).toBe('rate_limited');
  });

  it('without ffmpeg, sends a file the API takes as it is, and fails any other with a message saying why', async () => {
    useSettings({ ffmpegPath: join(scratch, 'no-such-dir', 'ffmpeg') });
    const { principal } = await organization();
    const out = await transcribeRecording(engine, principal, audio(wav7s, 'audio/wav; codecs=1'));
    expect(fake.requests.map((r) => r.file)).toEqual([expect.objectContaining({ name: 'recording.wav', type: 'audio/wav', codec: 'pcm_s16le', size: wav7s.length })]);
    expect(out).toEqual({ sections: [{ text: 'recording.wav 0.0-2.0 recording.wav 2.0-4.0 recording.wav 4.0-6.0 recording.wav 6.0-7.0', locator: 't=00:00:00-00:00:07' }] });

    const notTaken = await transcribeRecording(engine, principal, { ...video(), contentType: 'video/x-matroska', filename: 'talk.mkv' });
    expect(notTaken).toEqual({ failed: 'unsupported_type', message: expect.stringContaining('ffmpeg is not installed') });
    const tooBig = await transcribeRecording(engine, principal, audio(new Uint8Array(25_000_001)));
    expect(tooBig).toMatchObject({ failed: 'unsupported_type' });
    expect(fake.requests).toHaveLength(1);
  });
});
