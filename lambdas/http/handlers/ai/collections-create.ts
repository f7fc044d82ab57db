import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, collectionOperation, createCollection, parseCreateCollection } from '../../../knowledge/collections.js';

/** POST /v1/collections {mode, name?} (spec 4.9; docs/ai/collections.md): 201 with the new collection, once per X-Operation-Id. */
export const handler = idempotentHandler('ai.collections.create', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const request = parseCreateCollection(req.json);
  return operation.answer(
    collectionOperation(engine, principal, '/v1/collections'),
    async (running) => ({ ...(await createCollection(engine, principal, request, (answer) => running.completionWrite(answer))) }),
    201,
  );
});
