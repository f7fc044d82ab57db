import { idempotentHandler } from '../../idempotent.js';
import { ModelRoutes } from '../../../ai/model-routes.js';
import { resolveRoute, derivedUserValue } from '../../../ai/chat.js';
import { parseEmbeddingsRequest, shapeEmbeddings } from '../../../ai/embeddings.js';
import { embeddings, withUsageWrites } from '../../../ai/gateway.js';
import { estimateEmbeddings } from '../../../ai/estimate.js';
import { AI_OPERATIONS, aiOperation } from '../../../ai/operations.js';
import type { EmbeddingsBody } from '../../../ai/types.js';

/** POST /v1/embeddings (spec 4.4): one vector per input, in order; float or base64 as OpenAI answers. */
export const handler = idempotentHandler('ai.embeddings', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  const org = principal.organizationId;
  const request = parseEmbeddingsRequest(req.json);
  const route = await resolveRoute(engine, principal, await new ModelRoutes(engine.kv, () => engine.clock.now()).list(org), request.model, '/v1/embeddings');
  const body: EmbeddingsBody = { input: request.inputs, encoding_format: 'float' };
  if (request.dimensions !== undefined) body.dimensions = request.dimensions;
  if (request.user !== undefined) body.user = await derivedUserValue(engine, org, request.user);
  return withUsageWrites({ engine, principal }, (scope) =>
    operation.answer(aiOperation(engine, principal, route), async () =>
      shapeEmbeddings(await embeddings(scope, route, body, estimateEmbeddings(request.inputs)), request.inputs.length, request.encoding_format ?? 'float'),
    ),
  );
});
