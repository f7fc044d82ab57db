import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS, aiOperation } from '../../../ai/operations.js';
import { prepareRun } from '../../../ai/run.js';

/** POST /v1/run (spec 4.5; docs/ai/run.md): a generic run or a decision run, by the route `model` names; once per X-Operation-Id. */
export const handler = idempotentHandler('ai.run', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  const run = await prepareRun(engine, principal, req.json, req.body.toString('utf8'));
  return operation.answer(aiOperation(engine, principal, run.holdRoute), run.work);
});
