/** The AI API's knowledge jobs (spec 4.8, and the extensions: read, list, cancel; docs/ai/knowledge-jobs.md). */
import * as z from 'zod/mini';
import { jobListSchema, jobsQuerySchema, jobViewSchema } from '../knowledge/jobs/records.js';
import { startJobSchema } from '../knowledge/jobs/request.js';
import type { ErrorCode } from '../shared/errors.js';
import type { HeaderDoc, OperationDocs, ParameterDoc } from './operation.js';

const REPLAY: Record<string, HeaderDoc> = {
  'x-idempotent-replay': { description: '`true` when this is the answer kept for the same `X-Operation-Id`, replayed (kept 24 hours).', schema: () => z.literal('true') },
};
const ONCE: ErrorCode[] = ['operation_in_progress', 'operation_id_reused'];
const JOB_ID: ParameterDoc = {
  description: '`job_` and 32 lowercase hex characters. Anything else, or another organization’s or application’s job: `404 job_not_found`.',
  schema: () => z.string(),
  example: 'job_019ad1c2e3f40a1b2c3d4e5f6a7b8c9d',
};

const JOB_EXAMPLE = {
  job_id: 'job_019ad1c2e3f40a1b2c3d4e5f6a7b8c9d',
  object: 'knowledge.job',
  status: 'running',
  step: 'extract',
  progress: { steps_done: 2, steps_total: 6, pieces_done: 6, pieces_total: 6 },
  estimate_usd: '0.412000',
  spent_usd: '0.360000',
  max_price_usd: '2.50',
  collection_id: null,
  entries: 0,
  entries_dropped: 0,
  frames: 0,
  summary: null,
  error: null,
  created_at: '2026-12-02T10:00:00.000Z',
  updated_at: '2026-12-02T10:01:30.000Z',
  source_expires_at: '2026-12-03T10:00:00.000Z',
};

export const AI_KNOWLEDGE_JOBS_OPERATIONS: OperationDocs = {
  'ai.knowledge.jobs.create': {
    tag: 'Knowledge jobs',
    summary: 'Start a knowledge job',
    description:
      'A completed upload of a recording becomes a `cloud` collection: its transcript, entries (decisions, action items, questions, facts, each with its verbatim quote and time range, checked against the transcript) and still frames. The recording is probed and the whole job priced before any paid work: `max_price_usd` over the organization’s cap, an estimate over `max_price_usd` or over what is left of a budget is `403 budget_exceeded` naming the estimate. Once per `X-Operation-Id`; the same id with another body is `409 operation_id_reused`.',
    body: {
      name: 'KnowledgeJobRequest',
      schema: startJobSchema,
      example: { upload_id: 'upl-2026-12-02-standup', max_price_usd: '2.50', power: 'medium', max_pointers: 10, output_language: 'en' },
    },
    responses: {
      202: {
        description: 'Started: poll `status_url` after `poll_after_seconds`.',
        name: 'KnowledgeJobStarted',
        schema: () => z.strictObject({ job_id: z.string(), poll_after_seconds: z.int().check(z.minimum(1)), status_url: z.string().check(z.regex(/^\/v1\/knowledge\/jobs\/job_[0-9a-f]{32}$/)) }),
        example: { job_id: JOB_EXAMPLE.job_id, poll_after_seconds: 2, status_url: `/v1/knowledge/jobs/${JOB_EXAMPLE.job_id}` },
        headers: REPLAY,
      },
    },
    errors: ['knowledge_disabled', 'budget_exceeded', 'upload_not_found', 'upload_incomplete', 'route_unavailable', 'vector_database_disabled', 'vector_database_not_created', 'vector_database_deleting', ...ONCE],
  },
  'ai.knowledge.jobs.list': {
    tag: 'Knowledge jobs',
    extension: true,
    summary: 'List knowledge jobs',
    description: 'The calling application’s jobs, newest first (an organization-wide credential: the organization-wide ones). `next_cursor` is bound to the organization and application.',
    query: jobsQuerySchema,
    responses: { 200: { description: 'A page of jobs.', name: 'KnowledgeJobList', schema: jobListSchema, example: { object: 'list', data: [JOB_EXAMPLE], next_cursor: null } } },
    errors: ['knowledge_disabled', 'invalid_field', 'invalid_cursor'],
  },
  'ai.knowledge.jobs.get': {
    tag: 'Knowledge jobs',
    extension: true,
    summary: 'Read a knowledge job',
    description: 'Its status (`queued` → `running` → `completed`, `failed` or `cancelled`), step, progress, estimate and spend, and once published its collection, counts and summary.',
    path: { job_id: JOB_ID },
    responses: { 200: { description: 'The job.', name: 'KnowledgeJob', schema: jobViewSchema, example: JOB_EXAMPLE } },
    errors: ['knowledge_disabled', 'job_not_found'],
  },
  'ai.knowledge.jobs.cancel': {
    tag: 'Knowledge jobs',
    extension: true,
    summary: 'Cancel a knowledge job',
    description: 'Stops a queued or running job: what was paid stays paid, the rest of its estimate is given back to the budgets. A finished job is `409 job_finished`. Once per `X-Operation-Id`.',
    path: { job_id: JOB_ID },
    responses: { 200: { description: 'The job, cancelled.', name: 'KnowledgeJob', schema: jobViewSchema, example: { ...JOB_EXAMPLE, status: 'cancelled' }, headers: REPLAY } },
    errors: ['knowledge_disabled', 'job_not_found', 'job_finished', ...ONCE],
  },
};
