/**
 * `POST /v1/vector/ingest` (spec 4.6; docs/ai/vector.md): what can be stored is embedded in one call
 * and committed as one transaction (ledger.ts); what cannot is listed in `skipped` with its reason.
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import type { ModelRoute } from '../ai/model-routes.js';
import type { VectorDatabase } from './databases.js';
import { embedTexts } from './embed.js';
import { scopeTag } from './keys.js';
import { commitPassages, currentDocuments, decideGenerations } from './ledger.js';
import type { IngestRequest, Skipped } from './passages.js';

export interface IngestAnswer {
  ingested: number;
  skipped: Skipped[];
}

export async function ingestPassages(engine: Engine, principal: Principal, database: VectorDatabase, route: ModelRoute, request: IngestRequest): Promise<IngestAnswer> {
  const tag = scopeTag(request.scope, principal);
  // Passages the commit would refuse are not embedded (it decides again, under the scope's lease).
  const documentIds = request.passages.flatMap((p) => (p.document_id === null ? [] : [p.document_id]));
  const early = documentIds.length ? decideGenerations(request.passages, await currentDocuments(engine, database.database_id, tag, documentIds)).skipped : [];
  const refused = new Set(early.map((s) => s.index));
  const passages = request.passages.filter((p) => !refused.has(p.index));
  let ingested = 0;
  const skipped = [...request.skipped, ...early];
  if (passages.length) {
    const vectors = await embedTexts(engine, principal, route, database, passages.map((p) => p.text));
    const result = await commitPassages(engine, database, request.scope, tag, passages.map((p, i) => ({ ...p, vector: vectors[i] })));
    ingested = result.ingested;
    skipped.push(...result.skipped);
  }
  return { ingested, skipped: skipped.sort((a, b) => a.index - b.index) };
}
