import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, readCollection } from '../../../knowledge/collections.js';
import { addItem, addItemOperation, fileToAdd, parseAddItem } from '../../../knowledge/items.js';

/**
 * POST /v1/collections/{id}/items {upload_id} or {text, filename} (docs/ai/collections.md, "Items"):
 * 202 with the queued item, once per X-Operation-Id; the same id with another file is 409 operation_id_reused.
 */
export const handler = idempotentHandler('ai.collections.items.create', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const id = req.params.id;
  // A collection that is gone says so before the body is looked at.
  await readCollection(engine, principal, id);
  const file = await fileToAdd(engine, principal, parseAddItem(req.json));
  return operation.answer(addItemOperation(engine, principal, id, file), async (running) => ({ ...(await addItem(engine, principal, id, file, (answer) => running.completionWrite(answer))) }), 202);
});
