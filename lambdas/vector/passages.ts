/**
 * An ingest call's body (spec 4.6, "Vector passage"): the whole-call checks answer 400; a passage that
 * cannot be stored is set aside with one reason of SKIP_REASONS and the others go on
 * (docs/ai/vector.md, "Ingest").
 */
import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse } from '../shared/validate.js';
import type { VectorMetadata } from '../engine/ports.js';
import type { ScopeName } from './keys.js';

/** Why a passage was not stored: the fixed list an ingest answer's `skipped[].reason` takes. */
export const SKIP_REASONS = ['passage_too_large', 'invalid_id', 'invalid_text', 'invalid_metadata', 'stale_generation', 'document_deleted', 'duplicate_in_call'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/** An entry of an ingest answer's `skipped`: a passage not stored, and why. */
export const skippedSchema = onFirstUse(() =>
  z
    .strictObject({
      index: z.int().check(z.describe('The passage\'s position in `documents`.')),
      id: z.nullable(z.string()).check(z.describe('Its id; null when it had no string id.')),
      reason: z.enum(SKIP_REASONS).check(
        z.describe(
          '`invalid_id`, `invalid_text`, `invalid_metadata`, `passage_too_large` (id + text + metadata over 10 KiB), `duplicate_in_call` (the earlier of two passages with one id; the later is stored), `stale_generation` (below the document\'s generation), `document_deleted` (at or below the generation the document was deleted at).',
        ),
      ),
      message: z.optional(z.string().check(z.describe('`invalid_metadata`: what is wrong, naming the key (quoted as JSON, shortened to 80 characters).'))),
      param: z.optional(z.string().check(z.describe('`invalid_metadata`: the field at fault, as an error\'s `param` names it (`documents.3.metadata.tag`).'))),
    })
    .check(z.meta({ id: 'VectorSkip' })),
);
export type Skipped = z.output<ReturnType<typeof skippedSchema>>;

/** The metadata keys filters take (spec 2). */
export const FILTERABLE_KEYS = ['kind', 'source', 'category', 'tag', 'language', 'created_at'] as const;
export type FilterableKey = (typeof FILTERABLE_KEYS)[number];

export const MAX_DOCUMENTS = 100;
export const MAX_PASSAGE_BYTES = 10 * 1024;
export const MAX_ID_BYTES = 256;
/** The filterable keys of one passage together, as JSON: what S3 Vectors filters on (2 KiB less our scope key). */
export const MAX_FILTERABLE_BYTES = 1536;
export const MAX_GENERATION = Number.MAX_SAFE_INTEGER;

export interface Passage {
  /** Position in the call's `documents`. */
  index: number;
  id: string;
  text: string;
  metadata: Record<string, string | number | boolean | string[]>;
  document_id: string | null;
  /** As sent; null: the document's current generation (1 for a new document). */
  generation: number | null;
  /** id + text + metadata as JSON, in UTF-8 bytes. */
  bytes: number;
  /** SHA-256 of the text, hex: what a document's content hash is made of. */
  text_sha256: string;
}

export interface IngestRequest {
  scope: ScopeName;
  passages: Passage[];
  skipped: Skipped[];
}

const PASSAGE_FIELDS = new Set(['id', 'text', 'metadata', 'document_id', 'generation', 'content_sha256']);
const TOP_FIELDS = new Set(['scope', 'documents']);
const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/**
 * Whether UTF-8 can carry the string: a lone surrogate (JSON's "\ud800") is stored as U+FFFD by
 * DynamoDB and S3 Vectors, so two ids differing only there would become one passage.
 */
export const wellFormed = (s: string) => !/\p{Cs}/u.test(s);

/** Why metadata was refused: the key at fault (none: the metadata as a whole) and what is wrong with it. */
interface MetadataFault {
  key: string | null;
  message: string;
}

/** A key as a message quotes it: JSON, so an empty key, a control character or a lone surrogate shows as such. */
const quoted = (key: string) => JSON.stringify(key.length > 80 ? `${key.slice(0, 80)}…` : key);

/** A metadata key: 1 to 64 characters of Unicode. */
const validKey = (key: string) => key.length >= 1 && key.length <= 64 && wellFormed(key);

/** Flat metadata: strings, finite numbers (-0 kept as 0), booleans, arrays of strings; else the first fault. */
function flatMetadata(value: unknown): { metadata: Passage['metadata'] } | { fault: MetadataFault } {
  const fault = (key: string | null, message: string) => ({ fault: { key, message } });
  if (value === undefined) return { metadata: {} };
  if (!isObject(value)) return fault(null, 'metadata is a JSON object of keys to strings, numbers, booleans or arrays of strings.');
  // No prototype: a key named `__proto__` is a key like any other.
  const out: Passage['metadata'] = Object.create(null);
  for (const [key, v] of Object.entries(value)) {
    if (key.length === 0 || key.length > 64) return fault(key, `metadata key ${quoted(key)} is ${key.length} characters; a key is 1 to 64.`);
    if (!wellFormed(key)) return fault(key, `metadata key ${quoted(key)} is not Unicode (it holds a lone surrogate).`);
    if ((typeof v === 'string' && wellFormed(v)) || typeof v === 'boolean') out[key] = v;
    else if (typeof v === 'string') return fault(key, `metadata ${quoted(key)} is not Unicode (it holds a lone surrogate).`);
    else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return fault(key, `metadata ${quoted(key)} is not a finite number.`);
      out[key] = v === 0 ? 0 : v;
    } else if (Array.isArray(v) && v.every((x) => typeof x === 'string' && wellFormed(x))) out[key] = [...v];
    else if (Array.isArray(v)) return fault(key, `metadata ${quoted(key)} is an array of something other than Unicode strings; an array holds strings only.`);
    else return fault(key, `metadata ${quoted(key)} is ${v === null ? 'null' : typeof v === 'object' ? 'an object' : typeof v}; metadata is flat: a string, a finite number, a boolean or an array of strings.`);
  }
  return { metadata: out };
}

/** The bytes metadata adds to a passage: its JSON, or nothing when it has no key (absent metadata costs nothing). */
export const metadataBytes = (metadata: Passage['metadata']) => (Object.keys(metadata).length ? utf8(JSON.stringify(metadata)) : 0);

/** The filterable part of a passage's metadata, as the index stores it. */
export function filterableOf(metadata: Passage['metadata']): VectorMetadata {
  const out: VectorMetadata = {};
  for (const key of FILTERABLE_KEYS) if (Object.hasOwn(metadata, key)) out[key] = metadata[key];
  return out;
}

/**
 * The ingest body as the document describes it (spec 4.6, "Vector passage"). parseIngestRequest reads
 * it by hand, because a passage's own faults (its id, text, metadata, size) are skips in a 200 answer,
 * not a 400: those fields take any JSON value here, and the descriptions say what is stored.
 */
export const ingestRequestSchema = onFirstUse(() =>
  z.strictObject({
    scope: z.enum(['shared', 'local']).check(z.describe('`shared`: every key of the workspace sees it; `local`: only the key (or OAuth client) that writes it.')),
    documents: z
      .array(
        z
          .strictObject({
            id: z.optional(
              z.unknown().check(z.describe('Required: a string of 1 to 256 bytes (UTF-8), Unicode. The same id in the same scope replaces the passage. A passage without a valid one is skipped (`invalid_id`), not refused.')),
            ),
            text: z.optional(z.unknown().check(z.describe('Required: a string that is not only white space. Anything else is skipped (`invalid_text`). With id and metadata at most 10 KiB (`passage_too_large`).'))),
            metadata: z.optional(
              z.unknown().check(
                z.describe(
                  `An object of flat values: strings, finite numbers, booleans, arrays of strings; keys of 1 to 64 characters. Filterable keys: ${FILTERABLE_KEYS.join(', ')} (together at most ${MAX_FILTERABLE_BYTES} bytes as JSON). Anything else is skipped (\`invalid_metadata\`).`,
                ),
              ),
            ),
            document_id: z.optional(
              z.nullable(z.string().check(z.minLength(1), z.maxLength(MAX_ID_BYTES), z.describe('Groups passages into one document, deleted or replaced as a whole: 1 to 256 bytes.'))),
            ),
            generation: z.optional(
              z.nullable(
                z.int().check(z.minimum(1), z.describe('With `document_id` only: a higher generation replaces the document\'s passages; the same adds to it; absent joins its current one.')),
              ),
            ),
            content_sha256: z.optional(z.string().check(z.regex(/^[0-9a-f]{64}$/), z.describe('64 lowercase hex characters; checked, not stored.'))),
          })
          .check(z.meta({ id: 'VectorPassage' })),
      )
      .check(z.minLength(1), z.maxLength(MAX_DOCUMENTS)),
  }),
);

/**
 * The body: `400 invalid_body` for what is wrong with the call as a whole (not an object, `scope`,
 * `documents` not an array of 1 to 100 objects, a document field of the wrong shape), `400
 * unsupported_field` for a field the endpoint does not take; each passage's own faults are skips.
 */
export function parseIngestRequest(body: unknown): IngestRequest {
  if (!isObject(body)) throw new PlatformError('invalid_body', 'The body is a JSON object with `scope` and `documents`.');
  for (const key of Object.keys(body)) if (!TOP_FIELDS.has(key)) throw new PlatformError('unsupported_field', `Unknown field "${key}".`, key);
  if (body.scope !== 'shared' && body.scope !== 'local') throw new PlatformError('invalid_body', 'scope is "shared" or "local".', 'scope');
  const documents = body.documents;
  if (!Array.isArray(documents) || documents.length < 1 || documents.length > MAX_DOCUMENTS) {
    throw new PlatformError('invalid_body', `documents is an array of 1 to ${MAX_DOCUMENTS} passages.`, 'documents');
  }
  const passages: Passage[] = [];
  const skipped: Skipped[] = [];
  documents.forEach((doc, index) => {
    const param = `documents.${index}`;
    if (!isObject(doc)) throw new PlatformError('invalid_body', 'Each passage is a JSON object.', param);
    for (const key of Object.keys(doc)) if (!PASSAGE_FIELDS.has(key)) throw new PlatformError('unsupported_field', `Unknown passage field "${key}".`, `${param}.${key}`);
    const { id, text, document_id, generation, content_sha256 } = doc;
    if (document_id !== undefined && document_id !== null && (typeof document_id !== 'string' || utf8(document_id) < 1 || utf8(document_id) > MAX_ID_BYTES || !wellFormed(document_id))) {
      throw new PlatformError('invalid_body', `document_id is a string of 1 to ${MAX_ID_BYTES} bytes.`, `${param}.document_id`);
    }
    if (generation !== undefined && generation !== null && !(Number.isSafeInteger(generation) && (generation as number) >= 1)) {
      throw new PlatformError('invalid_body', 'generation is a whole number from 1.', `${param}.generation`);
    }
    if (generation !== undefined && generation !== null && (document_id === undefined || document_id === null)) {
      throw new PlatformError('invalid_body', 'generation needs a document_id: it is the generation of that document.', `${param}.generation`);
    }
    if (content_sha256 !== undefined && (typeof content_sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(content_sha256))) {
      throw new PlatformError('invalid_body', 'content_sha256 is 64 lowercase hex characters.', `${param}.content_sha256`);
    }
    const idText = typeof id === 'string' ? id : null;
    const skip = (reason: SkipReason, fault?: MetadataFault) =>
      // A key that is not a key (not Unicode, or past 64 characters) is named in the message only
      // (escaped and shortened there), not in param: a skip stays small, so the answer is kept under its operation id.
      skipped.push({ index, id: idText, reason, ...(fault ? { message: fault.message, param: fault.key === null || !validKey(fault.key) ? `${param}.metadata` : `${param}.metadata.${fault.key}` } : {}) });
    if (idText === null || utf8(idText) < 1 || utf8(idText) > MAX_ID_BYTES || !wellFormed(idText)) return skip('invalid_id');
    if (typeof text !== 'string' || text.trim().length === 0 || !wellFormed(text)) return skip('invalid_text');
    const flat = flatMetadata(doc.metadata);
    if ('fault' in flat) return skip('invalid_metadata', flat.fault);
    const { metadata } = flat;
    const filterable = filterableOf(metadata);
    const filterableBytes = utf8(JSON.stringify(filterable));
    if (filterableBytes > MAX_FILTERABLE_BYTES) {
      const keys = Object.keys(filterable);
      const largest = keys.reduce((a, b) => (utf8(JSON.stringify(filterable[b])) > utf8(JSON.stringify(filterable[a])) ? b : a));
      return skip('invalid_metadata', {
        key: largest,
        message: `The filterable metadata keys (${keys.map(quoted).join(', ')}) are ${filterableBytes} bytes as JSON, over ${MAX_FILTERABLE_BYTES}; the largest is ${quoted(largest)}.`,
      });
    }
    const bytes = utf8(idText) + utf8(text) + metadataBytes(metadata);
    if (bytes > MAX_PASSAGE_BYTES) return skip('passage_too_large');
    passages.push({
      index,
      id: idText,
      text,
      metadata,
      document_id: typeof document_id === 'string' ? document_id : null,
      generation: typeof generation === 'number' ? generation : null,
      bytes,
      text_sha256: createHash('sha256').update(text, 'utf8').digest('hex'),
    });
  });
  // Of two passages with one id, the later is stored: the earlier is set aside.
  const last = new Map<string, number>();
  for (const p of passages) last.set(p.id, p.index);
  const kept = passages.filter((p) => {
    if (last.get(p.id) === p.index) return true;
    skipped.push({ index: p.index, id: p.id, reason: 'duplicate_in_call' });
    return false;
  });
  skipped.sort((a, b) => a.index - b.index);
  return { scope: body.scope, passages: kept, skipped };
}

/**
 * A document's `content_sha256` (docs/ai/vector.md): SHA-256 over its passages in ascending order of
 * their ids' UTF-8 bytes, each as `<SHA-256 of its id, hex>\n<SHA-256 of its text, hex>\n` (hashes, not
 * the id itself: an id may hold a newline, and two documents must never hash alike).
 */
export function contentSha256(members: readonly { id: string; text_sha256: string }[]): string {
  const sorted = [...members].sort((a, b) => Buffer.compare(Buffer.from(a.id, 'utf8'), Buffer.from(b.id, 'utf8')));
  const hash = createHash('sha256');
  for (const m of sorted) hash.update(`${createHash('sha256').update(m.id, 'utf8').digest('hex')}\n${m.text_sha256}\n`, 'utf8');
  return hash.digest('hex');
}
