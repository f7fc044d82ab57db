/**
 * `POST /v1/run` (spec 4.5, docs/ai/run.md): the body's `model` names a `/v1/run` route (absent or
 * `auto`: the organization's default one) and the route's provider picks the variant: `http` is a
 * generic run (`input` forwarded unchanged, the upstream's JSON answered), `decision` a decision run
 * (decision/). This module checks the body and prepares the call; the handler runs it once per
 * operation id.
 */
import * as z from 'zod';
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import { memberText } from '../shared/json-member.js';
import { resolveRoute, MAX_INPUT_CHARS } from './chat.js';
import { genericRun } from './gateway.js';
import { DEFAULT_TIMEOUT_MS, ModelRoutes, type ModelRoute } from './model-routes.js';
import { decisionResultSchema, decisionTimeoutMs, runDecision } from './decision/run.js';
import { decisionRequestSchemas, parseDecisionInput, parseEscalate } from './decision/validate.js';

/** The body of either variant; `escalate` only on decision routes. Any other field: 400 unsupported_field. */
const runBodySchema = onFirstUse(() =>
  z
    .object({
      model: z.string().min(1).optional(),
      input: z.unknown().optional(),
      escalate: z.unknown().optional(),
    })
    .strict(),
);

/**
 * The body of each variant as the API documents describe it: the parse's own schema with `input` as
 * each variant checks it (the variant is the route's, known only once `model` is resolved).
 */
export const runRequestSchema = onFirstUse(() => {
  const body = runBodySchema();
  const decision = decisionRequestSchemas();
  const model = z.string().min(1).optional().describe('A `/v1/run` route id of the organization; `auto` or absent: its default run route.');
  return z.union([
    body
      .omit({ escalate: true })
      .extend({ model, input: z.record(z.string(), z.unknown()).describe("Required: a JSON object, forwarded to the route's upstream unchanged.") })
      .describe('A generic run (a route whose provider is `http`).')
      .meta({ id: 'GenericRunRequest' }),
    body
      .extend({ model, input: decision.input, escalate: decision.escalate.optional() })
      .describe('A decision run (a route whose provider is `decision`).')
      .meta({ id: 'DecisionRunRequest' }),
  ]);
});

/** The answer: a decision run's result (decision/run.ts), or a generic run's output, the upstream's JSON object or array as it came (providers/http). */
export const runResultSchema = onFirstUse(() =>
  z.union([
    decisionResultSchema(),
    z.union([z.record(z.string(), z.unknown()), z.array(z.unknown())]).meta({ id: 'GenericRunOutput', description: "A generic run route's output, as its upstream answered it." }),
  ]),
);

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export interface PreparedRun {
  /** The route whose timeout bounds how long the call may hold its operation id. */
  holdRoute: ModelRoute;
  work: () => Promise<object>;
}

/**
 * Checks a run request and returns its call, not yet made. In order: the body's shape (invalid_body,
 * unsupported_field), the route (model_not_allowed), on a decision route the key's `decision`
 * capability (403 capability_not_enabled), then `input` (invalid_input, input_too_large,
 * invalid_decision_input) and `escalate` (invalid_escalate). `bodyText`, the body as sent, is where a
 * generic run's `input` is taken from: it goes upstream as sent, not as parsed and serialized again.
 */
export async function prepareRun(engine: Engine, principal: Principal, rawBody: unknown, bodyText: string): Promise<PreparedRun> {
  if (!isPlainObject(rawBody)) throw new PlatformError('invalid_body', 'The body must be a JSON object.');
  const body = parseBody(runBodySchema(), rawBody, { unknownField: 'unsupported_field' });
  const routes = await new ModelRoutes(engine.kv, () => engine.clock.now()).list(principal.organizationId);
  const route = await resolveRoute(engine, principal, routes, body.model, '/v1/run');
  const decision = route.provider === 'decision';
  if (decision && principal.capabilities !== null && !principal.capabilities.includes('decision')) {
    throw new PlatformError('capability_not_enabled', 'This application has not enabled the "decision" capability.');
  }
  if (!decision && Object.hasOwn(rawBody, 'escalate')) throw new PlatformError('unsupported_field', `Unknown field "escalate": the route "${route.id}" is not a decision route.`, 'escalate');
  const input = body.input;
  if (!isPlainObject(input)) throw new PlatformError('invalid_input', 'input is required and must be a JSON object.', 'input');
  const inputText = memberText(bodyText, 'input') ?? JSON.stringify(input);
  const size = inputText.length;
  if (size > MAX_INPUT_CHARS) throw new PlatformError('input_too_large', `input is ${size} characters of JSON; at most ${MAX_INPUT_CHARS}.`, 'input');
  const scope = { engine, principal };
  if (!decision) return { holdRoute: route, work: () => genericRun(scope, route, inputText) };

  const questions = parseDecisionInput(input);
  const escalation = parseEscalate(body.escalate, route.tiers ?? []);
  return {
    holdRoute: { ...route, timeout_ms: decisionTimeoutMs(route, routes, escalation, DEFAULT_TIMEOUT_MS) },
    work: () => runDecision(scope, route, routes, questions, escalation),
  };
}
