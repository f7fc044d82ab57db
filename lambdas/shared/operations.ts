/**
 * Operations run once per caller-given id (`X-Operation-Id`): the building block of every idempotent
 * POST, over the idempotency records (idempotency.ts, after Powertools' persistence layer). A claim
 * is a replay of the kept answer, a refusal (409 operation_in_progress while another call holds the
 * id, 409 operation_id_reused for another request under `same` rules), or the right to run; a run then
 * keeps its answer (`complete`, or `completionWrite` inside the service's own transaction) or lets the
 * id go (`abandon`). The HTTP shape is http/idempotent.ts; docs/decisions/idempotency.md.
 */
import type { Clock, KeyValueStore, KvUpdate, KvValue } from '../engine/ports.js';
import { EngineLimitError } from '../engine/errors.js';
import { PlatformError } from './errors.js';
import { fingerprintOf, IdempotencyStore } from './idempotency.js';
import { log } from './log.js';

/** What a family of routes declares once. */
export interface OperationRules {
  /** The records' scope (`ai.op`): ids of different rules never meet. */
  scope: string;
  /** How long a kept answer is replayed, seconds. */
  ttlSeconds: number;
  /**
   * `any`: a reused id replays the kept answer whatever the new request says (spec 4.1: chat,
   * embeddings, run). `same`: a reused id with another request is 409 operation_id_reused (spec 4.1:
   * collection items with another file), checked before anything else, as Powertools validates the
   * payload first.
   */
  requests: 'any' | 'same';
}

/** One call's claim on its id, as the route's service describes it. */
export interface OperationCall<C> {
  /** Who the id belongs to (ids are per organization on the AI API). */
  tenant: string;
  /** How long this call may hold the id before a stalled holder loses it (its timeout plus HOLD_MARGIN_MS). */
  holdSeconds: number;
  /** What the answer answers and who asked (endpoint, route, application, capability...), kept with it. */
  context: C;
  /** Under `same` rules: the request the id names. */
  request?: KvValue;
  /**
   * Before a kept answer is replayed: throws the refusal this caller would get making the kept call
   * itself. `kept` is the kept answer's context, undefined on answers kept without one.
   */
  checkReplay?(kept: C | undefined): Promise<void>;
}

export interface Answer {
  status: number;
  body: KvValue;
}

export interface KeptAnswer<C> extends Answer {
  /** The call that made it (absent on answers kept before it was recorded). */
  context?: C;
}

export type OperationClaim<C> =
  | { kind: 'replay'; answer: KeptAnswer<C> }
  | {
      kind: 'run';
      /**
       * Keeps the answer; one too large for an item is answered, not kept (the id is let go).
       * `bodyJson`: the body as JSON, when the caller made it already for the answer itself.
       */
      complete(answer: Answer, bodyJson?: string): Promise<void>;
      /** The write that keeps the answer, for the service's own `kv.transact([...])`: the effect and its record apply together. */
      completionWrite(answer: Answer): KvUpdate;
      /** Lets the id go, so a retry runs at once; false when it was no longer this call's. */
      abandon(): Promise<boolean>;
    };

/** Every request is the same request under `any` rules; also what AI records kept before the rules carried it. */
const ANY_REQUEST = 'any';

/** Claims `id` for `call` under `rules`. */
export async function claimOperation<C>(engine: { kv: KeyValueStore; clock: Clock }, rules: OperationRules, id: string, call: OperationCall<C>): Promise<OperationClaim<C>> {
  const store = new IdempotencyStore(engine.kv, engine.clock, { scope: rules.scope, ttlSeconds: rules.ttlSeconds, inProgressSeconds: Math.max(1, Math.ceil(call.holdSeconds)) });
  const { tenant, context } = call;
  if (rules.requests === 'same' && call.request === undefined) throw new TypeError(`operations of scope ${rules.scope} need the request`);
  const begun = await store.begin(tenant, id, rules.requests === 'same' ? fingerprintOf(call.request as KvValue) : ANY_REQUEST);
  if (begun.state === 'completed') {
    const answer = begun.answer as unknown as KeptAnswer<C>;
    await call.checkReplay?.(answer.context);
    return { kind: 'replay', answer };
  }
  if (begun.state === 'mismatch') {
    throw new PlatformError('operation_id_reused', 'This X-Operation-Id was used for another request; use a new id for this call.');
  }
  if (begun.state === 'in_progress') {
    throw new PlatformError('operation_in_progress', 'A call with this X-Operation-Id is still running; retry once it has answered.');
  }
  const { token } = begun;
  const kept = (answer: Answer) => ({ ...answer, context }) as unknown as KvValue;
  // The kept answer's JSON around a body already serialized: the same text JSON.stringify(kept(answer)) makes.
  const keptJson = (status: number, bodyJson: string) =>
    context === undefined ? `{"status":${status},"body":${bodyJson}}` : `{"status":${status},"body":${bodyJson},"context":${JSON.stringify(context)}}`;
  return {
    kind: 'run',
    async complete(answer, bodyJson) {
      try {
        await store.complete(tenant, id, token, kept(answer), bodyJson === undefined ? undefined : keptJson(answer.status, bodyJson));
      } catch (error) {
        if (!(error instanceof EngineLimitError)) throw error;
        log.warn('idempotent answer too large to keep', { operation: id });
        await store.abandon(tenant, id, token);
      }
    },
    completionWrite: (answer) => store.completionWrite(tenant, id, token, kept(answer)),
    abandon: () => store.abandon(tenant, id, token),
  };
}
