/**
 * `POST /v1/vector/ingest` (spec 4.6; docs/ai/vector.md): what can be stored is embedded in one call
 * and committed as one transaction (ledger.ts); what cannot is listed in `skipped` with its reason.
 */
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import type { ModelRoute } from '../ai/model-routes.js';
import type { VectorDatabase } from './types.js';
import { embedTexts } from './embed.js';
import { scopeTag } from './keys.js';
import { commitPassages, currentDocuments, decideGenerations, type EmbeddedPassage } from './ledger.js';
import { skippedSchema, type IngestRequest } from './passages.js';
import { onFirstUse } from '../shared/validate.js';

/** The answer (spec 4.6): passages stored, and the others in `index` order with their reasons. */
export const ingestAnswerSchema = onFirstUse(() =>
  z.strictObject({ ingested: z.int().check(z.describe('Passages stored.')), skipped: z.array(skippedSchema()).check(z.describe('Passages not stored, in `index` order.')) }),
);
export type IngestAnswer = z.output<ReturnType<typeof ingestAnswerSchema>>;

export async function ingestPassages(engine: Engine, principal: Principal, database: VectorDatabase, route: ModelRoute, request: IngestRequest): Promise<IngestAnswer> {
  const tag = scopeTag(request.scope, principal);
  // Passages the commit would refuse now are not embedded; the commit decides again under the
  // scope's lease, and sends back any it accepts after all (their document changed meanwhile).
  const documentIds = request.passages.flatMap((p) => (p.document_id === null ? [] : [p.document_id]));
  const early = documentIds.length ? decideGenerations(request.passages, await currentDocuments(engine, database.database_id, tag, documentIds)).skipped : [];
  const refused = new Set(early.map((s) => s.index));
  const passages: EmbeddedPassage[] = request.passages.map((p) => ({ ...p }));
  let toEmbed = passages.filter((p) => !refused.has(p.index));
  for (;;) {
    if (toEmbed.length) {
      const vectors = await embedTexts(engine, principal, route, database, toEmbed.map((p) => p.text));
      toEmbed.forEach((p, i) => (p.vector = vectors[i]));
    }
    const result = await commitPassages(engine, database, request.scope, tag, passages);
    if ('embed' in result) {
      const wanted = new Set(result.embed.map((p) => p.index));
      toEmbed = passages.filter((p) => wanted.has(p.index));
      continue;
    }
    return { ingested: result.ingested, skipped: [...request.skipped, ...result.skipped].sort((a, b) => a.index - b.index) };
  }
}
