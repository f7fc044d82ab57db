/**
 * `POST /v1/knowledge/jobs` (spec 4.8; docs/ai/knowledge-jobs.md): the checks in the order
 * after the body (the recording's upload, then each reference: `404 upload_not_found`, `409
 * upload_incomplete`), the recording probed with ffprobe where it is stored (a file ffprobe cannot
 * read: `400 invalid_body` naming `upload_id`), the routes the job will call, the price estimated and
 * held against the budgets (pricing.ts, spend.ts: `403 budget_exceeded`), all before any paid work.
 * Then the job is written `queued` with its kept answer in one transaction and its first step sent.
 */
import type { Principal } from '../../auth/principal.js';
import { storedPrincipal } from '../../auth/principal.js';
import type { Engine, KvUpdate, KvWrite } from '../../engine/ports.js';
import { TransactionCanceledError } from '../../engine/errors.js';
import { checkReplay, type OperationContext } from '../../ai/operations.js';
import { ModelRoutes, type ModelRoute } from '../../ai/model-routes.js';
import { AiOrgSettings } from '../../ai/org-settings.js';
import { PlatformError } from '../../shared/errors.js';
import { holdMs } from '../../shared/hold-margin.js';
import type { OperationCall } from '../../shared/operations.js';
import { openVectorDatabase, stampedRoute } from '../../vector/databases.js';
import { countTokens } from '../chunks.js';
import { workspaceOf } from '../collection-records.js';
import { completedUploadSource, keepSourceUntil } from '../uploads.js';
import { readText } from '../blob-reads.js';
import { transcriptTokens } from './entries.js';
import { appPart, jobBlobKey, jobKey, jobLeaseKey, jobSpendKey } from './job-keys.js';
import { mediaInput, probeRecording } from './media-input.js';
import { estimatePrice, type PriceEstimate } from './pricing.js';
import { FINISHED_JOB_SECONDS, newJobId, type Job } from './records.js';
import { MAX_TEXT_BYTES, type JobRequest } from './request.js';
import { holdEstimate, keepEstimateHolds, releaseEstimateHolds } from './spend.js';
import { parseTranscript } from './transcript.js';
import { sendStep, stepLeaseSeconds, expectedStepSeconds } from './pipeline.js';

export const CHAT_ENDPOINT = '/v1/chat/completions';
export const TRANSCRIPTION_ENDPOINT = '/v1/audio/transcriptions';

const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);
const iso = (epochSeconds: number) => new Date(epochSeconds * 1000).toISOString();

/** The job's claim on its operation id: replayed for the same body only (another body: 409 operation_id_reused). */
export function jobOperation(engine: Engine, principal: Principal, request: JobRequest): OperationCall<OperationContext & { body: string }> {
  const context = { endpoint: '/v1/knowledge/jobs', route: null, application: principal.applicationId, capability: 'knowledge' as const, body: request.body_sha256 };
  return {
    tenant: principal.organizationId,
    holdSeconds: holdMs(60_000) / 1000,
    context,
    checkReplay: async (kept) => {
      if (kept && kept.endpoint === context.endpoint && kept.body !== context.body) {
        throw new PlatformError('operation_id_reused', 'This X-Operation-Id started a job with another body; use a new id for this job.');
      }
      await checkReplay(engine, principal, context, kept);
    },
  };
}

/** A referenced upload: completed, of at most 16 MiB; its codes name `references.<field>`. */
async function referencedText(engine: Engine, principal: Principal, field: 'transcript' | 'notes', id: string): Promise<{ key: string }> {
  const param = `references.${field}`;
  let source: Awaited<ReturnType<typeof completedUploadSource>>;
  try {
    source = await completedUploadSource(engine, principal, id);
  } catch (error) {
    if (error instanceof PlatformError) throw new PlatformError(error.code, error.message.replace(/^(No upload|Upload) "/, `$1 "`), param);
    throw error;
  }
  if (source.upload.size > MAX_TEXT_BYTES) throw new PlatformError('invalid_body', `${param} is ${source.upload.size} bytes; a referenced ${field} is at most 16 MiB.`, param);
  return { key: source.key };
}

/** A referenced text, read whole (at most 16 MiB). */
async function referencedTextOf(engine: Engine, key: string): Promise<string> {
  const text = await readText(engine, key);
  if (text === undefined) throw new PlatformError('upload_not_found', 'A referenced upload expired meanwhile.', 'references');
  return text;
}

/** A given transcript counted whole up to this many characters; past it, from a sample (counting 16 MiB took seconds inside the call). */
export const COUNTED_WHOLE_CHARS = 512 * 1024;
/** What a sample's count is raised by: a transcript's later text may tokenize less well than its start. */
const SAMPLE_MARGIN = 1.2;

/**
 * Tokens of a given transcript as extraction sends it (its lines with stamps). A long one is counted
 * on its first COUNTED_WHOLE_CHARS of segments and scaled by characters, with SAMPLE_MARGIN: the
 * estimate stays an upper bound in practice, and the calls themselves are held at their real count.
 */
export function givenTokens(text: string): number {
  const segments = parseTranscript(text);
  let chars = 0;
  for (const s of segments) chars += s.text.length + 1;
  if (chars <= COUNTED_WHOLE_CHARS) return transcriptTokens(segments);
  const sample: typeof segments = [];
  let sampled = 0;
  for (const s of segments) {
    if (sampled >= COUNTED_WHOLE_CHARS) break;
    sample.push(s);
    sampled += s.text.length + 1;
  }
  return Math.ceil((transcriptTokens(sample) / sampled) * chars * SAMPLE_MARGIN);
}

/** The organization's default route of `endpoint`, or 503 route_unavailable naming what to configure. */
async function defaultRoute(engine: Engine, org: string, endpoint: string, why: string): Promise<ModelRoute> {
  const route = (await new ModelRoutes(engine.kv, () => engine.clock.now()).list(org)).find((r) => r.endpoint === endpoint && r.default);
  if (!route) throw new PlatformError('route_unavailable', `A knowledge job ${why} through the organization's default route of ${endpoint}, and it has none: configure one with \`npm run admin -- route set --endpoint ${endpoint} --default ...\`.`);
  return route;
}

/** Everything the start checks and reads before it claims any money. */
export interface PreparedJob {
  request: JobRequest;
  source: Job['source'];
  probed: Job['probed'];
  estimate: PriceEstimate;
  capUsd: number | null;
  /** The transcript and notes as given, inline or read once from their references; null when none. */
  texts: { transcript: string | null; notes: string | null };
}

export async function prepareJob(engine: Engine, principal: Principal, request: JobRequest): Promise<PreparedJob> {
  const org = principal.organizationId;
  const recording = await completedUploadSource(engine, principal, request.upload_id).catch((error: unknown) => {
    throw error instanceof PlatformError ? new PlatformError(error.code, error.message, 'upload_id') : error;
  });
  const references = {
    transcript: request.references.transcript === null ? null : await referencedText(engine, principal, 'transcript', request.references.transcript),
    notes: request.references.notes === null ? null : await referencedText(engine, principal, 'notes', request.references.notes),
  };
  const probed = await probeRecording(await mediaInput(engine, recording.key));
  const given = request.transcript ?? (references.transcript ? await referencedTextOf(engine, references.transcript.key) : null);
  if (given === null && !probed.audio) throw new PlatformError('invalid_body', 'The recording has no audio track to transcribe; send its transcript in `transcript` or `references.transcript`.', 'upload_id');
  const notes = request.notes ?? (references.notes ? await referencedTextOf(engine, references.notes.key) : null);
  const [chat, transcription, settings] = await Promise.all([
    defaultRoute(engine, org, CHAT_ENDPOINT, 'extracts its entries'),
    given === null ? defaultRoute(engine, org, TRANSCRIPTION_ENDPOINT, 'transcribes a recording') : Promise.resolve(null),
    new AiOrgSettings(engine.kv, () => engine.clock.now()).get(org),
  ]);
  // The collection it publishes is a `cloud` one: its workspace's vector database embeds it.
  const embeddings = await stampedRoute(engine, await openVectorDatabase(engine, principal));
  const estimate = estimatePrice({
    duration_s: probed.duration_s,
    video: probed.video,
    transcriptTokens: given === null ? null : givenTokens(given),
    notesTokens: notes === null ? 0 : countTokens(notes.slice(0, 64 * 1024)),
    power: request.power,
    reconcile: request.reconcile,
    frames: request.frames,
    max_pointers: request.max_pointers,
    routes: { chat, transcription, embeddings },
  });
  const keepCap = settings.limits.knowledge_keep_source_hours ?? null;
  if (keepCap !== null && request.keep_source_hours > keepCap) {
    throw new PlatformError('invalid_body', `keep_source_hours is ${request.keep_source_hours}; this organization keeps a recording at most ${keepCap} hours.`, 'keep_source_hours');
  }
  const upload = recording.upload;
  return {
    request,
    source: { key: recording.key, filename: upload.filename, content_type: upload.content_type, size: upload.size, sha256: upload.sha256 },
    probed: { duration_s: probed.duration_s, audio: probed.audio, video: probed.video },
    estimate,
    capUsd: settings.limits.knowledge_job_cap_usd ?? null,
    texts: { transcript: given, notes },
  };
}

/** The start's answer (spec 4.8). */
export interface StartAnswer {
  job_id: string;
  poll_after_seconds: number;
  status_url: string;
}

/**
 * Claims the money (holdEstimate, for minutes), writes the texts the job reads and the job itself with
 * `keep` (the operation's kept answer) and its holds moved to the job's lifetime in one transaction,
 * then sends its first step. A failure after the holds gives them back, a crash lets them lapse; one
 * after the transaction leaves a queued job the jobs sweep starts.
 */
export async function startJob(engine: Engine, principal: Principal, prepared: PreparedJob, keep: (answer: object) => KvUpdate): Promise<StartAnswer> {
  const { request, estimate } = prepared;
  const org = principal.organizationId;
  const app = appPart(principal.applicationId);
  const holds = await holdEstimate(engine, principal, estimate.total, request.max_price_micro, prepared.capUsd);
  const nowMs = engine.clock.now();
  const now = Math.floor(nowMs / 1000);
  const id = newJobId(nowMs);
  try {
    const { texts } = prepared;
    if (texts.transcript !== null) await engine.blobs.put(jobBlobKey(org, id, 'transcript.txt'), Buffer.from(texts.transcript, 'utf8'));
    if (texts.notes !== null) await engine.blobs.put(jobBlobKey(org, id, 'notes.txt'), Buffer.from(texts.notes, 'utf8'));
    const sourceExpires = await keepSourceUntil(engine, principal, request.upload_id, now + request.keep_source_hours * 3600);
    const lease = jobLeaseKey(now + stepLeaseSeconds(), org, app, id);
    // The holds live as the job's once the job is written, in the same transaction.
    const jobHolds = keepEstimateHolds(holds, nowMs);
    const { transcript: _t, notes: _n, ...kept } = request;
    const job: Job = {
      job_id: id,
      org,
      app,
      workspace: await workspaceOf(engine, principal),
      owner: JSON.stringify(storedPrincipal(principal)),
      status: 'queued',
      step: 'probe',
      steps_done: 0,
      pieces_done: 0,
      pieces_total: 0,
      request: { ...kept, transcript_given: texts.transcript !== null, notes_given: texts.notes !== null },
      source: prepared.source,
      probed: prepared.probed,
      estimate_micro: estimate.total,
      budget_holds: jobHolds.holds,
      collection_id: null,
      entries: 0,
      entries_dropped: 0,
      frames: 0,
      summary: null,
      error_code: null,
      error_message: null,
      created_at: iso(now),
      updated_at: iso(now),
      source_expires_at: iso(sourceExpires),
      lease_until: 0,
      lease_sk: lease.sk,
      attempt: 0,
    };
    const answer: StartAnswer = { job_id: id, poll_after_seconds: expectedStepSeconds(job, 'probe'), status_url: `/v1/knowledge/jobs/${id}` };
    const writes: KvWrite[] = [
      { put: { ...jobKey(org, app, id), ...job, expires_at: now + FINISHED_JOB_SECONDS + 7 * 24 * 3600 } as never, condition: { ifAbsent: true } },
      { put: { ...jobSpendKey(org, id), spent: 0, expires_at: now + FINISHED_JOB_SECONDS + 7 * 24 * 3600 } },
      { put: { ...lease } },
      keep(answer),
      ...jobHolds.writes,
    ];
    await engine.kv.transact(writes);
    await sendStep(engine, { org, app, job: id, step: 'probe' }).catch(() => undefined);
    return answer;
  } catch (error) {
    await releaseEstimateHolds(engine, holds, 0);
    if (error instanceof TransactionCanceledError) throw new PlatformError('service_unavailable', 'The job could not be written; try again with the same X-Operation-Id.', { retryAfterSeconds: 1 });
    throw error;
  }
}
