/**
 * The activity log (spec section 2 "Activity record", 4.20), one module for all three APIs. Services
 * report record and file events through the after-commit hooks (data/hooks.ts); the HTTP chain reports
 * every call as `api.call` (http/middleware/activity.ts). Both hand plain fields: nothing here knows
 * routes or requests. How events are buffered and stored is in segments.ts, how they are read back in
 * listing.ts.
 */
import type { Engine, KvValue } from '../engine/ports.js';
import type { CredentialKind, Principal } from '../auth/principal.js';
import type { Api, CallInfo } from '../shared/api.js';
import { log, logContext, type LogContext } from '../shared/log.js';
import { monotonicUlid } from '../shared/ids.js';
import {
  ActivityRecorder,
  activityDay,
  activityFilePartition,
  activityPartition,
  activitySortKey,
  type ActivityEntry,
  type EventRow,
  type StoredEvent,
} from './segments.js';

/**
 * The spec's named kinds, plus any other `file.*` kind, plus `ai.usage` (one AI call's tokens and
 * cost; an extension of spec section 2, docs/decisions/ai-usage.md) and `ai.rerank` (one call of a
 * vector query's reranker, docs/decisions/rerank.md).
 */
export const NAMED_ACTIVITY_KINDS = [
  'api.call',
  'ai.usage',
  'ai.rerank',
  'record.write',
  'record.delete',
  'blob.write',
  'blob.read',
  'blob.delete',
  'file.upload.completed',
  'file.download',
  'file.delete',
] as const;
export type ActivityKind = (typeof NAMED_ACTIVITY_KINDS)[number] | `file.${string}`;

export const FILE_KIND = /^file\.[a-z0-9_]+(\.[a-z0-9_]+)*$/;
const NAMED = new Set<string>(NAMED_ACTIVITY_KINDS);
export const isActivityKind = (kind: string): kind is ActivityKind => NAMED.has(kind) || (kind.length <= 64 && FILE_KIND.test(kind));

export type ActivityRelated = {
  database: string | null;
  collection_id: string | null;
  record_id: string | null;
};

/** Token usage and cost of one AI call (`ai.usage` events). */
export interface ActivityUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** USD, rounded to the micro-USD. */
  cost_usd: number;
  /** A transcription's seconds of audio; absent on other calls. */
  audio_seconds?: number;
}

/** What a service reports. Anything left out is null in the record. */
export interface ActivityEvent {
  kind: ActivityKind;
  file_id?: string | null;
  file_sha256?: string | null;
  file_size?: number | null;
  content_type?: string | null;
  file_name?: string | null;
  related?: { database?: string | null; collection_id?: string | null; record_id?: string | null } | null;
  /** `api.call` only; the chain sets these. */
  status?: number | null;
  error_code?: string | null;
  latency_ms?: number | null;
  bytes_in?: number | null;
  bytes_out?: number | null;
  /** `ai.usage` and `ai.rerank` only. */
  usage?: ActivityUsage | null;
}

/**
 * One entry of the log: the fields of spec section 2, then `request_id` and `operation_id` (the
 * request's ids, as its answer and log lines carry them; null on records written before they were
 * kept), and on `ai.usage` and `ai.rerank` events only, `usage`.
 */
export interface ActivityRecord {
  id: string;
  at_ms: number;
  organization_id: string;
  actor_kind: CredentialKind;
  actor_id: string;
  source: Api;
  kind: ActivityKind;
  method: string | null;
  route: string | null;
  status: number | null;
  outcome: 'success' | 'client_error' | 'server_error' | null;
  error_code: string | null;
  latency_ms: number | null;
  file_id: string | null;
  file_sha256: string | null;
  file_size: number | null;
  content_type: string | null;
  file_name: string | null;
  related: ActivityRelated | null;
  bytes_in: number | null;
  bytes_out: number | null;
  country: string | null;
  /** The request that recorded the event: its `x-request-id` and the `request_id` of its log lines. */
  request_id: string | null;
  /** AI calls: the operation id the answer echoed in `x-operation-id`; null elsewhere. */
  operation_id: string | null;
  usage?: ActivityUsage;
}

export const ACTIVITY_FIELDS = [
  'id', 'at_ms', 'organization_id', 'actor_kind', 'actor_id', 'source', 'kind', 'method', 'route', 'status', 'outcome',
  'error_code', 'latency_ms', 'file_id', 'file_sha256', 'file_size', 'content_type', 'file_name', 'related',
  'bytes_in', 'bytes_out', 'country', 'request_id', 'operation_id',
] as const satisfies readonly (keyof ActivityRecord)[];
/** Fields beyond the spec's, present only on the events that have them (docs/decisions/ai-usage.md). */
export const ACTIVITY_EXTENSION_FIELDS = ['usage'] as const satisfies readonly (keyof ActivityRecord)[];

const SHA256 = /^[0-9a-f]{64}$/;
/** Keeps one event small whatever a caller sends (a raw path, a file name). */
const MAX_TEXT = 1024;

export function outcomeOf(status: number | null): ActivityRecord['outcome'] {
  if (status === null) return null;
  if (status >= 500) return 'server_error';
  if (status >= 400) return 'client_error';
  return 'success';
}

// ---------- recording ----------

/** The process's recorder: one per process, like the engine. */
export const activityRecorder = new ActivityRecorder();

/** Writes every buffered event (of one engine, or all) and waits for writes in flight. Never throws. */
export async function flushActivity(engine?: Engine): Promise<void> {
  await activityRecorder.flush(engine?.kv).catch((error) => log.error('activity flush failed', { error: String(error) }));
}

let peers: (() => Promise<void>) | undefined;

/**
 * The local runtime with several worker processes registers how to make the other workers flush
 * (through the primary), so that a reader of the log sees every call answered before it, as on AWS
 * where each call's events are written before it returns.
 */
export function onFlushPeers(flushPeers: (() => Promise<void>) | undefined): void {
  peers = flushPeers;
}

/** Before reading the log: this process's buffered events, and every peer's, written. Never throws. */
export async function flushActivityEverywhere(engine: Engine): Promise<void> {
  await Promise.all([flushActivity(engine), peers?.().catch((error) => log.warn('activity flush of other workers failed', { error: String(error) }))]);
}

const text = (v: string | null | undefined) => (typeof v === 'string' ? v.slice(0, MAX_TEXT) : null);
const num = (v: number | null | undefined) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);

function usageOf(u: ActivityUsage | null | undefined): ActivityUsage | null {
  if (!u || typeof u !== 'object') return null;
  const usage: ActivityUsage = { prompt_tokens: count(u.prompt_tokens), completion_tokens: count(u.completion_tokens), total_tokens: count(u.total_tokens), cost_usd: count(u.cost_usd) };
  if (u.audio_seconds !== undefined) usage.audio_seconds = count(u.audio_seconds);
  return usage;
}

/** Who made the call, and which: what every event of a call shares. */
export interface ActivityCaller extends CallInfo {
  principal: Principal;
  requestId?: string | null;
  /** AI calls only (the API whose calls have operation ids, spec 4.1). */
  operationId?: string | null;
}

/**
 * The caller of a call's events. A literal, not `{...call, principal}`: this runs on every call, and
 * V8 cloned the spread on its slow path (3.5 µs a call, measured in-process on GET /v1/models).
 * The ids are the request's log ids: those the chain's principal carries (Principal.logIds), else a
 * consumer's or a Lambda invocation's (shared/log.ts).
 */
export const activityCaller = (principal: Principal, call: CallInfo, ids: Readonly<LogContext> | undefined = principal.logIds ?? logContext()): ActivityCaller => {
  return {
    principal,
    api: call.api,
    method: call.method,
    route: call.route,
    country: call.country ?? null,
    requestId: ids?.request_id ?? null,
    operationId: call.api === 'ai' ? (ids?.operation_id ?? null) : null,
  };
};

/** Builds an event's row (in ACTIVITY_COLUMNS order) and where it goes. */
export function activityEntry(caller: ActivityCaller, event: ActivityEvent, atMs: number): ActivityEntry {
  const { principal } = caller;
  // Monotonic: events recorded in one millisecond keep their order.
  const id = `act_${monotonicUlid(atMs)}`;
  const status = num(event.status);
  const sha = typeof event.file_sha256 === 'string' && SHA256.test(event.file_sha256) ? event.file_sha256 : null;
  let related: ActivityRelated | null = null;
  if (event.related) {
    related = { database: text(event.related.database), collection_id: text(event.related.collection_id), record_id: text(event.related.record_id) };
    if ((related.database ?? related.collection_id ?? related.record_id) === null) related = null;
  }
  const country = caller.country;
  const usage = usageOf(event.usage);
  const row: EventRow = [
    id,
    atMs,
    principal.kind,
    principal.userId ?? principal.credentialId,
    caller.api,
    event.kind,
    caller.method,
    text(caller.route),
    status,
    outcomeOf(status),
    text(event.error_code),
    num(event.latency_ms),
    text(event.file_id),
    sha,
    num(event.file_size),
    text(event.content_type),
    text(event.file_name),
    related,
    num(event.bytes_in),
    num(event.bytes_out),
    typeof country === 'string' && /^[A-Za-z]{2}$/.test(country) ? country.toUpperCase() : null,
    // Not part of the answer: lets an application-bound credential see only its application's activity.
    principal.applicationId,
    usage as unknown as KvValue,
    text(caller.requestId),
    text(caller.operationId),
  ];
  // An upper bound of the stored size: UTF-8 takes at most 3 bytes per UTF-16 unit.
  let bytes = usage ? 160 : 64;
  for (const value of row) bytes += typeof value === 'string' ? 3 * value.length + 3 : 24;
  if (related) bytes += 3 * ((related.database?.length ?? 0) + (related.collection_id?.length ?? 0) + (related.record_id?.length ?? 0)) + 64;
  return {
    pk: activityPartition(principal.organizationId, activityDay(atMs)),
    key: activitySortKey(atMs, id),
    at: atMs,
    organizationId: principal.organizationId,
    row,
    filePk: sha ? activityFilePartition(principal.organizationId, sha) : null,
    bytes,
  };
}

/** The answer shape of a stored event: the spec's fields, in the spec's order. */
export function activityRecordOf(stored: StoredEvent): ActivityRecord {
  const out: Record<string, unknown> = {};
  for (const field of ACTIVITY_FIELDS) out[field] = stored[field] ?? null;
  for (const field of ACTIVITY_EXTENSION_FIELDS) if (stored[field] !== undefined && stored[field] !== null) out[field] = stored[field];
  return out as unknown as ActivityRecord;
}

/** Records an event for the calling principal; never throws, never delays the call. */
export function recordActivity(engine: Engine, caller: ActivityCaller, event: ActivityEvent): void {
  try {
    activityRecorder.add(engine.kv, activityEntry(caller, event, engine.clock.now()));
  } catch (error) {
    log.error('activity event not recorded', { kind: event?.kind, error: String(error) });
  }
}

/**
 * Records an event a call's answer promises (an AI call's usage): resolves once it is written, so the
 * caller answers after it (segments.ts `addDurable`, docs/decisions/ai-usage.md). On AWS the chain
 * writes a call's events before it returns (http/middleware/activity.ts): buffered as any event there.
 * Never throws.
 */
export function recordActivityDurably(engine: Engine, caller: ActivityCaller, event: ActivityEvent): Promise<void> {
  try {
    const entry = activityEntry(caller, event, engine.clock.now());
    if (engine.name !== 'aws') return activityRecorder.addDurable(engine.kv, entry);
    activityRecorder.add(engine.kv, entry);
  } catch (error) {
    log.error('activity event not recorded', { kind: event?.kind, error: String(error) });
  }
  return Promise.resolve();
}
