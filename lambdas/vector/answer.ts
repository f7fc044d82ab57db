/**
 * A vector query's answer (spec 4.7, "Vector match"; docs/ai/vector.md): the query embedded on the
 * database's route, the search, and the rerank when asked, which never fails the query.
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { VECTOR_TOP_K_MAX } from '../engine/ports.js';
import type { ModelRoute } from '../ai/model-routes.js';
import { PlatformError } from '../shared/errors.js';
import type { VectorDatabase } from './types.js';
import { embedTexts } from './embed.js';
import { RERANK_FACTOR, searchVectors, type Match, type QueryRequest } from './query.js';
import { rerank } from './rerank.js';
import { lookupRerankProfile, type RerankProfile } from './rerank-profiles.js';

/** The profile a `vector_rerank` query names; an unknown one is `400 invalid_field`. */
export async function rerankProfileOf(engine: Engine, principal: Principal, request: QueryRequest): Promise<RerankProfile | undefined> {
  if (request.rerank_profile === null) return undefined;
  const profile = await lookupRerankProfile(engine, principal.organizationId, request.rerank_profile);
  if (!profile) throw new PlatformError('invalid_field', `No rerank profile "${request.rerank_profile}" in this organization.`, 'rerank_profile');
  return profile;
}

export async function answerQuery(engine: Engine, principal: Principal, database: VectorDatabase, route: ModelRoute, request: QueryRequest, profile: RerankProfile | undefined) {
  const [vector] = await embedTexts(engine, principal, route, database, [request.query]);
  const want = profile ? Math.min(VECTOR_TOP_K_MAX, request.top_k * RERANK_FACTOR) : request.top_k;
  const candidates = await searchVectors(engine, database, principal, request.mode, vector, want, request.filter);
  let matches: Match[] = candidates.slice(0, request.top_k);
  let outcome: 'none' | 'reranked' | 'rerank_failed' | 'rerank_timeout' = 'none';
  if (profile) {
    const reranked = await rerank(engine, principal, profile, request.query, candidates.map((m) => m.text), request.top_k);
    outcome = reranked.outcome;
    if (reranked.outcome === 'reranked') matches = reranked.results.slice(0, request.top_k).map((r) => ({ ...candidates[r.index], score: r.relevance_score }));
  }
  return {
    matches: matches.map((m) => ({ id: m.id, score: m.score, text: m.text, metadata: m.metadata, scope: m.scope })),
    retrieval: { mode: request.retrieval, reranked: outcome === 'reranked', profile: profile?.id ?? null, outcome },
  };
}
