import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { openVectorDatabase, whileOpen } from '../../../vector/databases.js';
import { removeDocument } from '../../../vector/handling.js';
import { vectorOperation } from '../../../vector/operations.js';

/** DELETE /v1/vector/documents/{document_id}?scope= (docs/ai/vector.md); once per X-Operation-Id. */
export const handler = idempotentHandler('ai.vector.documents.delete', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  const database = await openVectorDatabase(engine, principal);
  return operation.answer(vectorOperation(engine, principal, '/v1/vector/documents', undefined), () => whileOpen(engine, database, () => removeDocument(engine, principal, database, req.params.document_id, req.query)));
});
