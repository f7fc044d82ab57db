/**
 * A knowledge job's record and how it is read (docs/ai/knowledge-jobs.md, "Statuses and steps"): one
 * item per job (job-keys.ts), written by the start, advanced one step at a time by the pipeline, read
 * by `GET /v1/knowledge/jobs/{job_id}` and the list. A job is visible to the credential's own
 * application only (an organization-wide credential: the organization-wide jobs); any other is `404
 * job_not_found`, as if it did not exist.
 */
import { randomBytes } from 'node:crypto';
import * as z from 'zod/mini';
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvItem } from '../../engine/ports.js';
import { openPage, nextPageCursor, pageQuerySchema } from '../../shared/cursors.js';
import { PlatformError } from '../../shared/errors.js';
import { onFirstUse, parseQuery } from '../../shared/validate.js';
import { appPart, jobKey, jobsPk } from './job-keys.js';
import type { JobRequest } from './request.js';

export const JOB_STATUSES = ['queued', 'running', 'completed', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const FINISHED: ReadonlySet<JobStatus> = new Set(['completed', 'failed', 'cancelled']);
export const STEPS = ['probe', 'transcribe', 'extract', 'reconcile', 'frames', 'publish'] as const;
export type Step = (typeof STEPS)[number];
/** Codes a failed job's `error.code` takes. */
export const JOB_ERRORS = ['price_limit', 'upstream_error', 'source_expired', 'unreadable', 'no_route', 'empty_transcript', 'too_large', 'internal_error'] as const;
export type JobErrorCode = (typeof JOB_ERRORS)[number];

export const MAX_JOBS_PAGE = 100;
export const DEFAULT_JOBS_PAGE = 20;
/** A finished job's record stays readable this long (then the store's expiry takes it). */
export const FINISHED_JOB_SECONDS = 30 * 24 * 3600;

/** What the probe read of the recording (media.ts). */
export interface Probed {
  duration_s: number;
  audio: boolean;
  video: boolean;
}

/** The job as stored (KV item fields; the texts and step results are blobs). */
export interface Job {
  job_id: string;
  org: string;
  app: string;
  workspace: string;
  /** The calling credential, as items keep it (auth/principal.ts storedPrincipal): the job's calls run as it. */
  owner: string;
  status: JobStatus;
  step: Step;
  /** Steps finished or skipped. */
  steps_done: number;
  pieces_done: number;
  pieces_total: number;
  request: Omit<JobRequest, 'transcript' | 'notes'> & { transcript_given: boolean; notes_given: boolean };
  /** The recording: its upload's file. */
  source: { key: string; filename: string; content_type: string; size: number; sha256: string };
  probed: Probed;
  estimate_micro: number;
  /** The budget scopes the estimate is held in (limits.ts scopes), and the hold's bucket attribute in each. */
  budget_holds: { scope: string; attr: string; amount: number }[];
  collection_id: string | null;
  entries: number;
  entries_dropped: number;
  frames: number;
  summary: string | null;
  error_code: JobErrorCode | null;
  error_message: string | null;
  created_at: string;
  updated_at: string;
  source_expires_at: string;
  /** Epoch seconds the running step's processor holds the job until (0: none). */
  lease_until: number;
  lease_sk: string | null;
  /** Epoch seconds the transcription pieces in flight are expected back by (renewed as each finishes). */
  pieces_until?: number;
  /** A finished job whose platform event is not yet out. */
  event_pending?: boolean;
  /** Claims of the current step so far: a step that kills its processor every time fails the job. */
  attempt: number;
}

export function asJob(item: KvItem): Job {
  return item as unknown as Job;
}

const usd = (micro: number) => (Math.max(0, Math.round(micro)) / 1e6).toFixed(6);

export const jobViewSchema = onFirstUse(() =>
  z.strictObject({
      job_id: z.string().check(z.regex(/^job_[0-9a-f]{32}$/), z.describe('`job_` and 32 lowercase hex characters: the start time and 80 random bits, so ids sort by start.')),
      object: z.literal('knowledge.job'),
      status: z.enum(JOB_STATUSES).check(z.describe('`queued` → `running` → `completed`, `failed` or `cancelled` (docs/ai/knowledge-jobs.md, "Statuses").')),
      step: z.enum(STEPS).check(z.describe('The step running, or the last one reached: `probe`, `transcribe`, `extract`, `reconcile`, `frames`, `publish`.')),
      progress: z.strictObject({
        steps_done: z.int().check(z.describe('Steps finished or skipped, of `steps_total`.')),
        steps_total: z.int(),
        pieces_done: z.int().check(z.describe('Transcription pieces (of at most 10 minutes) transcribed, of `pieces_total` (0 when a transcript was given).')),
        pieces_total: z.int(),
      }),
      estimate_usd: z.string().check(z.describe('The whole job\'s price as estimated at the start (USD, six decimals): held against the budgets until it is spent or the job ends.')),
      spent_usd: z.string().check(z.describe('What the job\'s upstream calls cost so far (USD, six decimals). What was paid stays paid when a job is cancelled.')),
      max_price_usd: z.string().check(z.describe('As sent: the job stops `failed` with `price_limit` rather than make a call that would pass it.')),
      collection_id: z.nullable(z.string()).check(z.describe('The `cloud` collection the job publishes (null until its publish step).')),
      entries: z.int().check(z.describe('Entries published (decisions, action items, questions, facts).')),
      entries_dropped: z.int().check(z.describe('Entries dropped because their quote is not in the transcript, their times do not match where it is, or a model found the quote does not support the statement.')),
      frames: z.int().check(z.describe('Still frames published.')),
      summary: z.nullable(z.string()).check(z.describe('A few lines on what the recording holds, in `output_language` (null until published).')),
      error: z.nullable(z.strictObject({ code: z.enum(JOB_ERRORS), message: z.string() })).check(z.describe('Why a `failed` job failed; null otherwise.')),
      created_at: z.iso.datetime(),
      updated_at: z.iso.datetime(),
    source_expires_at: z.iso.datetime().check(z.describe('When the recording\'s bytes are deleted at the earliest: `keep_source_hours` after the start, or later if its upload keeps them longer.')),
  }),
);
export type JobView = z.output<ReturnType<typeof jobViewSchema>>;

export const jobListSchema = onFirstUse(() => z.strictObject({ object: z.literal('list'), data: z.array(jobViewSchema()), next_cursor: z.nullable(z.string()) }));

export const STEPS_TOTAL = STEPS.length;

export function jobView(job: Job, spentMicro: number): JobView {
  return {
    job_id: job.job_id,
    object: 'knowledge.job',
    status: job.status,
    step: job.step,
    progress: { steps_done: job.steps_done, steps_total: STEPS_TOTAL, pieces_done: job.pieces_done, pieces_total: job.pieces_total },
    estimate_usd: usd(job.estimate_micro),
    spent_usd: usd(spentMicro),
    max_price_usd: job.request.max_price_usd,
    collection_id: job.collection_id,
    entries: job.entries,
    entries_dropped: job.entries_dropped,
    frames: job.frames,
    summary: job.summary,
    error: job.error_code === null ? null : { code: job.error_code, message: job.error_message ?? '' },
    created_at: job.created_at,
    updated_at: job.updated_at,
    source_expires_at: job.source_expires_at,
  };
}

/** `job_` + 12 hex of the start's milliseconds + 20 random hex: ids sort by start. */
export function newJobId(nowMs: number): string {
  return `job_${Math.floor(nowMs).toString(16).padStart(12, '0').slice(-12)}${randomBytes(10).toString('hex')}`;
}

const JOB_ID = /^job_[0-9a-f]{32}$/;
const notFound = (id: string) => new PlatformError('job_not_found', `No knowledge job "${id}" for this credential's application.`, 'job_id');

/** The job `id` of the caller's application, or 404 job_not_found. */
export async function readJob(engine: Engine, principal: Principal, id: string): Promise<Job> {
  if (!JOB_ID.test(id)) throw notFound(id);
  const item = await engine.kv.get(jobKey(principal.organizationId, appPart(principal.applicationId), id));
  if (!item) throw notFound(id);
  return asJob(item);
}

export const jobsQuerySchema = onFirstUse(() => pageQuerySchema({ max: MAX_JOBS_PAGE, fallback: DEFAULT_JOBS_PAGE }));

/** GET /v1/knowledge/jobs?limit=&cursor=: newest first, a sealed cursor bound to the organization and application. */
export async function listJobs(engine: Engine, principal: Principal, query: Record<string, string>, spentOf: (job: Job) => Promise<number>) {
  parseQuery(jobsQuerySchema(), query, { unknownParameter: 'unsupported_field', invalid: 'invalid_field', fieldCodes: { cursor: 'invalid_cursor' } });
  const app = appPart(principal.applicationId);
  const binding = `knowledge-jobs\n${principal.organizationId}\n${app}`;
  const { limit, position } = await openPage(engine.secret, query, binding, { max: MAX_JOBS_PAGE, fallback: DEFAULT_JOBS_PAGE });
  const page = await engine.kv.query({ pk: jobsPk(principal.organizationId, app), descending: true, limit, cursor: position });
  const jobs = page.items.map(asJob);
  return {
    object: 'list' as const,
    data: await Promise.all(jobs.map(async (j) => jobView(j, await spentOf(j)))),
    next_cursor: await nextPageCursor(engine.secret, page.cursor, binding),
  };
}
