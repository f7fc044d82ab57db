/** Answers shared by the AI handlers: a kept answer replayed, an operation run once (ai/operations.ts). */
import { beginOperation, operationContext, type StoredAnswer } from '../../../ai/operations.js';
import type { Principal } from '../../../auth/principal.js';
import { DEFAULT_TIMEOUT_MS, type ModelRoute } from '../../../ai/model-routes.js';
import type { Engine, KvValue } from '../../../engine/ports.js';
import type { HttpResponse } from '../../types.js';
import { log } from '../../../shared/log.js';

const JSON_TYPE = { 'content-type': 'application/json' };
/** How long past the route's timeout a call may hold its operation id (answering, recording). */
const HOLD_MARGIN_SECONDS = 30;

export const replayed = (answer: StoredAnswer): HttpResponse => ({ status: answer.status, headers: { ...JSON_TYPE, 'x-idempotent-replay': 'true' }, body: answer.body as object });

/** How long a call on `route` may hold its operation id. */
export const holdSeconds = (route: ModelRoute) => (route.timeout_ms ?? DEFAULT_TIMEOUT_MS) / 1000 + HOLD_MARGIN_SECONDS;

/** Runs `work` once per operation id: replays a kept answer, keeps a new successful one, keeps no error. */
export async function onceForOperation(engine: Engine, principal: Principal, operationId: string, route: ModelRoute, work: () => Promise<object>): Promise<HttpResponse> {
  const op = await beginOperation(engine, principal, operationId, holdSeconds(route), operationContext(principal, route));
  if (op.kind === 'replay') return replayed(op.answer);
  let body: object;
  try {
    body = await work();
  } catch (error) {
    await op.abandon();
    throw error;
  }
  // Kept before the answer leaves: a replay sent once the caller has the answer, to any worker or
  // instance, finds it (never a 409). A record that cannot be kept is logged; the call stands.
  await op.complete({ status: 200, body: body as KvValue }).catch((error) => log.error('idempotent answer not kept', { operation: operationId, error: String(error) }));
  return { status: 200, headers: JSON_TYPE, body };
}
