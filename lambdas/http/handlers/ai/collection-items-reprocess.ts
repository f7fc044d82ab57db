import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, collectionOperation } from '../../../knowledge/collections.js';
import { reprocessItem } from '../../../knowledge/items.js';
import { parseBody } from '../../../shared/validate.js';
import { emptyBodySchema } from '../../../knowledge/item-packages.js';

/** POST /v1/collections/{id}/items/{item_id}/reprocess {} (docs/ai/collections.md, "Items"): 202, a new package; once per X-Operation-Id. */
export const handler = idempotentHandler('ai.collections.items.reprocess', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  parseBody(emptyBodySchema(), req.json ?? {}, { unknownField: 'unsupported_field' });
  const { id, item_id: itemId } = req.params;
  return operation.answer(collectionOperation(engine, principal, `/v1/collections/${id}/items/${itemId}/reprocess`), async () => ({ ...(await reprocessItem(engine, principal, id, itemId)) }), 202);
});
