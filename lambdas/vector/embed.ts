/**
 * Embedding for the vector database: one batched call through the AI gateway on the database's
 * stamped route (its timeout, the organization's and key's limits, usage records), and the check that
 * the vectors still have the database's dimensions: never a silent mix of models.
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import type { ModelRoute } from '../ai/model-routes.js';
import { embeddings } from '../ai/gateway.js';
import { estimateEmbeddings } from '../ai/estimate.js';
import { shapeEmbeddings } from '../ai/embeddings.js';
import { PlatformError } from '../shared/errors.js';
import type { VectorDatabase } from './types.js';
import type { HeldBudget } from '../ai/limits.js';

export async function embedTexts(engine: Engine, principal: Principal, route: ModelRoute, database: VectorDatabase, texts: string[], signal?: AbortSignal, heldBudget?: HeldBudget): Promise<Float32Array[]> {
  const list = shapeEmbeddings(await embeddings({ engine, principal, signal, heldBudget }, route, { input: texts, encoding_format: 'float' }, estimateEmbeddings(texts)), texts.length, 'float');
  return list.data.map(({ embedding }) => {
    const values = embedding as number[];
    if (values.length !== database.dimensions) {
      throw new PlatformError(
        'upstream_error',
        `The embedding route ${route.id} answered vectors of ${values.length} dimensions; this vector database holds ${database.dimensions}. Its upstream model changed: re-create the vector database (vector-db delete, then vector-db create) to use the new one.`,
      );
    }
    const vector = Float32Array.from(values);
    // JSON's 1e400 parses to Infinity and 1e39 overflows a float: the index takes finite components only.
    if (!vector.every(Number.isFinite)) throw new PlatformError('upstream_error', `The embedding route ${route.id} answered a vector with a component out of the float range.`);
    // Checked as floats: components under the float range (1e-46) are zeros too.
    if (!vector.some((x) => x !== 0)) throw new PlatformError('upstream_error', `The embedding route ${route.id} answered a zero vector, which has no direction to compare.`);
    return vector;
  });
}
