import { httpHandler } from '../../handler.js';
import { redirectTo } from '../../redirect.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { openPackage } from '../../../knowledge/item-packages.js';

/**
 * GET /v1/collections/{id}/items/{item_id}/package (docs/ai/collections.md, "Packages and vectors"):
 * the served package as JSON Lines; on AWS one over the runtime's body limit is a 307 to the store.
 */
export const handler = httpHandler('ai.collections.items.package', async (req, { engine, principal, inlineBodyBytes }) => {
  await checkCollectionsEnabled(engine, principal);
  const found = await openPackage(engine, principal, req.params.id, req.params.item_id, inlineBodyBytes);
  if ('url' in found) return redirectTo(found.url!);
  return {
    status: 200,
    headers: { 'content-type': 'application/x-ndjson; charset=utf-8', 'content-length': String(found.size), 'x-package-id': found.package_id },
    body: found.body,
  };
});
