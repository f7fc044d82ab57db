/**
 * LangChain.js over the platform's AI API, on @langchain/core's own base classes:
 * - `PlatformVectorStore` (VectorStore) over `/v1/vector/ingest`, `/v1/vector/query` and
 *   `DELETE /v1/vector/documents/{id}`: the platform embeds server-side with the route the workspace's
 *   database was created with, so the store adds and searches **by text**;
 * - `PlatformEmbeddings` (Embeddings) over `/v1/embeddings`;
 * - `CollectionRetriever` (BaseRetriever) over `POST /v1/collections/{id}/query`: cited chunks.
 * Errors are thrown as the client's `PlatformApiError` (status, code, message, param). README.md beside this file.
 */
import type { CallbackManagerForRetrieverRun, Callbacks } from '@langchain/core/callbacks/manager';
import { Document, type DocumentInterface } from '@langchain/core/documents';
import { Embeddings, type EmbeddingsInterface, type EmbeddingsParams } from '@langchain/core/embeddings';
import { BaseRetriever, type BaseRetrieverInput } from '@langchain/core/retrievers';
import { VectorStore } from '@langchain/core/vectorstores';
import {
  deleteVectorDocument,
  PlatformApiError,
  queryCollection,
  unwrap,
  vectorIngest,
  vectorQuery,
  type AiClient,
  type CollectionIndexing,
  type CollectionMatch,
  type VectorFilter,
  type VectorPassage,
  type VectorSkip,
} from '../src/index.js';

export { PlatformApiError };

type Scope = 'shared' | 'local';
type FilterValue = string | number | boolean;
/** A metadata value the platform stores: strings, finite numbers, booleans, arrays of strings (docs/ai/vector.md). */
export type FlatValue = string | number | boolean | string[];

/**
 * The platform's filter (docs/ai/vector.md, "Filters") over its filterable keys (`kind`, `source`,
 * `category`, `tag`, `language`, `created_at`): a value is equality, `{$in: [...]}` any of them; an
 * array is taken as `$in` too. A passage without the key never matches.
 */
export type PlatformVectorFilter = { [K in keyof VectorFilter]?: VectorFilter[K] | FilterValue[] };

/** The platform's filter from a LangChain one: arrays become `$in`, undefined keys are left out. */
export function toPlatformFilter(filter: PlatformVectorFilter | undefined): VectorFilter | undefined {
  if (!filter) return undefined;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(filter)) if (value !== undefined) out[key] = Array.isArray(value) ? { $in: value } : value;
  return Object.keys(out).length ? (out as VectorFilter) : undefined;
}

/**
 * A LangChain document's metadata as the platform takes it, flat: nested objects become dotted keys
 * (`loc.lines.from`, as text splitters write them), dates ISO strings, arrays of strings stay, other
 * arrays become strings (their primitives each as a string, else as JSON), null, undefined, non-finite
 * numbers and functions are left out.
 */
export function flattenMetadata(metadata: Record<string, unknown> | undefined): Record<string, FlatValue> {
  const out: Record<string, FlatValue> = {};
  const visit = (key: string, value: unknown): void => {
    if (value === null || value === undefined) return;
    if (typeof value === 'string' || typeof value === 'boolean') out[key] = value;
    else if (typeof value === 'number') {
      if (Number.isFinite(value)) out[key] = value;
    } else if (typeof value === 'bigint') out[key] = value.toString();
    else if (value instanceof Date) {
      if (!Number.isNaN(value.getTime())) out[key] = value.toISOString();
    } else if (Array.isArray(value)) {
      if (value.every((v) => typeof v === 'string')) out[key] = value;
      else if (value.every((v) => ['number', 'boolean', 'bigint'].includes(typeof v) || typeof v === 'string')) out[key] = value.map(String);
      else out[key] = JSON.stringify(value);
    } else if (typeof value === 'object') for (const [k, v] of Object.entries(value)) visit(key ? `${key}.${k}` : k, v);
  };
  visit('', metadata ?? {});
  return out;
}

/** Passages the platform did not store (docs/ai/vector.md, the skip reasons); the others were stored. */
export class PlatformIngestError extends Error {
  override readonly name = 'PlatformIngestError';
  constructor(
    /** Each skipped passage, `index` into the documents given to `addDocuments`. */
    readonly skipped: VectorSkip[],
    /** How many passages were stored. */
    readonly ingested: number,
    /** The ids of the documents given, in order (stored or not). */
    readonly ids: string[],
  ) {
    super(`${skipped.length} of ${ids.length} documents were not stored: ${skipped.map((s) => `${s.id ?? `#${s.index}`} ${s.reason}${s.message ? ` (${s.message})` : ''}`).join('; ')}`);
  }
}

export interface PlatformVectorStoreArgs {
  /** `createAiClient({baseUrl: <ai_url>, credential: <key>})` from the typed client. */
  client: AiClient;
  /** Where `addDocuments` writes: `shared` (every key of the workspace, the default) or `local` (only this key). */
  scope?: Scope;
  /** What searches read: `shared`, `local`, or `hybrid` (both, merged by score); default the `scope`. */
  mode?: Scope | 'hybrid';
  /** A rerank profile of the organization: searches then use `vector_rerank` with it. */
  rerankProfile?: string;
  /**
   * Only for LangChain's base class, which holds one: the store never calls it, as the platform embeds
   * passages and queries with its database's route. Default: `PlatformEmbeddings` over the same client.
   */
  embeddings?: EmbeddingsInterface;
}

export interface PlatformAddOptions {
  /** The passages' ids, one per document; else each document's `id`, else its `metadata.id`, else a new UUID. The same id in the same scope replaces the passage. */
  ids?: string[];
  /** This call's scope instead of the store's. */
  scope?: Scope;
  /**
   * The platform document every passage of this call joins (e.g. the source file's name), deleted as
   * one by `delete({ids: [documentId]})`; default: each passage is a document of its own, its id.
   */
  documentId?: string;
  /**
   * The document's generation (a whole number from 1): a higher one replaces the document's passages
   * whole when the call commits. A document deleted at generation g takes passages again only above g.
   */
  generation?: number;
}

/** The platform takes 1 to 100 passages a call. */
const INGEST_BATCH = 100;
const BY_TEXT = 'searches and embeds by text on the platform, with the route its vector database was created with';

/**
 * A LangChain `VectorStore` over the workspace's vector database (docs/ai/vector.md). Add documents and
 * search by text: the platform embeds both with its database's route, so vectors of two models are
 * never mixed, and `addVectors` / `similaritySearchVectorWithScore` throw.
 */
export class PlatformVectorStore extends VectorStore {
  declare FilterType: PlatformVectorFilter;
  readonly client: AiClient;
  readonly scope: Scope;
  readonly mode: Scope | 'hybrid';
  readonly rerankProfile?: string;

  _vectorstoreType(): string {
    return 'platform';
  }

  constructor(args: PlatformVectorStoreArgs) {
    // The serializable settings only: the client holds a credential.
    super(args.embeddings ?? new PlatformEmbeddings({ client: args.client }), { scope: args.scope, mode: args.mode, rerankProfile: args.rerankProfile });
    this.client = args.client;
    this.scope = args.scope ?? 'shared';
    this.mode = args.mode ?? this.scope;
    this.rerankProfile = args.rerankProfile;
  }

  /**
   * Stores the documents (their `pageContent` as text, their metadata flattened: `flattenMetadata`),
   * 100 to a call, each call once per operation id. Answers their ids. A document the platform skips
   * (invalid metadata, too large, a deleted document's generation) is not stored: after every call,
   * a `PlatformIngestError` lists them; the others are stored.
   */
  async addDocuments(documents: DocumentInterface[], options: PlatformAddOptions = {}): Promise<string[]> {
    if (options.ids && options.ids.length !== documents.length) throw new RangeError(`${options.ids.length} ids for ${documents.length} documents`);
    const ids = documents.map((doc, i) => options.ids?.[i] ?? doc.id ?? (typeof doc.metadata?.id === 'string' ? doc.metadata.id : undefined) ?? crypto.randomUUID());
    const passages: VectorPassage[] = documents.map((doc, i) => {
      const metadata = flattenMetadata(doc.metadata);
      return {
        id: ids[i],
        text: doc.pageContent,
        document_id: options.documentId ?? ids[i],
        ...(options.generation !== undefined ? { generation: options.generation } : {}),
        ...(Object.keys(metadata).length ? { metadata } : {}),
      };
    });
    const skipped: VectorSkip[] = [];
    let ingested = 0;
    for (let start = 0; start < passages.length; start += INGEST_BATCH) {
      const answer = await vectorIngest(this.client, { scope: options.scope ?? this.scope, documents: passages.slice(start, start + INGEST_BATCH) });
      ingested += answer.ingested;
      // duplicate_in_call: the later passage of the same id was stored.
      skipped.push(...answer.skipped.filter((s) => s.reason !== 'duplicate_in_call').map((s) => ({ ...s, index: s.index + start })));
    }
    if (skipped.length) throw new PlatformIngestError(skipped, ingested, ids);
    return ids;
  }

  addVectors(): Promise<string[]> {
    return Promise.reject(new Error(`PlatformVectorStore ${BY_TEXT}: add documents with addDocuments, not vectors`));
  }

  similaritySearchVectorWithScore(): Promise<[DocumentInterface, number][]> {
    return Promise.reject(new Error(`PlatformVectorStore ${BY_TEXT}: search with similaritySearch or similaritySearchWithScore, not a vector`));
  }

  /** The `k` passages closest to `query` (1 to 50), best first, as documents: `id`, `pageContent` the text, `metadata` as stored. */
  override async similaritySearch(query: string, k = 4, filter?: PlatformVectorFilter, _callbacks?: Callbacks): Promise<DocumentInterface[]> {
    return (await this.similaritySearchWithScore(query, k, filter)).map(([doc]) => doc);
  }

  /** As `similaritySearch`, each with its score: the cosine similarity (higher is closer), or the reranker's relevance with `rerankProfile`. */
  override async similaritySearchWithScore(query: string, k = 4, filter?: PlatformVectorFilter, _callbacks?: Callbacks): Promise<[DocumentInterface, number][]> {
    const platformFilter = toPlatformFilter(filter);
    const answer = await vectorQuery(this.client, {
      mode: this.mode,
      query,
      top_k: k,
      ...(platformFilter ? { filter: platformFilter } : {}),
      ...(this.rerankProfile ? { retrieval: 'vector_rerank' as const, rerank_profile: this.rerankProfile } : {}),
    });
    return answer.matches.map((m) => [new Document({ id: m.id, pageContent: m.text, metadata: m.metadata }), m.score]);
  }

  /**
   * Deletes platform documents by id: a passage added without `documentId` is a document of its own
   * id. A document never added (or deleted already) is no error. Later adds of a deleted document are
   * taken only at a higher `generation` (the platform remembers it).
   */
  override async delete(params: { ids: string[]; scope?: Scope }): Promise<void> {
    for (const id of params.ids) {
      try {
        await deleteVectorDocument(this.client, id, params.scope ?? this.scope);
      } catch (error) {
        if (!(error instanceof PlatformApiError && error.code === 'document_not_found')) throw error;
      }
    }
  }

  static override async fromTexts(texts: string[], metadatas: object[] | object, embeddings: EmbeddingsInterface, args: PlatformVectorStoreArgs): Promise<PlatformVectorStore> {
    const docs = texts.map((pageContent, i) => new Document({ pageContent, metadata: (Array.isArray(metadatas) ? metadatas[i] : metadatas) as Record<string, unknown> }));
    return PlatformVectorStore.fromDocuments(docs, embeddings, args);
  }

  static override async fromDocuments(docs: DocumentInterface[], embeddings: EmbeddingsInterface, args: PlatformVectorStoreArgs): Promise<PlatformVectorStore> {
    const store = new PlatformVectorStore({ ...args, embeddings });
    await store.addDocuments(docs);
    return store;
  }
}

export interface PlatformEmbeddingsArgs extends EmbeddingsParams {
  client: AiClient;
  /** An embeddings route id of the organization; default its default embeddings route (`auto`). */
  model?: string;
  /** Texts per call (the platform takes up to 2,048; default 512). */
  batchSize?: number;
}

/** LangChain `Embeddings` over the platform's OpenAI-compatible `/v1/embeddings` (its routes, limits and usage records). */
export class PlatformEmbeddings extends Embeddings {
  readonly client: AiClient;
  readonly model?: string;
  readonly batchSize: number;

  constructor(args: PlatformEmbeddingsArgs) {
    const { client, model, batchSize, ...params } = args;
    super(params);
    this.client = client;
    this.model = model;
    this.batchSize = batchSize ?? 512;
  }

  async embedDocuments(texts: string[]): Promise<number[][]> {
    const vectors: number[][] = [];
    for (let start = 0; start < texts.length; start += this.batchSize) vectors.push(...(await this.embed(texts.slice(start, start + this.batchSize))));
    return vectors;
  }

  async embedQuery(text: string): Promise<number[]> {
    return (await this.embed([text]))[0];
  }

  private async embed(input: string[]): Promise<number[][]> {
    // Each try is a new request with a new X-Operation-Id (createAiClient's): an embedding has no effect to repeat.
    const list = await this.caller.call(async () => unwrap(await this.client.POST('/v1/embeddings', { body: { input, ...(this.model ? { model: this.model } : {}) } })));
    return [...list.data].sort((a, b) => a.index - b.index).map((d) => (typeof d.embedding === 'string' ? fromBase64(d.embedding) : d.embedding));
  }
}

/** A base64 embedding: little-endian float32s (OpenAI's `encoding_format: base64`). */
function fromBase64(text: string): number[] {
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  return Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(i * 4, true));
}

/** What a `CollectionRetriever`'s documents carry: the match's score and its citation (docs/ai/collections.md, "Query"). */
export interface CollectionMatchMetadata extends Record<string, unknown> {
  score: number;
  citation: CollectionMatch['citation'];
}

export interface CollectionRetrieverInput extends BaseRetrieverInput {
  client: AiClient;
  /** A `cloud` or `local_vectors` collection (`col_…`). */
  collectionId: string;
  /** Chunks per query, 1 to 20 (the platform's default 5). */
  topK?: number;
  /** `local_vectors` collections only: embeds the query with your model (the collection's dimensions); no text leaves for an upstream. */
  embeddings?: EmbeddingsInterface;
  /** Told each query's `indexing`: whether the answer covered every item (`complete`), and what it skipped. */
  onIndexing?: (indexing: CollectionIndexing) => void;
}

/**
 * A LangChain retriever over a knowledge collection's query: each match a document whose
 * `pageContent` is the chunk's text and whose metadata is `{score, citation}` (its item, package,
 * chunk and `locator`: a page, a heading path, lines or a time range).
 */
export class CollectionRetriever extends BaseRetriever<CollectionMatchMetadata> {
  lc_namespace = ['platform', 'retrievers', 'collection'];
  readonly client: AiClient;
  readonly collectionId: string;
  readonly topK?: number;
  readonly embeddings?: EmbeddingsInterface;
  readonly onIndexing?: (indexing: CollectionIndexing) => void;

  constructor(fields: CollectionRetrieverInput) {
    const { client, collectionId, topK, embeddings, onIndexing, ...base } = fields;
    super(base);
    this.client = client;
    this.collectionId = collectionId;
    this.topK = topK;
    this.embeddings = embeddings;
    this.onIndexing = onIndexing;
  }

  override async _getRelevantDocuments(query: string, _runManager?: CallbackManagerForRetrieverRun): Promise<DocumentInterface<CollectionMatchMetadata>[]> {
    const vector = this.embeddings ? await this.embeddings.embedQuery(query) : undefined;
    const answer = await queryCollection(this.client, this.collectionId, { query, ...(this.topK ? { top_k: this.topK } : {}), ...(vector ? { vector } : {}) });
    this.onIndexing?.(answer.indexing);
    return answer.matches.map(
      (m) => new Document<CollectionMatchMetadata>({ id: `${m.citation.item_id}/${m.citation.chunk_id}`, pageContent: m.text, metadata: { score: m.score, citation: m.citation } }),
    );
  }
}
