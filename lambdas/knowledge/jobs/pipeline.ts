/**
 * The steps of a knowledge job (docs/ai/knowledge-jobs.md, "Steps"):
 * `probe → transcribe → extract → reconcile → frames → publish`, one at a time, each a message on the
 * `knowledge-jobs` queue, and each transcription piece a message of its own (several at once).
 *
 * Crash safety: a step's processor claims the job under a lease (its `attempt` moves on), renews it
 * while it works, and stores every paid call's result before the next (the memo, a blob per call), so
 * a step run again after a crash pays for no finished call twice. A processor that dies leaves a lease
 * entry (`kjobsweep`); the jobs sweep sends the step again once it is due. A step stops starting new
 * work past its time budget (the setting `knowledgeJobStepBudgetMs`), and sends itself again: no run
 * nears the consumer's 15 minutes. A transient upstream failure is tried again after a pause, a few
 * times; the job's own faults (price limit, unreadable recording, no route) end it `failed`.
 */
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvWrite } from '../../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../../engine/errors.js';
import { chatCompletion, transcription } from '../../ai/gateway.js';
import { IMAGE_TOKENS_BOUND } from '../../ai/estimate.js';
import { ModelRoutes, type ModelRoute } from '../../ai/model-routes.js';
import { PlatformError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import { keepRenewing } from '../../shared/leases.js';
import { settings } from '../../shared/settings.js';
import { countTokens } from '../chunks.js';
import { extractEntries } from './entries.js';
import { checkEvidence, indexTranscript } from './evidence.js';
import { jobBlobKey, jobKey, jobLeaseKey, JOB_SWEEP_PARTITION, leasesDueBefore } from './job-keys.js';
import { captureFrames, cutAudio } from './media.js';
import { openMedia } from './media-input.js';
import { publishJob } from './publish.js';
import { asJob, FINISHED, STEPS, type Job, type JobErrorCode, type Step } from './records.js';
import { supportCheck } from './reconcile.js';
import { closeJobSpend, jobBudget, PriceLimitReached, releaseEstimateHolds } from './spend.js';
import { parseTranscript } from './transcript.js';
import { readBytes, readJson, readText, writeJson } from '../blob-reads.js';
import type { Entry, JobChat, StepMemo, TimedSegment } from './types.js';
import { JobFailed, type StepContext } from './step.js';
import type { Frame } from './media.js';

export { JobFailed } from './step.js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const JOBS_QUEUE = 'knowledge-jobs';
/**
 * A step's processor holds the job this long, renewed every third of it while it works: 60 s, or
 * KNOWLEDGE_LEASE_S when that is lower (a development setting, lowered to try crash recovery without
 * waiting a minute for a dead processor's lease to lapse).
 */
export const stepLeaseSeconds = () => Math.min(60, settings().knowledgeLeaseSeconds);
/** Pieces of at most 10 minutes of audio (OpenAI's 25 MB a file is far: 2.4 MB at 32 kbit/s). */
export const PIECE_SECONDS = 600;
/** A step (or a piece) stopped this many times without finishing fails the job. */
export const MAX_ATTEMPTS = 4;
/** Transient failures of a step's calls tried again after a pause, this many times in all. */
export const MAX_RETRIES = 3;
/** A finished job's record is kept this long. */
const FINISHED_SECONDS = 30 * 24 * 3600;

export interface JobMessage {
  org: string;
  app: string;
  job: string;
  step: Step | 'piece';
  piece?: number;
}

/** What happens around a finished job (the platform event, bound by the consumer layer). */
export interface JobEvents {
  finished(job: Job): Promise<void>;
}

export function parseJobMessage(body: string): JobMessage | undefined {
  try {
    const m = JSON.parse(body) as JobMessage;
    if (![m.org, m.app, m.job, m.step].every((v) => typeof v === 'string')) return undefined;
    if (m.step !== 'piece' && !(STEPS as readonly string[]).includes(m.step)) return undefined;
    if (m.step === 'piece' && !Number.isSafeInteger(m.piece)) return undefined;
    return m;
  } catch {
    return undefined;
  }
}

const queuedListeners = new Set<() => void>();
/** Calls `listener` when this process sends a job message to run now (a hint to the local receiver). */
export function onJobQueued(listener: () => void): () => void {
  queuedListeners.add(listener);
  return () => queuedListeners.delete(listener);
}

/** Grouped by organization: receivers take organizations in turn. */
export async function sendStep(engine: Engine, message: JobMessage, delaySeconds = 0): Promise<void> {
  await engine.queue.send(JOBS_QUEUE, JSON.stringify(message), { group: message.org, ...(delaySeconds ? { delaySeconds: Math.min(900, delaySeconds) } : {}) });
  if (!delaySeconds) for (const listener of queuedListeners) listener();
}

/**
 * The seconds until the job's next step is expected to be done, for `poll_after_seconds`: what its
 * calls take (a piece's transcription, a window's extraction: each some 10 to 60 s), at least 1.
 */
export function expectedStepSeconds(job: Pick<Job, 'probed' | 'request'>, step: Step): number {
  const minutes = job.probed.duration_s / 60;
  switch (step) {
    case 'probe':
      return 2;
    case 'transcribe':
      return job.request.transcript_given ? 1 : Math.ceil(Math.min(PIECE_SECONDS, job.probed.duration_s) / 20) + 5;
    case 'extract':
      return Math.ceil(10 + minutes / 2);
    case 'reconcile':
      return job.request.reconcile ? 15 : 1;
    case 'frames':
      return job.probed.video && job.request.frames ? 5 + job.request.max_pointers : 1;
    case 'publish':
      return 10;
  }
}

const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);
const iso = (engine: Engine) => new Date(engine.clock.now()).toISOString();
const keyOf = (m: Pick<JobMessage, 'org' | 'app' | 'job'>) => jobKey(m.org, m.app, m.job);

/** The step's time budget ran out: it stores what it has and runs again. */
class TimeUp extends Error {}

/** What a step ended with: the next step (and fields to set), the same step again, or waiting for its pieces. */
type StepOutcome = { next: Step | 'done'; set?: Partial<Job> } | { again: true } | { wait: true };

/** Runs one message of the queue. Throws only when the store fails (the message then comes back). */
export async function runJobMessage(engine: Engine, message: JobMessage, events?: JobEvents): Promise<void> {
  try {
    if (message.step === 'piece') return await runPiece(engine, message, events);
    return await runStep(engine, message, events);
  } finally {
    await removeScratchIfEnded(engine, message);
  }
}

/**
 * A job ended under its step or piece (a cancel, a piece's failure) while a call was in flight: what
 * that call's result stored after the end's own cleanup (a memo, a step's result, audio pieces) is
 * removed here, by the last writer, so a cancelled job leaves none of its texts behind.
 */
async function removeScratchIfEnded(engine: Engine, message: JobMessage): Promise<void> {
  const record = await engine.kv.get(keyOf(message)).catch(() => undefined);
  if (!record || !FINISHED.has(asJob(record).status)) return;
  await removeScratch(engine, asJob(record)).catch((error) => log.warn('job files not removed', { job: message.job, error: String(error) }));
}

// ---------- steps ----------

async function runStep(engine: Engine, message: JobMessage, events?: JobEvents): Promise<void> {
  const key = keyOf(message);
  const record = await engine.kv.get(key);
  if (!record) return;
  let job = asJob(record);
  if (FINISHED.has(job.status) || job.step !== message.step) return;
  const now = nowSeconds(engine);
  if (job.lease_until > now) return; // another processor runs it; its lease entry brings it back if it dies

  // The claim: one processor at a time, by the attempt it read.
  const lease = jobLeaseKey(now + stepLeaseSeconds(), job.org, job.app, job.job_id);
  const claim = { status: 'running' as const, attempt: job.attempt + 1, lease_until: now + stepLeaseSeconds(), lease_sk: lease.sk, updated_at: iso(engine) };
  const writes: KvWrite[] = [{ update: key, set: claim, condition: { ifEquals: { step: job.step, attempt: job.attempt, status: job.status } } }, { put: { ...lease } }];
  if (job.lease_sk) writes.push({ delete: { pk: JOB_SWEEP_PARTITION, sk: job.lease_sk } });
  try {
    await engine.kv.transact(writes);
  } catch (error) {
    if (error instanceof TransactionCanceledError) return; // taken, cancelled or moved on meanwhile
    throw error;
  }
  job = { ...job, ...claim };
  if (job.attempt > MAX_ATTEMPTS) {
    return finish(engine, job, { failed: 'internal_error', message: `The ${job.step} step stopped ${MAX_ATTEMPTS} times before it finished.` }, events);
  }

  const heartbeat = keepLease(engine, job);
  const started = Date.now();
  const context = stepContext(engine, job, heartbeat.signal, started);
  let outcome: StepOutcome;
  try {
    outcome = await STEP_RUNS[job.step](context);
  } catch (error) {
    heartbeat.stop();
    if (heartbeat.lost) return; // cancelled or taken over: the state is someone else's now
    if (error instanceof TimeUp) outcome = { again: true };
    else if (error instanceof PriceLimitReached) return finish(engine, job, { failed: 'price_limit', message: error.message }, events);
    else if (error instanceof JobFailed) return finish(engine, job, { failed: error.code, message: error.message }, events);
    else if (isTransient(error) && job.attempt < MAX_RETRIES) {
      log.warn('knowledge job step failed; tried again later', { job: job.job_id, step: job.step, attempt: job.attempt, error: String(error) });
      return release(engine, job, 5 * 2 ** job.attempt);
    } else if (error instanceof PlatformError) {
      return finish(engine, job, { failed: 'upstream_error', message: `${error.message} (after ${job.attempt} attempts)` }, events);
    } else throw error;
  }
  heartbeat.stop();
  if ('again' in outcome) return release(engine, job, 0, { attempt: 0 });
  if ('wait' in outcome) return; // the pieces hold the job's lease now, and send this step again when done
  if (outcome.next === 'done') return finish(engine, { ...job, ...outcome.set }, 'completed', events);
  await advance(engine, job, outcome.next, outcome.set ?? {});
}

const isTransient = (error: unknown) => error instanceof PlatformError && (error.status === 429 || error.status >= 500);

/** Renews the job's lease while a step runs; `lost` once the job moved on without it (cancelled, taken over). */
const keepLease = (engine: Engine, job: Job) =>
  keepRenewing(engine.kv, {
    key: keyOf({ org: job.org, app: job.app, job: job.job_id }),
    set: () => ({ lease_until: nowSeconds(engine) + stepLeaseSeconds() }),
    condition: { ifEquals: { status: 'running', step: job.step, attempt: job.attempt } },
    everyMs: (stepLeaseSeconds() * 1000) / 3,
    why: 'the job was cancelled or taken over',
  });

/** The lease entry the sweep finds when the job's processor is gone: due a lease after `now`. */
function leaseWrites(engine: Engine, job: Job, dueAt: number): { writes: KvWrite[]; sk: string } {
  const lease = jobLeaseKey(dueAt, job.org, job.app, job.job_id);
  const writes: KvWrite[] = [{ put: { ...lease } }];
  if (job.lease_sk) writes.push({ delete: { pk: JOB_SWEEP_PARTITION, sk: job.lease_sk } });
  return { writes, sk: lease.sk };
}

/** The step is done: the next one is the job's step, sent now. */
async function advance(engine: Engine, job: Job, next: Step, set: Partial<Job>): Promise<void> {
  const skipped = STEPS.indexOf(next) - STEPS.indexOf(job.step);
  const { writes, sk } = leaseWrites(engine, job, nowSeconds(engine) + stepLeaseSeconds());
  try {
    await engine.kv.transact([
      { update: keyOf({ org: job.org, app: job.app, job: job.job_id }), set: { ...set, step: next, steps_done: job.steps_done + skipped, attempt: 0, lease_until: 0, lease_sk: sk, updated_at: iso(engine) } as never, condition: { ifEquals: { status: 'running', step: job.step, attempt: job.attempt } } },
      ...writes,
    ]);
  } catch (error) {
    if (error instanceof TransactionCanceledError) return; // cancelled meanwhile
    throw error;
  }
  await sendStep(engine, { org: job.org, app: job.app, job: job.job_id, step: next });
}

/** The step runs again after `delaySeconds`, from where its memo is. */
async function release(engine: Engine, job: Job, delaySeconds: number, set: Partial<Job> = {}): Promise<void> {
  const { writes, sk } = leaseWrites(engine, job, nowSeconds(engine) + delaySeconds + stepLeaseSeconds());
  try {
    await engine.kv.transact([
      { update: keyOf({ org: job.org, app: job.app, job: job.job_id }), set: { ...set, lease_until: 0, lease_sk: sk, updated_at: iso(engine) } as never, condition: { ifEquals: { status: 'running', step: job.step, attempt: job.attempt } } },
      ...writes,
    ]);
  } catch (error) {
    if (error instanceof TransactionCanceledError) return;
    throw error;
  }
  await sendStep(engine, { org: job.org, app: job.app, job: job.job_id, step: job.step }, delaySeconds);
}

/**
 * Ends the job (`completed`, or `failed` with its reason) if it is still running as read: gives back
 * what is left of the estimate's holds, removes the job's scratch files, and publishes its platform
 * event. A cancel that came first wins.
 */
async function finish(engine: Engine, job: Job, outcome: 'completed' | { failed: JobErrorCode; message: string }, events?: JobEvents): Promise<void> {
  const done = outcome === 'completed';
  const set = {
    ...(done ? { status: 'completed', steps_done: STEPS.length, entries: job.entries, entries_dropped: job.entries_dropped, frames: job.frames, summary: job.summary, collection_id: job.collection_id } : { status: 'failed', error_code: outcome.failed, error_message: outcome.message.slice(0, 1000) }),
    lease_until: 0,
    lease_sk: null,
    event_pending: true,
    updated_at: iso(engine),
    expires_at: nowSeconds(engine) + FINISHED_SECONDS,
  };
  const writes: KvWrite[] = [
    { update: keyOf({ org: job.org, app: job.app, job: job.job_id }), set: set as never, condition: { ifEquals: { status: 'running', attempt: job.attempt } } },
    // Found by the sweep if this process dies before the event is out.
    { put: { pk: PENDING_EVENTS, sk: `${job.org}#${job.app}#${job.job_id}`, expires_at: nowSeconds(engine) + FINISHED_SECONDS } },
  ];
  if (job.lease_sk) writes.push({ delete: { pk: JOB_SWEEP_PARTITION, sk: job.lease_sk } });
  try {
    await engine.kv.transact(writes);
  } catch (error) {
    if (error instanceof TransactionCanceledError) return;
    throw error;
  }
  await afterFinish(engine, { ...job, ...(set as Partial<Job>) }, events);
}

/** What follows any end (a cancel's too): holds given back, scratch files removed, the event published. */
export async function afterFinish(engine: Engine, job: Job, events?: JobEvents): Promise<void> {
  await releaseEstimateHolds(engine, job.budget_holds, await closeJobSpend(engine, job)).catch((error) => log.warn('job holds not given back; they lapse', { job: job.job_id, error: String(error) }));
  await removeScratch(engine, job).catch((error) => log.warn('job files not removed', { job: job.job_id, error: String(error) }));
  if (events && job.status !== 'cancelled') await events.finished(job).catch((error) => log.warn('job event not published; the sweep publishes it', { job: job.job_id, error: String(error) }));
}

async function removeScratch(engine: Engine, job: Job): Promise<void> {
  const names = ['transcript.txt', 'notes.txt', 'segments.json', 'entries.json', 'checked.json', 'frames.json', 'captions-off'];
  // Pieces cut by a step the job ended under have records but were never counted in the job.
  const pieces = Math.max(job.pieces_total, (await engine.kv.query({ pk: piecesPk(job), limit: 1000 })).items.length);
  for (let i = 0; i < pieces; i++) names.push(pieceName(i, 'mp3'), pieceName(i, 'json'));
  for (let i = 0; i < job.request.max_pointers; i++) names.push(`frame-${i}.jpg`);
  await Promise.all(names.map((n) => engine.blobs.delete(jobBlobKey(job.org, job.job_id, n))));
  // Memo files: named by their keys (memo.<key>.json); their list is kept beside them.
  const memoList = await readJson<string[]>(engine, jobBlobKey(job.org, job.job_id, 'memo-keys.json'));
  await Promise.all((memoList ?? []).map((k) => engine.blobs.delete(memoKey(job, k))));
  await engine.blobs.delete(jobBlobKey(job.org, job.job_id, 'memo-keys.json'));
}

// ---------- what a step works with ----------

const memoKey = (job: Job, key: string) => jobBlobKey(job.org, job.job_id, `memo.${key}.json`);

/** The stored principal the job's calls run as (its start's credential). */
const ownerOf = (job: Job) => JSON.parse(job.owner) as Principal;

async function defaultRoute(engine: Engine, job: Job, endpoint: string): Promise<ModelRoute> {
  const route = (await new ModelRoutes(engine.kv, () => engine.clock.now()).list(job.org)).find((r) => r.endpoint === endpoint && r.default);
  if (!route) throw new JobFailed('no_route', `The organization has no default route of ${endpoint} any more.`);
  return route;
}

/** Tokens of a message's content: its text by the tokenizer, an image at the most any model we know counts one (ai/estimate.ts). */
function contentTokens(content: string | unknown[]): number {
  if (typeof content === 'string') return countTokens(content);
  let n = 0;
  for (const part of content as { type?: string; text?: unknown }[]) n += part.type === 'image_url' ? IMAGE_TOKENS_BOUND : typeof part.text === 'string' ? countTokens(part.text) : countTokens(JSON.stringify(part));
  return n;
}

/** A job's chat calls: the default chat route, the job's price, and an estimate counted with the tokenizer (not byte bounds, which would hold four times the cost). */
function jobChat(engine: Engine, job: Job, signal: AbortSignal): JobChat {
  let route: Promise<ModelRoute> | undefined;
  const budget = jobBudget(engine, job);
  // A step's calls share their system prompt and schema: counted once each (a few of them per step).
  const counts = new Map<string, number>();
  const countOnce = (text: string) => {
    let n = counts.get(text);
    if (n === undefined && counts.size < 16) counts.set(text, (n = countTokens(text)));
    return n ?? countTokens(text);
  };
  return async (body) => {
    const r = await (route ??= defaultRoute(engine, job, '/v1/chat/completions'));
    let input = 8;
    for (const m of body.messages) input += 4 + (m.role === 'system' && typeof m.content === 'string' ? countOnce(m.content) : contentTokens(m.content));
    if (body.response_format) input += countOnce(JSON.stringify(body.response_format));
    const bound = Math.ceil(input * 1.1) + 16;
    const maxTokens = r.max_tokens === null ? body.max_tokens : Math.min(body.max_tokens, r.max_tokens);
    const completion = await chatCompletion(
      { engine, principal: ownerOf(job), signal, heldBudget: budget },
      r,
      { model: r.id, messages: body.messages, max_tokens: maxTokens, ...(body.response_format ? { response_format: body.response_format } : {}) },
      { inputTokens: input, inputTokensBound: bound, maxOutputTokens: maxTokens },
    );
    const content = (completion.choices?.[0] as { message?: { content?: unknown } } | undefined)?.message?.content;
    return typeof content === 'string' ? content : '';
  };
}

function stepContext(engine: Engine, job: Job, signal: AbortSignal, startedMs: number): StepContext {
  const budgetMs = settings().knowledgeJobStepBudgetMs;
  const checkTime = () => {
    if (Date.now() - startedMs > budgetMs) throw new TimeUp();
  };
  let memoList: Promise<void> = Promise.resolve();
  const memo: StepMemo = async <T>(key: string, work: () => Promise<T>): Promise<T> => {
    const stored = await readJson<{ value: T }>(engine, memoKey(job, key));
    if (stored) return stored.value;
    checkTime();
    signal.throwIfAborted();
    const value = await work();
    // The list of memo files is read, added to and written one memo at a time: calls answered at once
    // (the support check's batches) would otherwise each write a list without the others' keys.
    const listed = (memoList = memoList.catch(() => undefined).then(async () => {
      const list = (await readJson<string[]>(engine, jobBlobKey(job.org, job.job_id, 'memo-keys.json'))) ?? [];
      if (!list.includes(key)) await writeJson(engine, jobBlobKey(job.org, job.job_id, 'memo-keys.json'), [...list, key]);
    }));
    await listed;
    await writeJson(engine, memoKey(job, key), { value });
    return value;
  };
  return { engine, job, principal: ownerOf(job), signal, memo, chat: jobChat(engine, job, signal), blob: (name) => jobBlobKey(job.org, job.job_id, name), checkTime };
}

const STEP_RUNS: Record<Step, (c: StepContext) => Promise<StepOutcome>> = {
  probe: probeStep,
  transcribe: transcribeStep,
  extract: extractStep,
  reconcile: reconcileStep,
  frames: framesStep,
  publish: publishStep,
};

/** The start probed the recording already: here its bytes must still be there. */
async function probeStep(c: StepContext): Promise<StepOutcome> {
  if (!(await c.engine.blobs.head(c.job.source.key))) throw new JobFailed('source_expired', "The recording's upload expired before the job ran.");
  return { next: 'transcribe' };
}

// ---------- transcribe: pieces as messages of their own ----------

const pieceName = (i: number, ext: 'mp3' | 'json') => `piece-${String(i).padStart(4, '0')}.${ext}`;
const piecesPk = (job: Pick<Job, 'org' | 'job_id'>) => `kjobpiece#${job.org}#${job.job_id}`;
const pieceKey = (job: Pick<Job, 'org' | 'job_id'>, i: number) => ({ pk: piecesPk(job), sk: String(i).padStart(4, '0') });
/** A piece's processor holds it this long: its transcription's timeout and a margin. */
const pieceLeaseSeconds = (route: ModelRoute) => Math.ceil((route.timeout_ms ?? 60_000) / 1000) + 60;

interface PieceRecord {
  state: 'pending' | 'queued' | 'running' | 'done';
  start_s: number;
  end_s: number;
  attempt: number;
  lease_until: number;
}

async function transcribeStep(c: StepContext): Promise<StepOutcome> {
  const { engine, job } = c;
  if (job.request.transcript_given) {
    const text = await readText(engine, c.blob('transcript.txt'));
    const segments = parseTranscript(text ?? '');
    if (!segments.length) throw new JobFailed('empty_transcript', 'The transcript holds no text.');
    await writeJson(engine, c.blob('segments.json'), segments);
    return { next: 'extract' };
  }
  const route = await defaultRoute(engine, job, '/v1/audio/transcriptions');
  let total = job.pieces_total;
  if (total === 0) total = await cutPieces(c);
  // Where the pieces are: done ones counted, lost ones (their lease ran out) sent again, new ones up to the concurrency.
  const page = await engine.kv.query({ pk: piecesPk(job), limit: 1000 });
  const pieces = page.items.map((item) => ({ index: Number(item.sk), ...(item as unknown as PieceRecord) }));
  const done = pieces.filter((p) => p.state === 'done').length;
  if (done === pieces.length) {
    const segments: TimedSegment[] = [];
    for (const p of pieces) segments.push(...((await readJson<TimedSegment[]>(engine, c.blob(pieceName(p.index, 'json')))) ?? []));
    if (!segments.some((s) => s.text.trim())) throw new JobFailed('empty_transcript', 'The transcription found no speech in the recording.');
    await writeJson(engine, c.blob('segments.json'), segments);
    return { next: 'extract', set: { pieces_done: done, pieces_total: pieces.length } };
  }
  const now = nowSeconds(engine);
  const live = pieces.filter((p) => (p.state === 'queued' || p.state === 'running') && p.lease_until > now).length;
  let room = settings().knowledgeJobTranscriptionConcurrency - live;
  for (const p of pieces) {
    if (room <= 0) break;
    if (p.state === 'done' || ((p.state === 'queued' || p.state === 'running') && p.lease_until > now)) continue;
    if (await queuePiece(engine, job, p.index, p, pieceLeaseSeconds(route))) room--;
  }
  // The pieces renew the job's lease as they go; the sweep sends this step again if they all stall.
  await engine.kv.update({ key: keyOf({ org: job.org, app: job.app, job: job.job_id }), set: { pieces_done: done, pieces_total: pieces.length, attempt: 0, lease_until: 0, pieces_until: now + pieceLeaseSeconds(route), updated_at: iso(engine) }, condition: { ifEquals: { status: 'running', step: 'transcribe', attempt: job.attempt } } }).catch((error) => {
    if (!(error instanceof ConditionFailedError)) throw error;
  });
  await moveLeaseEntry(engine, job, now + pieceLeaseSeconds(route) + stepLeaseSeconds());
  return { wait: true };
}

/** The sweep's entry for the job, moved to `dueAt`. */
async function moveLeaseEntry(engine: Engine, job: Job, dueAt: number): Promise<void> {
  const { writes, sk } = leaseWrites(engine, job, dueAt);
  try {
    await engine.kv.transact([{ update: keyOf({ org: job.org, app: job.app, job: job.job_id }), set: { lease_sk: sk }, condition: { ifEquals: { lease_sk: job.lease_sk ?? null } } }, ...writes]);
    job.lease_sk = sk;
  } catch (error) {
    if (!(error instanceof TransactionCanceledError)) throw error;
  }
}

/** The audio track cut into pieces, each stored with a record `pending`; returns how many. */
async function cutPieces(c: StepContext): Promise<number> {
  const { engine, job } = c;
  const media = await openMedia(engine, job.source.key);
  if (!media) throw new JobFailed('source_expired', "The recording's upload expired before it was transcribed.");
  const dir = await mkdtemp(join(tmpdir(), 'job-pieces-'));
  try {
    let pieces;
    try {
      pieces = await cutAudio(media.input, dir, { pieceSeconds: PIECE_SECONDS, durationS: job.probed.duration_s, signal: c.signal });
    } catch (error) {
      if (c.signal.aborted) throw error;
      throw new JobFailed('unreadable', `The recording's audio could not be cut into pieces (${String((error as Error).message).slice(0, 200)}).`);
    }
    if (!pieces.length) throw new JobFailed('unreadable', 'The recording has no audio to transcribe.');
    for (const p of pieces) await engine.blobs.put(c.blob(pieceName(p.index, 'mp3')), await readFile(p.path));
    for (let i = 0; i < pieces.length; i += 25) {
      await engine.kv.transact(pieces.slice(i, i + 25).map((p) => ({ put: { ...pieceKey(job, p.index), state: 'pending', start_s: p.start_s, end_s: p.end_s, attempt: 0, lease_until: 0, expires_at: nowSeconds(engine) + FINISHED_SECONDS } })));
    }
    await engine.kv.update({ key: keyOf({ org: job.org, app: job.app, job: job.job_id }), set: { pieces_total: pieces.length }, condition: { ifEquals: { status: 'running', step: 'transcribe', attempt: job.attempt } } });
    job.pieces_total = pieces.length;
    return pieces.length;
  } finally {
    await rm(dir, { recursive: true, force: true });
    await media.release();
  }
}

/** Marks a piece queued (by the state it was read in) and sends its message; false when another did. */
async function queuePiece(engine: Engine, job: Job, index: number, read: PieceRecord, leaseSeconds: number): Promise<boolean> {
  try {
    await engine.kv.update({ key: pieceKey(job, index), set: { state: 'queued', lease_until: nowSeconds(engine) + leaseSeconds + 60 }, condition: { ifEquals: { state: read.state, attempt: read.attempt } } });
  } catch (error) {
    if (error instanceof ConditionFailedError) return false;
    throw error;
  }
  await sendStep(engine, { org: job.org, app: job.app, job: job.job_id, step: 'piece', piece: index });
  return true;
}

/** One piece: transcribed once (its result stored), the job's count moved on, the next piece sent, the step sent again after the last. */
async function runPiece(engine: Engine, message: JobMessage, events?: JobEvents): Promise<void> {
  const record = await engine.kv.get(keyOf(message));
  if (!record) return;
  const job = asJob(record);
  if (FINISHED.has(job.status) || job.step !== 'transcribe') return;
  const key = pieceKey(job, message.piece!);
  const found = await engine.kv.get(key);
  if (!found) return;
  const piece = found as unknown as PieceRecord;
  if (piece.state === 'done') return;
  const route = await defaultRoute(engine, job, '/v1/audio/transcriptions').catch((error: unknown) => error);
  if (route instanceof JobFailed) return failRunning(engine, job, route.code, route.message, events);
  if (!(route && typeof route === 'object' && 'endpoint' in route)) throw route;
  const r = route as ModelRoute;
  const now = nowSeconds(engine);
  if (piece.state === 'running' && piece.lease_until > now) return;
  const claim = { state: 'running', attempt: piece.attempt + 1, lease_until: now + pieceLeaseSeconds(r) };
  try {
    await engine.kv.update({ key, set: claim, condition: { ifEquals: { state: piece.state, attempt: piece.attempt } } });
  } catch (error) {
    if (error instanceof ConditionFailedError) return;
    throw error;
  }
  if (claim.attempt > MAX_ATTEMPTS) return failRunning(engine, job, 'upstream_error', `Transcription piece ${message.piece} failed ${MAX_ATTEMPTS} times.`, events);
  const resultKey = jobBlobKey(job.org, job.job_id, pieceName(message.piece!, 'json'));
  try {
    if (!(await engine.blobs.head(resultKey))) {
      const audio = await readBytes(engine, jobBlobKey(job.org, job.job_id, pieceName(message.piece!, 'mp3')));
      if (!audio) throw new JobFailed('source_expired', 'A transcription piece of the recording is gone.');
      const transcript = await transcription(
        { engine, principal: ownerOf(job), heldBudget: jobBudget(engine, job) },
        r,
        { bytes: audio, filename: pieceName(message.piece!, 'mp3'), contentType: 'audio/mpeg', audioSecondsFallback: piece.end_s - piece.start_s, ...(job.request.spoken_language ? { language: job.request.spoken_language } : {}) },
      );
      const segments: TimedSegment[] = transcript.segments.map((s) => ({ start_s: piece.start_s + s.start, end_s: piece.start_s + s.end, text: s.text.trim() })).filter((s) => s.text);
      await writeJson(engine, resultKey, segments);
    }
  } catch (error) {
    if (error instanceof PriceLimitReached) return failRunning(engine, job, 'price_limit', error.message, events);
    if (error instanceof JobFailed) return failRunning(engine, job, error.code, error.message, events);
    if (isTransient(error) && claim.attempt < MAX_RETRIES) {
      await engine.kv.update({ key, set: { state: 'queued', lease_until: nowSeconds(engine) + 5 * 2 ** claim.attempt + pieceLeaseSeconds(r) }, condition: { ifEquals: { state: 'running', attempt: claim.attempt } } }).catch(() => undefined);
      return sendStep(engine, { ...message }, 5 * 2 ** claim.attempt);
    }
    if (error instanceof PlatformError) return failRunning(engine, job, 'upstream_error', `${error.message} (transcription piece ${message.piece})`, events);
    throw error;
  }
  try {
    await engine.kv.update({ key, set: { state: 'done', lease_until: 0 }, condition: { ifEquals: { state: 'running', attempt: claim.attempt } } });
  } catch (error) {
    if (error instanceof ConditionFailedError) return;
    throw error;
  }
  // The job's count and lease move on; after the last piece, the step assembles the transcript.
  await engine.kv.update({ key: keyOf(message), add: { pieces_done: 1 }, set: { pieces_until: nowSeconds(engine) + pieceLeaseSeconds(r), updated_at: iso(engine) } });
  const pending = await engine.kv.query({ pk: piecesPk(job), limit: 1000 });
  const records = pending.items.map((item) => ({ index: Number(item.sk), ...(item as unknown as PieceRecord) }));
  // Two last pieces at once may both send it: the step's claim lets one run.
  if (records.every((p) => p.state === 'done')) return sendStep(engine, { org: job.org, app: job.app, job: job.job_id, step: 'transcribe' });
  const next = records.find((p) => p.state === 'pending');
  if (next) await queuePiece(engine, job, next.index, next, pieceLeaseSeconds(r));
}

/** A piece's fault ends the job, whatever step attempt holds it. */
async function failRunning(engine: Engine, job: Job, code: JobErrorCode, message: string, events?: JobEvents): Promise<void> {
  const now = await engine.kv.get(keyOf({ org: job.org, app: job.app, job: job.job_id }));
  if (!now) return;
  const current = asJob(now);
  if (FINISHED.has(current.status)) return;
  await finish(engine, current, { failed: code, message }, events);
}

// ---------- extract, reconcile, frames, publish ----------

async function segmentsOf(c: StepContext): Promise<TimedSegment[]> {
  const segments = await readJson<TimedSegment[]>(c.engine, c.blob('segments.json'));
  if (!segments) throw new JobFailed('internal_error', "The job's transcript is gone.");
  return segments;
}

async function notesOf(c: StepContext): Promise<string | null> {
  return c.job.request.notes_given ? ((await readText(c.engine, c.blob('notes.txt'))) ?? null) : null;
}

async function extractStep(c: StepContext): Promise<StepOutcome> {
  const segments = await segmentsOf(c);
  const notes = await notesOf(c);
  const memo: StepMemo = (key, work) => c.memo(key, work);
  let entries = await extractEntries({ segments, notes, outputLanguage: c.job.request.output_language, pass: 'first' }, c.chat, memo);
  if (c.job.request.power === 'max') entries = await extractEntries({ segments, notes, outputLanguage: c.job.request.output_language, pass: 'second', known: entries }, c.chat, memo);
  await writeJson(c.engine, c.blob('entries.json'), entries);
  return { next: 'reconcile' };
}

async function reconcileStep(c: StepContext): Promise<StepOutcome> {
  const segments = await segmentsOf(c);
  const entries = (await readJson<Entry[]>(c.engine, c.blob('entries.json'))) ?? [];
  // In code, always: the quote is in the transcript, where its times say.
  const index = indexTranscript(segments);
  let kept: Entry[] = [];
  let dropped = 0;
  for (const entry of entries) {
    const check = checkEvidence(index, entry);
    // An entry keeps the times of where its quote is (an entry the model gave no times takes them).
    if (check.ok) kept.push({ ...entry, start_s: check.start_s, end_s: check.end_s });
    else dropped++;
  }
  if (c.job.request.reconcile && kept.length) {
    const verdict = await supportCheck(kept, c.chat, c.memo, { outputLanguage: c.job.request.output_language });
    kept = verdict.kept;
    dropped += verdict.dropped;
  }
  await writeJson(c.engine, c.blob('checked.json'), kept);
  return { next: c.job.probed.video && c.job.request.frames ? 'frames' : 'publish', set: { entries: kept.length, entries_dropped: dropped } };
}

/**
 * Entry times tried per frame wanted, at most. Each try is an ffmpeg run (a seek and a decode): a
 * recording whose picture hardly changes (slides, a talking head) would otherwise be tried at every
 * entry's time, hundreds of runs for a long meeting, all but the first skipped as alike.
 */
export const FRAME_TRIES_PER_POINTER = 4;

/** Most important first: decisions, then action items, questions, facts; within a kind, in time order. */
const KIND_ORDER: Record<Entry['kind'], number> = { decision: 0, action_item: 1, question: 2, fact: 3 };

async function framesStep(c: StepContext): Promise<StepOutcome> {
  const entries = (await readJson<Entry[]>(c.engine, c.blob('checked.json'))) ?? [];
  const candidates = entries
    .map((e, index) => ({ index, kind: e.kind, time_s: e.start_s === null ? null : e.end_s === null ? e.start_s : (e.start_s + e.end_s) / 2 }))
    .filter((e): e is { index: number; kind: Entry['kind']; time_s: number } => e.time_s !== null)
    .sort((a, b) => KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || a.time_s - b.time_s);
  if (!candidates.length) return { next: 'publish', set: { frames: 0 } };
  const media = await openMedia(c.engine, c.job.source.key);
  if (!media) throw new JobFailed('source_expired', "The recording's upload expired before its frames were taken.");
  let frames: Frame[];
  try {
    const tries = candidates.slice(0, c.job.request.max_pointers * FRAME_TRIES_PER_POINTER);
    frames = await captureFrames(media.input, tries, { max: c.job.request.max_pointers, durationS: c.job.probed.duration_s, signal: c.signal });
  } catch (error) {
    if (c.signal.aborted) throw error;
    // Frames are evidence beside the entries, not the job: a recording whose pictures do not decode publishes without them.
    log.warn('knowledge job frames failed; published without them', { job: c.job.job_id, error: String(error) });
    frames = [];
  } finally {
    await media.release();
  }
  const stored: { time_s: number; entry: number; width: number; height: number }[] = [];
  for (const [i, f] of frames.entries()) {
    await c.engine.blobs.put(c.blob(`frame-${i}.jpg`), f.jpeg);
    const at = candidates.find((cand) => Math.abs(cand.time_s - f.time_s) < 0.5) ?? candidates[0];
    stored.push({ time_s: f.time_s, entry: at.index, width: f.width, height: f.height });
  }
  await writeJson(c.engine, c.blob('frames.json'), stored);
  return { next: 'publish', set: { frames: stored.length } };
}

async function publishStep(c: StepContext): Promise<StepOutcome> {
  const segments = await segmentsOf(c);
  const entries = (await readJson<Entry[]>(c.engine, c.blob('checked.json'))) ?? [];
  const frames = c.job.probed.video && c.job.request.frames ? ((await readJson<{ time_s: number; entry: number; width: number; height: number }[]>(c.engine, c.blob('frames.json'))) ?? []) : [];
  const published = await publishJob(c, { segments, entries, frames });
  return { next: 'done', set: { collection_id: published.collection_id, summary: published.summary, entries: entries.length, frames: frames.length } };
}

// ---------- the sweep ----------

/**
 * Jobs whose processor died (their lease entry is due): the step is sent again with a fresh entry; an
 * entry whose job moved on is dropped. Also publishes the events of finished jobs a crash left unsent.
 * Returns the entries looked at.
 */
export async function sweepJobs(engine: Engine, events?: JobEvents, limit = 100): Promise<number> {
  const now = nowSeconds(engine);
  const page = await engine.kv.query({ pk: JOB_SWEEP_PARTITION, sk: leasesDueBefore(now + 1), limit });
  for (const entry of page.items) {
    await sweepEntry(engine, String(entry.sk), now).catch((error) => log.warn('jobs sweep entry failed; retried next sweep', { sk: String(entry.sk), error: String(error) }));
  }
  if (events) await publishPending(engine, events).catch((error) => log.warn('job events sweep failed', { error: String(error) }));
  return page.items.length;
}

async function sweepEntry(engine: Engine, sk: string, now: number): Promise<void> {
  const [, org, app, id] = sk.split('#');
  const record = await engine.kv.get(jobKey(org, app, id));
  if (!record || FINISHED.has(asJob(record).status) || record.lease_sk !== sk) return void (await engine.kv.delete({ pk: JOB_SWEEP_PARTITION, sk }));
  const job = asJob(record);
  // A step's own lease, or, while transcribing, its pieces' (renewed as each finishes; past that step
  // the last piece's would hold a dead processor's step for a transcription timeout and more).
  const until = Math.max(job.lease_until, job.step === 'transcribe' ? (job.pieces_until ?? 0) : 0);
  if (until > now) {
    await moveLeaseEntry(engine, job, until + stepLeaseSeconds());
    return;
  }
  await moveLeaseEntry(engine, job, now + stepLeaseSeconds() * 2);
  await sendStep(engine, { org, app, job: id, step: job.step });
}

/**
 * Finished jobs whose event a crash left unsent: their `kjobevent` entry, written with the job's end
 * (finish), is still there. One that is being published right now is published twice: a duplicate by
 * its idempotency key, nothing delivered twice.
 */
async function publishPending(engine: Engine, events: JobEvents): Promise<void> {
  const page = await engine.kv.query({ pk: PENDING_EVENTS, limit: 50 });
  for (const entry of page.items) {
    const [org, app, id] = String(entry.sk).split('#');
    const record = await engine.kv.get(jobKey(org, app, id));
    if (record && record.event_pending === true) await events.finished(asJob(record));
    await engine.kv.delete({ pk: PENDING_EVENTS, sk: entry.sk });
  }
}

/** Finished jobs whose event is not yet published: `kjobevent / <org>#<app>#<job>`. */
export const PENDING_EVENTS = 'kjobevent';
