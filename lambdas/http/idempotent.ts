/**
 * Idempotent routes: the HTTP shape of the operation block (shared/operations.ts). A route declares
 * its rules where its handler is built, `idempotentHandler(routeId, rules, fn)`, as Powertools'
 * makeHandlerIdempotent is declared on a handler; the handler gets the request's operation id and
 * an `operation` that claims it once the call is known (body parsed, route resolved: an invalid body
 * answers its 400 and claims nothing). docs/decisions/idempotency.md.
 */
import { createHash } from 'node:crypto';
import type { KvUpdate, KvValue } from '../engine/ports.js';
import { log } from '../shared/log.js';
import { claimOperation, type KeptAnswer, type OperationCall, type OperationRules } from '../shared/operations.js';
import { API_POLICIES } from './chain.js';
import { httpHandler, type RouteFunction } from './handler.js';
import { OPERATION_ID_METHODS, operationIdSent } from './middleware/operation-id.js';
import { routeById, type RouteDef } from './routes.js';
import type { HttpRequest, HttpResponse, RequestScope } from './types.js';

const JSON_TYPE = { 'content-type': 'application/json' };

/** A kept answer, replayed: spec 4.1's `x-idempotent-replay: true`. */
export const replayed = (answer: KeptAnswer<unknown>): HttpResponse => ({ status: answer.status, headers: { ...JSON_TYPE, 'x-idempotent-replay': 'true' }, body: answer.body as object });

/** What a run may do with its claim beyond returning its answer. */
export interface RunningOperation {
  /**
   * The write that keeps `body` as the answer, for the service's own `kv.transact([...])` beside the
   * write the operation consists of: both apply or neither. The answer is then not kept again.
   */
  completionWrite(body: object): KvUpdate;
}

/** An answer's status, fixed or told by the answer. */
export type AnswerStatus = number | ((body: object) => number);
const statusOf = (status: AnswerStatus, body: object) => (typeof status === 'function' ? status(body) : status);

export type HeldOperation = { kind: 'replay'; response: HttpResponse } | { kind: 'held'; release(): Promise<void> };

export interface IdempotentOperation {
  /** The request's X-Operation-Id. */
  readonly id: string;
  /**
   * Answers once per id: a kept answer is replayed (`x-idempotent-replay: true`); otherwise `work`
   * runs and its answer is kept before it leaves (so a replay sent the moment the caller has it finds
   * it, on any instance), with `status` (or the status it gives for the answer: a call that may end
   * `202`); an error is never kept and lets the id go.
   */
  answer<C>(call: OperationCall<C>, work: (running: RunningOperation) => Promise<object>, status?: AnswerStatus): Promise<HttpResponse>;
  /**
   * Holds the id while an answer that is never kept (a stream) is made: `release` lets it go (call it
   * before the last event, and on failure). A kept answer is replayed instead.
   */
  hold<C>(call: OperationCall<C>): Promise<HeldOperation>;
}

/** What the handler of an idempotent route receives: the scope with the operation id, required. */
export type OperationScope = RequestScope & { operationId: string; operation: IdempotentOperation };
export type OperationRouteHandler = (req: HttpRequest, scope: OperationScope) => Promise<HttpResponse>;

/**
 * httpHandler() for a route whose answers are kept per operation id under `rules`. The route must be
 * a write of an API that requires operation ids (API_POLICIES): one that is not stops at cold start.
 */
export function idempotentHandler(routeOrId: string | RouteDef, rules: OperationRules, handle: OperationRouteHandler): RouteFunction {
  const route = typeof routeOrId === 'string' ? routeById(routeOrId) : routeOrId;
  if (!API_POLICIES[route.api].operationIds || !OPERATION_ID_METHODS.has(route.method)) {
    throw new Error(`route ${route.id}: idempotentHandler() needs a write of an API that requires operation ids`);
  }
  return httpHandler(route, (req, scope) => {
    const operationId = scope.operationId;
    if (!operationId) throw new Error(`route ${route.id}: the chain set no operation id`);
    const operation = operationIdSent(req) ? operationOf(rules, req, scope, operationId) : unnamedOperation(operationId);
    return handle(req, { ...scope, operationId, operation });
  });
}

function operationOf(rules: OperationRules, req: HttpRequest, scope: RequestScope, id: string): IdempotentOperation {
  // Under `same` rules a call names no request of its own: the JSON body, else the bytes' hash.
  const withRequest = <C>(call: OperationCall<C>): OperationCall<C> =>
    rules.requests === 'same' && call.request === undefined ? { ...call, request: (req.json as KvValue) ?? createHash('sha256').update(req.body).digest('hex') } : call;
  return {
    id,
    async answer(call, work, status = 200) {
      const claim = await claimOperation(scope.engine, rules, id, withRequest(call));
      if (claim.kind === 'replay') return replayed(claim.answer);
      let keptInTransaction = false;
      let body: object;
      try {
        body = await work({
          completionWrite: (kept) => {
            keptInTransaction = true;
            return claim.completionWrite({ status: statusOf(status, kept), body: kept as KvValue });
          },
        });
      } catch (error) {
        await claim.abandon();
        throw error;
      }
      // Serialized once, for the kept record and the answer alike (an embeddings answer is large).
      const json = JSON.stringify(body);
      // A record that cannot be kept is logged; the call stands (the id lapses with its hold).
      if (!keptInTransaction) {
        await claim.complete({ status: statusOf(status, body), body: body as KvValue }, json).catch((error) => log.error('idempotent answer not kept', { ...scope.logIds, operation: id, error: String(error) }));
      }
      return { status: statusOf(status, body), headers: JSON_TYPE, body: json };
    },
    async hold(call) {
      const claim = await claimOperation(scope.engine, rules, id, withRequest(call));
      if (claim.kind === 'replay') return { kind: 'replay', response: replayed(claim.answer) };
      return { kind: 'held', release: async () => void (await claim.abandon()) };
    },
  };
}

/**
 * A call that named no operation (an organization whose operation ids are optional): its made-up id
 * names no earlier call, so nothing is claimed, kept or replayed.
 */
function unnamedOperation(id: string): IdempotentOperation {
  return {
    id,
    async answer(_call, work, status = 200) {
      const body = await work({
        completionWrite: () => {
          throw new Error(`operation ${id}: a call that named no operation keeps no answer`);
        },
      });
      return { status: statusOf(status, body), headers: JSON_TYPE, body };
    },
    hold: async () => ({ kind: 'held', release: async () => {} }),
  };
}
