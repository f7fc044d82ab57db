import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, collectionOperation } from '../../../knowledge/collections.js';
import { deleteItem } from '../../../knowledge/items.js';

/** DELETE /v1/collections/{id}/items/{item_id} (docs/ai/collections.md, "Items"): its chunks leave every query at once; once per X-Operation-Id. */
export const handler = idempotentHandler('ai.collections.items.delete', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const { id, item_id: itemId } = req.params;
  return operation.answer(collectionOperation(engine, principal, `/v1/collections/${id}/items/${itemId}`), () => deleteItem(engine, principal, id, itemId));
});
