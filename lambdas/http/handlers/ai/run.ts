import { httpHandler } from '../../handler.js';
import { prepareRun } from '../../../ai/run.js';
import { onceForOperation } from './answers.js';

/** POST /v1/run (spec 4.5; docs/ai/run.md): a generic run or a decision run, by the route `model` names; once per X-Operation-Id. */
export const handler = httpHandler('ai.run', async (req, { engine, principal, operationId }) => {
  const run = await prepareRun(engine, principal, req.json, req.body.toString('utf8'));
  return onceForOperation(engine, principal, operationId!, run.holdRoute, run.work);
});
