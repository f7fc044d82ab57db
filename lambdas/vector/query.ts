/**
 * `POST /v1/vector/query` (spec 4.7; docs/ai/vector.md): the query is embedded on the database's route,
 * searched in one or both scopes (hybrid: one search over both, so matches merge by score), and
 * optionally reranked. A filtered query returns `top_k` whenever that many visible passages match.
 */
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine, VectorFilter, VectorHit, VectorScalar } from '../engine/ports.js';
import { VECTOR_TOP_K_MAX } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse } from '../shared/validate.js';
import type { VectorDatabase } from './types.js';
import { scopeTag, type ScopeName } from './keys.js';
import { readHead, visibleHits } from './ledger.js';
import { decodePayload } from './payload.js';
import { FILTERABLE_KEYS, wellFormed } from './passages.js';

export const QUERY_MODES = ['local', 'shared', 'hybrid'] as const;
export type QueryMode = (typeof QUERY_MODES)[number];
export const RETRIEVALS = ['vector', 'vector_rerank'] as const;
export type Retrieval = (typeof RETRIEVALS)[number];
/** What became of a rerank: `none` (none asked), `reranked`, or why the vector order stands. */
export const RERANK_OUTCOMES = ['none', 'reranked', 'rerank_failed', 'rerank_timeout'] as const;

export const MAX_QUERY_CHARS = 8000;
export const MAX_TOP_K = 50;
export const DEFAULT_TOP_K = 5;
export const MAX_IN_VALUES = 20;
/** Candidates a rerank sees: top_k × RERANK_FACTOR, at most VECTOR_TOP_K_MAX. */
export const RERANK_FACTOR = 4;

export interface QueryRequest {
  mode: QueryMode;
  query: string;
  top_k: number;
  filter: VectorFilter | undefined;
  retrieval: Retrieval;
  rerank_profile: string | null;
}

export interface Match {
  id: string;
  score: number;
  text: string;
  metadata: Record<string, unknown>;
  scope: ScopeName;
}

/**
 * The query body as the document describes it (spec 4.7). parseQueryRequest reads it by hand: spec 4.7
 * names `invalid_body` for a missing `mode` or `query` and `invalid_field` (with the field) for a value
 * out of its range, which one zod parse does not tell apart.
 */
export const queryRequestSchema = onFirstUse(() => {
  const scalar = z.union([z.string(), z.number(), z.boolean()]);
  const condition = z.union([scalar, z.strictObject({ $in: z.array(scalar).check(z.minLength(1), z.maxLength(MAX_IN_VALUES)) })]);
  return z.strictObject({
    mode: z.enum(QUERY_MODES).check(z.describe('`local`, `shared`, or `hybrid`: both scopes in one search, merged by score.')),
    query: z.string().check(z.minLength(1), z.maxLength(MAX_QUERY_CHARS), z.regex(/\S/), z.describe(`1 to ${MAX_QUERY_CHARS} characters, not only white space.`)),
    top_k: z.optional(z.nullable(z.int().check(z.minimum(1), z.maximum(MAX_TOP_K), z.describe(`1 to ${MAX_TOP_K}, default ${DEFAULT_TOP_K}.`)))),
    filter: z.optional(
      z.nullable(
        z
          .strictObject(Object.fromEntries(FILTERABLE_KEYS.map((key) => [key, z.optional(condition)])))
          .check(
            z.describe(
              `Filterable metadata keys, every one holding: a value (equality), or \`{"$in": [...]}\` with 1 to ${MAX_IN_VALUES} values (any of them). Against an array value (\`tag\`) a condition holds when any element does; a passage without the key never matches.`,
            ),
          ),
      ),
    ),
    retrieval: z.optional(z.nullable(z.enum(RETRIEVALS).check(z.describe('`vector` (the default), or `vector_rerank`: the best `top_k × 4` candidates (at most 100) reranked.')))),
    rerank_profile: z.optional(z.nullable(z.string().check(z.describe('One of the organization\'s rerank profiles: required with `vector_rerank`, refused otherwise.')))),
  });
});

const QUERY_FIELDS = new Set(['mode', 'query', 'top_k', 'filter', 'retrieval', 'rerank_profile']);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const invalid = (param: string, message: string) => new PlatformError('invalid_field', message, param);

function scalar(value: unknown): VectorScalar | undefined {
  if ((typeof value === 'string' && wellFormed(value)) || typeof value === 'boolean') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value === 0 ? 0 : value;
  return undefined;
}

function parseFilter(value: unknown): VectorFilter | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw invalid('filter', 'filter is an object of filterable metadata keys.');
  const filter: VectorFilter = Object.create(null);
  for (const [key, condition] of Object.entries(value)) {
    const param = `filter.${key}`;
    if (!(FILTERABLE_KEYS as readonly string[]).includes(key)) throw invalid(param, `"${key}" is not a filterable key; they are ${FILTERABLE_KEYS.join(', ')}.`);
    if (isObject(condition)) {
      const keys = Object.keys(condition);
      const values = condition.$in;
      if (keys.length !== 1 || keys[0] !== '$in' || !Array.isArray(values) || values.length < 1 || values.length > MAX_IN_VALUES) {
        throw invalid(param, `A condition is a value, or {"$in": [...]} with 1 to ${MAX_IN_VALUES} values.`);
      }
      const scalars = values.map(scalar);
      if (scalars.some((s) => s === undefined)) throw invalid(param, '$in values are strings, finite numbers or booleans.');
      filter[key] = { $in: scalars as VectorScalar[] };
    } else {
      const s = scalar(condition);
      if (s === undefined) throw invalid(param, 'A condition is a string, a finite number, a boolean, or {"$in": [...]}.');
      filter[key] = s;
    }
  }
  return Object.keys(filter).length ? filter : undefined;
}

/** The body: `invalid_body` when it is not an object or lacks `mode` or `query`; `invalid_field` for a value out of its range. */
export function parseQueryRequest(body: unknown): QueryRequest {
  if (!isObject(body)) throw new PlatformError('invalid_body', 'The body is a JSON object with `mode` and `query`.');
  for (const key of Object.keys(body)) if (!QUERY_FIELDS.has(key)) throw new PlatformError('unsupported_field', `Unknown field "${key}".`, key);
  if (body.mode === undefined) throw new PlatformError('invalid_body', 'mode is required: local, shared or hybrid.', 'mode');
  if (body.query === undefined) throw new PlatformError('invalid_body', 'query is required.', 'query');
  if (!(QUERY_MODES as readonly unknown[]).includes(body.mode)) throw invalid('mode', `mode is one of ${QUERY_MODES.join(', ')}.`);
  const query = body.query;
  if (typeof query !== 'string' || query.trim().length === 0 || [...query].length > MAX_QUERY_CHARS || !wellFormed(query)) throw invalid('query', `query is a string of 1 to ${MAX_QUERY_CHARS} characters.`);
  const topK = body.top_k ?? DEFAULT_TOP_K;
  if (!Number.isInteger(topK) || (topK as number) < 1 || (topK as number) > MAX_TOP_K) throw invalid('top_k', `top_k is a whole number from 1 to ${MAX_TOP_K}.`);
  const retrieval = body.retrieval ?? 'vector';
  if (!(RETRIEVALS as readonly unknown[]).includes(retrieval)) throw invalid('retrieval', `retrieval is one of ${RETRIEVALS.join(', ')}.`);
  const profile = body.rerank_profile ?? null;
  if (profile !== null && typeof profile !== 'string') throw invalid('rerank_profile', 'rerank_profile is the name of one of the organization\'s rerank profiles.');
  if (retrieval === 'vector_rerank' && profile === null) throw invalid('rerank_profile', 'retrieval "vector_rerank" needs rerank_profile.');
  if (retrieval !== 'vector_rerank' && profile !== null) throw invalid('rerank_profile', 'rerank_profile goes only with retrieval "vector_rerank".');
  return { mode: body.mode as QueryMode, query, top_k: topK as number, filter: parseFilter(body.filter), retrieval: retrieval as Retrieval, rerank_profile: profile };
}

/** Snapshots a search retries on when a commit lands during it, before answering with the last. */
const SNAPSHOT_ATTEMPTS = 3;

/**
 * The `want` best visible passages for `vector` in the scopes `mode` names, best first. Entries not
 * (or no longer) visible are skipped and more are asked for, so a full answer is given whenever that
 * many visible passages match; a commit during the search starts it over on the new snapshot.
 */
export async function searchVectors(engine: Engine, database: VectorDatabase, principal: Pick<Principal, 'credentialId'>, mode: QueryMode, vector: Float32Array, want: number, filter?: VectorFilter): Promise<Match[]> {
  const scopes: ScopeName[] = mode === 'hybrid' ? ['shared', 'local'] : [mode];
  const tags = scopes.map((s) => scopeTag(s, principal));
  const db = database.database_id;
  const indexFilter: VectorFilter = { ...filter, scope: tags.length === 1 ? tags[0] : { $in: tags } };
  let matches: Match[] = [];
  for (let attempt = 0; attempt < SNAPSHOT_ATTEMPTS; attempt++) {
    const heads = await Promise.all(tags.map((tag) => readHead(engine, db, tag)));
    matches = [];
    for (let topK = Math.min(VECTOR_TOP_K_MAX, want); ; topK = Math.min(VECTOR_TOP_K_MAX, topK * 2)) {
      const hits = await engine.vectors.query(database.index, { vector, topK, filter: indexFilter });
      matches = await visibleMatches(engine, db, tags, heads, hits);
      if (matches.length >= want || hits.length < topK || topK === VECTOR_TOP_K_MAX) break;
    }
    const after = await Promise.all(tags.map((tag) => readHead(engine, db, tag)));
    if (after.every((h, i) => h === heads[i])) break;
  }
  return matches.slice(0, want);
}

async function visibleMatches(engine: Engine, db: string, tags: string[], heads: number[], hits: VectorHit[]): Promise<Match[]> {
  const parsed = hits.map((hit) => ({ hit, payload: decodePayload(hit.payload) }));
  const visible = new Array<boolean>(hits.length).fill(false);
  await Promise.all(
    tags.map(async (tag, t) => {
      const scope: ScopeName = tag === 'shared' ? 'shared' : 'local';
      const mine = parsed.map((p, i) => [p, i] as const).filter(([p]) => p.payload.scope === scope);
      const seen = await visibleHits(engine, db, tag, mine.map(([p]) => ({ key: p.hit.key, id: p.payload.id })), heads[t]);
      mine.forEach(([, i], j) => (visible[i] = seen[j]));
    }),
  );
  return parsed
    .filter((_, i) => visible[i])
    .map(({ hit, payload }) => ({ id: payload.id, score: hit.score, text: payload.text, metadata: payload.metadata, scope: payload.scope }));
}
