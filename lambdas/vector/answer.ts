/**
 * A vector query's answer (spec 4.7, "Vector match"; docs/ai/vector.md): the query embedded on the
 * database's route, the search, and the rerank when asked, which never fails the query.
 */
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { VECTOR_TOP_K_MAX } from '../engine/ports.js';
import type { ModelRoute } from '../ai/model-routes.js';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse } from '../shared/validate.js';
import type { VectorDatabase } from './types.js';
import { embedTexts } from './embed.js';
import { RERANK_FACTOR, RERANK_OUTCOMES, RETRIEVALS, searchVectors, type Match, type QueryRequest } from './query.js';
import { rerank } from './rerank.js';
import { lookupRerankProfile, type RerankProfile } from './rerank-profiles.js';

/** The answer (spec 2 "Vector match", 4.7): matches best first, and how they were retrieved. */
export const queryAnswerSchema = onFirstUse(() =>
  z.strictObject({
    matches: z.array(
      z
        .strictObject({
          id: z.string(),
          score: z.number().check(z.describe('The cosine similarity (1 the same direction, higher is closer), or after a rerank the reranker\'s relevance.')),
          text: z.string(),
          metadata: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.array(z.string())])).check(z.describe('The passage\'s metadata as ingested.')),
          scope: z.enum(['shared', 'local']),
        })
        .check(z.meta({ id: 'VectorMatch' })),
    ),
    retrieval: z.strictObject({
      mode: z.enum(RETRIEVALS).check(z.describe('The retrieval asked for.')),
      reranked: z.boolean().check(z.describe('Whether the order is the reranker\'s.')),
      profile: z.nullable(z.string()),
      outcome: z.enum(RERANK_OUTCOMES).check(
        z.describe('`none`: no rerank asked; `reranked`; `rerank_failed` or `rerank_timeout`: the reranker failed or was slow, and the vector order stands (a rerank never fails the query).'),
      ),
    }),
  }),
);

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
