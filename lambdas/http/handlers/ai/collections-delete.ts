import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, collectionOperation, deleteCollection } from '../../../knowledge/collections.js';

/** DELETE /v1/collections/{id} (docs/ai/collections.md): removes it and its data; once per X-Operation-Id. */
export const handler = idempotentHandler('ai.collections.delete', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const id = req.params.id;
  return operation.answer(collectionOperation(engine, principal, `/v1/collections/${id}`), () => deleteCollection(engine, principal, id));
});
