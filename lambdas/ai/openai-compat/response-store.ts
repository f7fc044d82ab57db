/**
 * Stored responses (docs/decisions/openai-responses.md): unless `store: false`, a response is kept 24
 * hours as an idempotency record of scope `ai.resp` (lambdas/shared/idempotency.ts), keyed by its id
 * under the organization, its answer `{status, body: the response, context: {application, route,
 * history}}`: what GET /v1/responses/{id} answers and what `previous_response_id` continues. Another
 * organization's id names another key; another application's record is answered as unknown.
 */
import type { Principal } from '../../auth/principal.js';
import type { Engine } from '../../engine/ports.js';
import type { KvValue } from '../../engine/ports.js';
import { PlatformError } from '../../shared/errors.js';
import { IdempotencyStore } from '../../shared/idempotency.js';
import type { ChatMessage } from './response-input.js';

export const RESPONSE_TTL_SECONDS = 24 * 3600;
/**
 * A stored record's JSON at most, in UTF-8 bytes (an item holds 400 KB, and a character may take 3 or 4
 * bytes): a longer conversation is answered, not kept.
 */
export const MAX_STORED_BYTES = 300_000;
const RESPONSE_ID = /^resp_[0-9a-f]{32}$/;

export interface StoredContext {
  application: string | null;
  route: string;
  /** The conversation so far as chat messages: earlier input and answers, without instructions or passages. */
  history: ChatMessage[];
}
export interface StoredResponse {
  status: number;
  body: { id: string; [field: string]: unknown };
  context: StoredContext;
}

const storeOf = (engine: Engine) => new IdempotencyStore(engine.kv, engine.clock, { scope: 'ai.resp', ttlSeconds: RESPONSE_TTL_SECONDS, inProgressSeconds: 1 });
const notFound = (id: string) => new PlatformError('response_not_found', `No response ${JSON.stringify(id.slice(0, 140))} of this application (responses are kept 24 hours unless \`store: false\`).`);

/** The record's JSON when it fits a stored record, else undefined (the caller answers `store: false`). */
export function storedJson(record: StoredResponse): string | undefined {
  const json = JSON.stringify(record);
  return Buffer.byteLength(json) <= MAX_STORED_BYTES ? json : undefined;
}

/** Keeps a response (its id is new, so the claim is always this caller's). */
export async function keepResponse(engine: Engine, principal: Principal, record: StoredResponse, json: string): Promise<void> {
  const store = storeOf(engine);
  const begun = await store.begin(principal.organizationId, record.body.id, 'any');
  if (begun.state !== 'started') throw new Error(`response ${record.body.id} was stored already`);
  await store.complete(principal.organizationId, record.body.id, begun.token, record as unknown as KvValue, json);
}

/** A stored response of the caller's application; 404 response_not_found otherwise. */
export async function readResponse(engine: Engine, principal: Principal, id: string): Promise<StoredResponse> {
  if (!RESPONSE_ID.test(id)) throw notFound(id);
  const kept = (await storeOf(engine).read(principal.organizationId, id)) as StoredResponse | undefined;
  if (!kept?.context || kept.context.application !== principal.applicationId) throw notFound(id);
  return kept;
}

/** The conversation `previous_response_id` continues: 400 invalid_body when it names no stored response of this application. */
export async function previousHistory(engine: Engine, principal: Principal, id: string): Promise<ChatMessage[]> {
  try {
    const kept = await readResponse(engine, principal, id);
    return kept.context.history;
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'response_not_found') {
      throw new PlatformError('invalid_body', `previous_response_id: ${error.message}`, 'previous_response_id');
    }
    throw error;
  }
}

export async function deleteResponse(engine: Engine, principal: Principal, id: string): Promise<{ id: string; object: 'response'; deleted: true }> {
  await readResponse(engine, principal, id);
  if (!(await storeOf(engine).forget(principal.organizationId, id))) throw notFound(id);
  return { id, object: 'response', deleted: true };
}
