/**
 * Knowledge jobs' requests through the local server (spec 4.8, 7, 8; issue 36 Deliver 1, 2, 4): every
 * code of the start, list, read and cancel routes in the issue's order of refusals, the price rules
 * (cap, estimate, budgets) with no upstream call on a refusal, the estimate's hold and its return,
 * cancel mid-run, and two organizations kept apart. Fake chat, transcription and embeddings upstreams
 * count their calls; recordings are made by Debian's ffmpeg.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { setJobRoutes, settledJob } from '../helpers/knowledge-jobs.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeTranscriber, type FakeTranscriber } from '../helpers/fake-transcriber.js';
import { startFakeKnowledgeChat, type FakeKnowledgeChat } from '../helpers/fake-knowledge-chat.js';
import { call, op, post, sha256, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { postBytes, sendBytes } from '../helpers/ai-calls.js';
import { recordingFile } from '../helpers/knowledge-files.js';
import { adminAsyncOk } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { AiKeyLimits, budgetState, keyScope } from '../../lambdas/ai/limits.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { estimatePrice } from '../../lambdas/knowledge/jobs/pricing.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let transcriber: FakeTranscriber;
let chat: FakeKnowledgeChat;
let org: string;
let a: Client;
/** A 4 s tone (audio only). */
let wav: string;
/** A 3 s picture without audio. */
let mute: string;
/** Text uploaded where a recording is expected. */
let textUpload: string;
/** Started, never completed. */
let incomplete: string;
/** A transcript upload of 16 MiB + 1 byte. */
let oversized: string;
/** A small transcript upload. */
let transcriptUpload: string;
/** Organization B: its org-wide key, and an upload of its own. */
let b: Client;
let bUpload: string;

const tenants = () => new Tenants(p.engine.kv, () => p.engine.clock.now());
const now = () => p.engine.clock.now();
const JOBS = '/v1/knowledge/jobs';
const MIB = 1024 * 1024;
/** Every call the fake upstreams received. */
const upstreamCalls = () => chat.requests.length + transcriber.requests.length + embedder.calls.length;
const codeOf = (r: { status: number; body: any }) => [r.status, r.body?.error?.code];
const errorOf = (r: { status: number; body: any }) => [r.status, r.body?.error?.code, r.body?.error?.param];
const TRANSCRIPT = ['[00:00:00-00:00:02] We ship the release on Friday.', '[00:00:02-00:00:04] Ada writes the notes.'].join('\n');
/** Chat prices: 2.5 in and 10 out per million tokens; the fake answers every call with 1,000 in and 200 out. */
const CHAT_CALL_USD = (1000 * 2.5 + 200 * 10) / 1e6;

/** A key of a new application of A's workspace. */
async function appKey(name: string, capabilities: string[]): Promise<Client> {
  const app = await tenants().createApplication(p.credentials.workspace_id, name, capabilities as never);
  return { url: p.urls.ai, key: (await tenants().createSecretKey(org, app.id)).key };
}

/** A new org-wide key of A (its own budget scope), with its key id. */
async function orgKey(): Promise<Client & { id: string }> {
  const k = await tenants().createSecretKey(org);
  return { url: p.urls.ai, key: k.key, id: k.id };
}

const settled = settledJob;

/** The estimate A's routes give a job over the 4 s tone transcribed, at the defaults (medium). */
async function wavEstimateMicro(): Promise<number> {
  const routes = await new ModelRoutes(p.engine.kv, now).list(org);
  const route = (id: string) => routes.find((r) => r.id === id)!;
  return estimatePrice({
    duration_s: 4,
    video: false,
    transcriptTokens: null,
    notesTokens: 0,
    power: 'medium',
    reconcile: true,
    frames: true,
    max_pointers: 10,
    routes: { chat: route('gpt'), transcription: route('whisper'), embeddings: route('emb') },
  }).total;
}

beforeAll(async () => {
  useSettings({ modelRoutesCacheMs: 0 });
  p = await startTestPlatform();
  [embedder, transcriber, chat] = await Promise.all([startFakeEmbedder(), startFakeTranscriber(), startFakeKnowledgeChat()]);
  org = p.credentials.organization_id;
  a = { url: p.urls.ai, key: p.credentials.secret_key };
  await setJobRoutes(p.engine, org, p.credentials.workspace_id, { embedder, transcriber, chat }, { embeddingsPerMtok: 0.02 });

  const [wavBytes, muteBytes] = await Promise.all([recordingFile({ seconds: 4, container: 'wav' }), recordingFile({ seconds: 3, audio: false })]);
  wav = await uploadFile(a, wavBytes, 'tone.wav', 'audio/wav');
  mute = await uploadFile(a, muteBytes, 'mute.mp4', 'video/mp4');
  textUpload = await uploadFile(a, Buffer.from('not a recording at all\n'.repeat(50)), 'notes.txt', 'text/plain');
  transcriptUpload = await uploadFile(a, Buffer.from(TRANSCRIPT), 'transcript.txt', 'text/plain');
  oversized = await uploadFile(a, Buffer.alloc(16 * MIB + 1, 'a'), 'huge.txt', 'text/plain');
  const partial = Buffer.from('half');
  incomplete = op();
  const started = await post(a, '/v1/uploads', { filename: 'half.txt', content_type: 'text/plain', size: partial.length, sha256: sha256(partial) }, incomplete);
  if (started.status !== 201) throw new Error(`upload start: ${started.status} ${started.text}`);

  const other = await tenants().createOrganization('organization B');
  await tenants().createWorkspace(other.id, 'b');
  b = { url: p.urls.ai, key: (await tenants().createSecretKey(other.id)).key };
  bUpload = await uploadFile(b, wavBytes, 'b.wav', 'audio/wav');
}, 60_000);

afterAll(async () => {
  await Promise.all([transcriber?.close(), embedder?.close(), chat?.close()]);
  await p?.close();
  useSettings();
});

describe('the order of refusals', () => {
  it('no credential: 401 on all four routes', async () => {
    const none = { url: p.urls.ai, key: '' };
    for (const [method, path] of [['POST', JOBS], ['GET', JOBS], ['GET', `${JOBS}/job_${'0'.repeat(32)}`], ['DELETE', `${JOBS}/job_${'0'.repeat(32)}`]] as const) {
      const res = await fetch(`${p.urls.ai}${path}`, { method, headers: { 'x-operation-id': op(), 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : undefined });
      expect([method, path, res.status, ((await res.json()) as any).error.code]).toEqual([method, path, 401, 'missing_credentials']);
    }
    expect(codeOf(await call({ ...none, key: 'sk_wrong' }, 'GET', JOBS))).toEqual([401, 'invalid_credentials']);
  });

  it('a key of an application without `knowledge`: 403 capability_not_enabled, before the operation id and the body', async () => {
    const noCap = await appKey('chat-only', ['ai.chat']);
    expect(codeOf(await call(noCap, 'POST', JOBS, { nonsense: true }, { 'x-operation-id': '' }))).toEqual([403, 'capability_not_enabled']);
    expect(codeOf(await post(noCap, JOBS, { upload_id: wav, max_price_usd: '1' }))).toEqual([403, 'capability_not_enabled']);
    expect(codeOf(await call(noCap, 'GET', JOBS))).toEqual([403, 'capability_not_enabled']);
    expect(codeOf(await call(noCap, 'GET', `${JOBS}/job_${'0'.repeat(32)}`))).toEqual([403, 'capability_not_enabled']);
    expect(codeOf(await call(noCap, 'DELETE', `${JOBS}/job_${'0'.repeat(32)}`))).toEqual([403, 'capability_not_enabled']);
  });

  it('knowledge switched off (admin CLI): 403 knowledge_disabled on all four routes, before the operation id and the body; collections still work; on again', async () => {
    const col = await post(a, '/v1/collections', { mode: 'download', name: 'kept' });
    expect(col.status, col.text).toBe(201);
    await adminAsyncOk(p.dataDir, 'org', 'features', '--org', org, '--disable', 'knowledge');
    try {
      const before = upstreamCalls();
      // No operation id, and a body that is not even JSON.
      const noId = await postBytes(`${p.urls.ai}${JOBS}`, '{not json', { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' });
      expect(codeOf(noId)).toEqual([403, 'knowledge_disabled']);
      expect(codeOf(await post(a, JOBS, { upload_id: wav, max_price_usd: 'lots', surprise: 1 }))).toEqual([403, 'knowledge_disabled']);
      expect(codeOf(await post(a, JOBS, { upload_id: wav, max_price_usd: '5' }))).toEqual([403, 'knowledge_disabled']);
      expect(codeOf(await call(a, 'GET', JOBS))).toEqual([403, 'knowledge_disabled']);
      expect(codeOf(await call(a, 'GET', `${JOBS}/job_${'0'.repeat(32)}`))).toEqual([403, 'knowledge_disabled']);
      expect(codeOf(await call(a, 'DELETE', `${JOBS}/not-an-id`, undefined, { 'x-operation-id': '' }))).toEqual([403, 'knowledge_disabled']);
      // The organization's data is kept and its collections still answer.
      const got = await call(a, 'GET', `/v1/collections/${col.body.id}`);
      expect([got.status, got.body.name]).toEqual([200, 'kept']);
      expect((await call(a, 'GET', '/v1/collections')).status).toBe(200);
      expect(upstreamCalls()).toBe(before);
    } finally {
      await adminAsyncOk(p.dataDir, 'org', 'features', '--org', org, '--enable', 'knowledge');
    }
    expect((await call(a, 'GET', JOBS)).status).toBe(200);
  });
});

describe('the operation id', () => {
  it('missing: 400 missing_operation_id; malformed: 400 invalid_operation_id (before the body)', async () => {
    const body = JSON.stringify({ upload_id: wav, max_price_usd: '5', unknown: true });
    const headers = { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' };
    expect(codeOf(await postBytes(`${p.urls.ai}${JOBS}`, body, headers))).toEqual([400, 'missing_operation_id']);
    for (const bad of ['short', 'has spaces in it', 'x'.repeat(129), 'semi;colon-12345']) {
      expect([bad, ...codeOf(await postBytes(`${p.urls.ai}${JOBS}`, body, { ...headers, 'x-operation-id': bad }))]).toEqual([bad, 400, 'invalid_operation_id']);
    }
    expect(codeOf(await sendBytes('DELETE', `${p.urls.ai}${JOBS}/job_${'0'.repeat(32)}`, undefined, { authorization: `Bearer ${a.key}` }))).toEqual([400, 'missing_operation_id']);
  });

  it('the same id and body: the kept answer replayed, one job; the same id with another body: 409 operation_id_reused', async () => {
    const id = op();
    const body = { upload_id: wav, max_price_usd: '5', transcript: TRANSCRIPT, power: 'light' };
    const first = await post(a, JOBS, body, id);
    expect(first.status, first.text).toBe(202);
    expect(first.headers['x-idempotent-replay']).toBeUndefined();
    const again = await post(a, JOBS, body, id);
    expect([again.status, again.headers['x-idempotent-replay']]).toEqual([202, 'true']);
    expect(again.body).toEqual(first.body);
    expect(codeOf(await post(a, JOBS, { ...body, power: 'medium' }, id))).toEqual([409, 'operation_id_reused']);
    const all = (await call(a, 'GET', `${JOBS}?limit=100`)).body.data.filter((j: any) => j.job_id === first.body.job_id);
    expect(all).toHaveLength(1);
    const job = await settled(a, first.body.job_id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    // A given transcript: nothing was transcribed.
    expect(transcriber.requests.length).toBe(0);
  });
});

describe('the body (every field of the 4.8 table)', () => {
  const base = () => ({ upload_id: wav, max_price_usd: '5' });

  async function refused(body: unknown, expected: [number, string, string | undefined], note = JSON.stringify(body).slice(0, 80)) {
    const r = await postBytes(`${p.urls.ai}${JOBS}`, JSON.stringify(body), { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', 'x-operation-id': op() });
    expect([note, ...errorOf(r)], r.text).toEqual([note, ...expected]);
  }

  it('not an object, unknown fields (also inside references): 400', async () => {
    for (const body of [[], 'x', 42, null, true]) {
      const r = await postBytes(`${p.urls.ai}${JOBS}`, JSON.stringify(body), { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', 'x-operation-id': op() });
      expect([JSON.stringify(body), ...codeOf(r)]).toEqual([JSON.stringify(body), 400, 'invalid_body']);
    }
    await refused({ ...base(), colour: 'red' }, [400, 'unsupported_field', 'colour']);
    await refused({ ...base(), references: { x: 'y' } }, [400, 'unsupported_field', 'references.x']);
    await refused({ ...base(), adaptive_evidence_extraction: { enabled: true, strength: 2 } }, [400, 'unsupported_field', 'adaptive_evidence_extraction.strength']);
  });

  it('upload_id and max_price_usd are required', async () => {
    await refused({ max_price_usd: '5' }, [400, 'invalid_body', 'upload_id']);
    await refused({ upload_id: wav }, [400, 'invalid_body', 'max_price_usd']);
    await refused({ upload_id: '', max_price_usd: '5' }, [400, 'invalid_body', 'upload_id']);
    await refused({ upload_id: 7, max_price_usd: '5' }, [400, 'invalid_body', 'upload_id']);
  });

  it('max_price_usd: a decimal string of up to 6 + 6 digits, over zero', async () => {
    for (const price of [5, 2.5, '1e3', '0', '0.0000001', '-1', '1234567', '0.000000', '', ' 1', '1.', '.5', '0x10', 'NaN', 'Infinity', '1,5']) {
      await refused({ ...base(), max_price_usd: price }, [400, 'invalid_body', 'max_price_usd'], `max_price_usd ${JSON.stringify(price)}`);
    }
  });

  it('power, max_pointers, keep_source_hours, languages, adaptive switches', async () => {
    const cases: [object, string][] = [
      [{ power: 'extreme' }, 'power'],
      [{ power: 'MAX' }, 'power'],
      [{ power: null }, 'power'],
      [{ max_pointers: 0 }, 'max_pointers'],
      [{ max_pointers: 51 }, 'max_pointers'],
      [{ max_pointers: 1.5 }, 'max_pointers'],
      [{ max_pointers: '10' }, 'max_pointers'],
      [{ keep_source_hours: 0 }, 'keep_source_hours'],
      [{ keep_source_hours: 169 }, 'keep_source_hours'],
      [{ keep_source_hours: 2.5 }, 'keep_source_hours'],
      [{ spoken_language: 'english please' }, 'spoken_language'],
      [{ spoken_language: 'e' }, 'spoken_language'],
      [{ spoken_language: '' }, 'spoken_language'],
      [{ spoken_language: 'en_US' }, 'spoken_language'],
      [{ output_language: 'de-' }, 'output_language'],
      [{ output_language: 'x'.repeat(70) }, 'output_language'],
      [{ output_language: 42 }, 'output_language'],
      [{ adaptive_evidence_reconciliation: true }, 'adaptive_evidence_reconciliation'],
      [{ adaptive_evidence_reconciliation: {} }, 'adaptive_evidence_reconciliation.enabled'],
      [{ adaptive_evidence_reconciliation: { enabled: 'false' } }, 'adaptive_evidence_reconciliation.enabled'],
      [{ adaptive_evidence_extraction: { enabled: null } }, 'adaptive_evidence_extraction.enabled'],
      [{ adaptive_evidence_extraction: [] }, 'adaptive_evidence_extraction'],
      [{ references: 'upl' }, 'references'],
      [{ references: { transcript: 5 } }, 'references.transcript'],
      [{ references: { notes: '' } }, 'references.notes'],
      [{ transcript: 5 }, 'transcript'],
      [{ notes: ['a'] }, 'notes'],
    ];
    for (const [extra, param] of cases) await refused({ ...base(), ...extra }, [400, 'invalid_body', param]);
  });

  it('texts: a lone surrogate, inline and referenced together: 400 invalid_body', async () => {
    await refused({ ...base(), transcript: 'we agreed \ud800 on it' }, [400, 'invalid_body', 'transcript']);
    await refused({ ...base(), notes: '\udfff' }, [400, 'invalid_body', 'notes']);
    await refused({ ...base(), transcript: TRANSCRIPT, references: { transcript: transcriptUpload } }, [400, 'invalid_body', 'transcript']);
    await refused({ ...base(), notes: 'n', references: { notes: transcriptUpload } }, [400, 'invalid_body', 'notes']);
  });

  it('a body over 10 MiB: 413 request_too_large', async () => {
    const r = await post(a, JOBS, { ...base(), transcript: 'word '.repeat((10 * MIB) / 5 + 10) });
    expect(codeOf(r)).toEqual([413, 'request_too_large']);
  });
});

describe('uploads', () => {
  const before = { calls: 0 };
  const start = (body: object) => post(a, JOBS, { max_price_usd: '5', ...body });

  it('unknown, incomplete: 404 upload_not_found / 409 upload_incomplete naming the field, for the recording and each reference', async () => {
    before.calls = upstreamCalls();
    expect(errorOf(await start({ upload_id: 'no-such-upload-0001' }))).toEqual([404, 'upload_not_found', 'upload_id']);
    expect(errorOf(await start({ upload_id: incomplete }))).toEqual([409, 'upload_incomplete', 'upload_id']);
    expect(errorOf(await start({ upload_id: wav, references: { transcript: 'no-such-upload-0002' } }))).toEqual([404, 'upload_not_found', 'references.transcript']);
    expect(errorOf(await start({ upload_id: wav, references: { transcript: incomplete } }))).toEqual([409, 'upload_incomplete', 'references.transcript']);
    expect(errorOf(await start({ upload_id: wav, references: { notes: 'no-such-upload-0003' } }))).toEqual([404, 'upload_not_found', 'references.notes']);
    expect(errorOf(await start({ upload_id: wav, references: { notes: incomplete } }))).toEqual([409, 'upload_incomplete', 'references.notes']);
    // The recording is checked before the references.
    expect(errorOf(await start({ upload_id: incomplete, references: { transcript: 'no-such-upload-0002' } }))).toEqual([409, 'upload_incomplete', 'upload_id']);
    expect(upstreamCalls()).toBe(before.calls);
  });

  it('a referenced upload over 16 MiB: 400 invalid_body naming references.transcript (references.notes)', async () => {
    const r = await start({ upload_id: wav, references: { transcript: oversized } });
    expect(errorOf(r)).toEqual([400, 'invalid_body', 'references.transcript']);
    expect(r.body.error.message).toContain('16 MiB');
    expect(errorOf(await start({ upload_id: wav, references: { notes: oversized } }))).toEqual([400, 'invalid_body', 'references.notes']);
  });

  it("another organization's upload: 404, as the recording and as a reference", async () => {
    expect(errorOf(await start({ upload_id: bUpload }))).toEqual([404, 'upload_not_found', 'upload_id']);
    expect(errorOf(await start({ upload_id: wav, references: { transcript: bUpload } }))).toEqual([404, 'upload_not_found', 'references.transcript']);
    // And B cannot use A's.
    expect(errorOf(await post(b, JOBS, { upload_id: wav, max_price_usd: '5' }))).toEqual([404, 'upload_not_found', 'upload_id']);
  });

  it('a file ffprobe cannot read: 400 invalid_body naming upload_id', async () => {
    const r = await start({ upload_id: textUpload, transcript: TRANSCRIPT });
    expect(errorOf(r), r.text).toEqual([400, 'invalid_body', 'upload_id']);
  });

  it('a recording without audio: 400 invalid_body without a transcript, accepted with one', async () => {
    expect(errorOf(await start({ upload_id: mute }))).toEqual([400, 'invalid_body', 'upload_id']);
    expect(upstreamCalls()).toBe(before.calls);
    const ok = await start({ upload_id: mute, power: 'light', references: { transcript: transcriptUpload } });
    expect(ok.status, ok.text).toBe(202);
    const job = await settled(a, ok.body.job_id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    expect(job.progress.pieces_total).toBe(0);
  });
});

describe('the price, before any upstream call', () => {
  const start = (c: Client, body: object = {}) => post(c, JOBS, { upload_id: wav, max_price_usd: '5', ...body });
  const settings = () => new AiOrgSettings(p.engine.kv, now);
  let estimate: number;

  beforeAll(async () => {
    estimate = await wavEstimateMicro();
    expect(estimate).toBeGreaterThan(10_000);
  });

  /** The refusal's dollars, as a number. */
  const named = (r: { body: any }) => Number(/estimated at \$([\d.]+)/.exec(r.body?.error?.message ?? '')?.[1]);

  it('max_price_usd over the organization cap (admin CLI): 403 budget_exceeded', async () => {
    await adminAsyncOk(p.dataDir, 'org', 'limits', '--org', org, '--knowledge-job-cap-usd', '1');
    try {
      const calls = upstreamCalls();
      const r = await start(a, { max_price_usd: '1.000001' });
      expect(errorOf(r)).toEqual([403, 'budget_exceeded', 'max_price_usd']);
      expect(r.body.error.message).toContain('cap');
      expect(upstreamCalls()).toBe(calls);
    } finally {
      await settings().setLimits(org, { knowledge_job_cap_usd: null });
    }
  });

  it('the estimate over max_price_usd (0.000001 is a valid price): 403 budget_exceeded naming the estimate', async () => {
    const calls = upstreamCalls();
    for (const price of ['0.000001', ((estimate - 1) / 1e6).toFixed(6)]) {
      const r = await start(a, { max_price_usd: price });
      expect(errorOf(r), r.text).toEqual([403, 'budget_exceeded', 'max_price_usd']);
      expect(named(r)).toBeCloseTo(estimate / 1e6, 6);
    }
    expect(upstreamCalls()).toBe(calls);
  });

  it("over what is left of the organization's budget, or of the key's: 403 budget_exceeded naming the estimate", async () => {
    const calls = upstreamCalls();
    await settings().setLimits(org, { budget_usd: (estimate - 1) / 1e6 });
    try {
      const r = await start(a);
      expect(errorOf(r), r.text).toEqual([403, 'budget_exceeded', 'max_price_usd']);
      expect(named(r)).toBeCloseTo(estimate / 1e6, 6);
      expect(r.body.error.message).toMatch(/organization's AI budget/);
    } finally {
      await settings().setLimits(org, { budget_usd: null });
    }
    const k = await orgKey();
    await new AiKeyLimits(p.engine.kv, now).set(k.id, { budget_usd: (estimate - 1) / 1e6 });
    const r = await start(k);
    expect(errorOf(r), r.text).toEqual([403, 'budget_exceeded', 'max_price_usd']);
    expect(named(r)).toBeCloseTo(estimate / 1e6, 6);
    expect(r.body.error.message).toMatch(/key's AI budget/);
    expect(upstreamCalls()).toBe(calls);
    // Nothing is left held by the refusals.
    expect((await budgetState(p.engine.kv, keyScope(k.id), now())).held_usd).toBe(0);
  });

  it('an accepted job holds its estimate against the budget while it runs and gives the rest back when it ends', async () => {
    const k = await orgKey();
    await new AiKeyLimits(p.engine.kv, now).set(k.id, { budget_usd: 10 });
    chat.behavior.delayMs = 300;
    try {
      const r = await start(k);
      expect(r.status, r.text).toBe(202);
      const state = await budgetState(p.engine.kv, keyScope(k.id), now());
      // What is spent comes off the hold: together they are the estimate while the job runs.
      expect(state.held_usd).toBeGreaterThan(0);
      expect(state.held_usd + state.spent_usd).toBeCloseTo(estimate / 1e6, 6);
      const view = (await call(k, 'GET', `${JOBS}/${r.body.job_id}`)).body;
      expect(Number(view.estimate_usd)).toBeCloseTo(estimate / 1e6, 6);
      const job = await settled(k, r.body.job_id);
      expect(job.status, JSON.stringify(job)).toBe('completed');
      expect(transcriber.requests.length).toBeGreaterThan(0);
      const after = await budgetState(p.engine.kv, keyScope(k.id), now());
      expect(after.held_usd).toBeCloseTo(0, 9);
      expect(after.spent_usd).toBeCloseTo(Number(job.spent_usd), 6);
      expect(Number(job.spent_usd)).toBeGreaterThan(0);
      expect(Number(job.spent_usd)).toBeLessThanOrEqual(Number(job.estimate_usd));
    } finally {
      chat.behavior.delayMs = 0;
    }
  });
});

describe('read, list and cancel', () => {
  let finished: string;

  it('get: a malformed or unknown id, and another application\'s job: 404 job_not_found', async () => {
    const list = (await call(a, 'GET', `${JOBS}?limit=1`)).body;
    finished = list.data[0].job_id;
    for (const bad of ['nothing', `job_${'0'.repeat(32)}`, `job_${'A'.repeat(32)}`, finished.toUpperCase(), `${finished}0`, '..%2F..%2Fx']) {
      expect([bad, ...errorOf(await call(a, 'GET', `${JOBS}/${bad}`))]).toEqual([bad, 404, 'job_not_found', 'job_id']);
      expect([bad, ...codeOf(await call(a, 'DELETE', `${JOBS}/${bad}`))]).toEqual([bad, 404, 'job_not_found']);
    }
    const other = await appKey('knowledge-app', ['knowledge']);
    expect(codeOf(await call(other, 'GET', `${JOBS}/${finished}`))).toEqual([404, 'job_not_found']);
    expect(codeOf(await call(other, 'DELETE', `${JOBS}/${finished}`))).toEqual([404, 'job_not_found']);
    expect((await call(other, 'GET', JOBS)).body.data).toEqual([]);
  });

  it('list: newest first, a page at a time with the sealed cursor; a crafted cursor 400 invalid_cursor; limit 0 or 101 400 invalid_field', async () => {
    const whole = (await call(a, 'GET', `${JOBS}?limit=100`)).body;
    expect(whole.data.length).toBeGreaterThanOrEqual(3);
    expect(whole.next_cursor).toBeNull();
    const ids = whole.data.map((j: any) => j.job_id);
    expect([...ids].sort().reverse()).toEqual(ids);
    const created = whole.data.map((j: any) => j.created_at);
    expect([...created].sort().reverse()).toEqual(created);
    const paged: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = (await call(a, 'GET', `${JOBS}?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).body;
      expect(page.data.length).toBeLessThanOrEqual(1);
      paged.push(...page.data.map((j: any) => j.job_id));
      cursor = page.next_cursor;
    } while (cursor && paged.length <= ids.length);
    expect(paged).toEqual(ids);

    const first = (await call(a, 'GET', `${JOBS}?limit=1`)).body.next_cursor as string;
    const flipped = first.slice(0, -2) + (first.endsWith('A') ? 'B' : 'A') + first.slice(-1);
    for (const bad of ['abc', flipped, Buffer.from('{"pk":"x"}').toString('base64url')]) {
      expect([bad, ...errorOf(await call(a, 'GET', `${JOBS}?cursor=${encodeURIComponent(bad)}`))]).toEqual([bad, 400, 'invalid_cursor', 'cursor']);
    }
    // Sealed to A's organization and application.
    expect(codeOf(await call(b, 'GET', `${JOBS}?cursor=${encodeURIComponent(first)}`))).toEqual([400, 'invalid_cursor']);
    for (const limit of ['0', '101', '-1', '1.5', 'ten']) {
      expect([limit, ...errorOf(await call(a, 'GET', `${JOBS}?limit=${limit}`))]).toEqual([limit, 400, 'invalid_field', 'limit']);
    }
    expect(codeOf(await call(a, 'GET', `${JOBS}?status=running`))).toEqual([400, 'unsupported_field']);
  });

  it('cancel of a finished job: 409 job_finished', async () => {
    const r = await call(a, 'DELETE', `${JOBS}/${finished}`);
    expect(errorOf(r)).toEqual([409, 'job_finished', 'job_id']);
  });

  it('cancel of a running job: 200 cancelled, what was paid stays paid, no call after it, the holds given back; replayed for its operation id', async () => {
    const k = await orgKey();
    await new AiKeyLimits(p.engine.kv, now).set(k.id, { budget_usd: 50 });
    // A transcript of several extraction windows, each call 3 s: the job is mid-extraction when cancelled.
    const long = Array.from({ length: 1500 }, (_, i) => `[00:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}] Point ${i} of the plan is agreed by the whole team today.`).join('\n');
    chat.behavior.delayMs = 3000;
    try {
      const callsBefore = chat.requests.length;
      const r = await post(k, JOBS, { upload_id: wav, max_price_usd: '50', transcript: long });
      expect(r.status, r.text).toBe(202);
      await waitFor('the first extraction call', () => chat.requests.length > callsBefore, 10_000);
      const cancelId = op();
      const cancelled = await call(k, 'DELETE', `${JOBS}/${r.body.job_id}`, undefined, { 'x-operation-id': cancelId });
      expect(cancelled.status, cancelled.text).toBe(200);
      expect(cancelled.body.status).toBe('cancelled');
      const callsAtCancel = chat.requests.length;
      expect(callsAtCancel - callsBefore).toBe(1);
      const replay = await call(k, 'DELETE', `${JOBS}/${r.body.job_id}`, undefined, { 'x-operation-id': cancelId });
      expect([replay.status, replay.headers.get('x-idempotent-replay')]).toEqual([200, 'true']);
      expect(replay.body).toEqual(cancelled.body);
      expect(codeOf(await call(k, 'DELETE', `${JOBS}/${r.body.job_id}`))).toEqual([409, 'job_finished']);

      // The call in flight ends and is paid; none follows it.
      await new Promise((resolve) => setTimeout(resolve, 4_500));
      expect(chat.requests.length).toBe(callsAtCancel);
      const job = (await call(k, 'GET', `${JOBS}/${r.body.job_id}`)).body;
      expect(job.status).toBe('cancelled');
      expect(Number(job.spent_usd)).toBeCloseTo(CHAT_CALL_USD * (callsAtCancel - callsBefore), 6);
      const state = await budgetState(p.engine.kv, keyScope(k.id), now());
      expect(state.spent_usd).toBeCloseTo(Number(job.spent_usd), 6);
      expect(state.held_usd).toBeCloseTo(0, 9);
    } finally {
      chat.behavior.delayMs = 0;
    }
  }, 30_000);
});

describe('two organizations', () => {
  it("B cannot read or cancel A's job, and B's list does not hold it", async () => {
    const jobs = (await call(a, 'GET', `${JOBS}?limit=100`)).body.data as any[];
    expect(jobs.length).toBeGreaterThan(0);
    for (const j of jobs) {
      expect(codeOf(await call(b, 'GET', `${JOBS}/${j.job_id}`))).toEqual([404, 'job_not_found']);
      expect(codeOf(await call(b, 'DELETE', `${JOBS}/${j.job_id}`))).toEqual([404, 'job_not_found']);
    }
    const listed = await call(b, 'GET', `${JOBS}?limit=100`);
    expect([listed.status, listed.body.data]).toEqual([200, []]);
  });
});
