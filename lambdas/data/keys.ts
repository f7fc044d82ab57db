/**
 * Where the Data API keeps things in the key-value store. One organization's data never shares a
 * partition with another's: every key starts with the organization id taken from the credential.
 *
 *   org#<org> / db#<database>                      database
 *   db#<org>#<database> / col#<collection>         collection (schema, rules)
 *   rec#<org>#<database>#<collection> / <id>       record
 *   uniq#<org>#<database>#<collection>#<field>@<gen> / <value>        unique guard -> record id
 *     gsi1: recc#<org>#<database>#<collection> / <created_at>#<id>   the record by creation time
 *     gsi2: recu#<org>#<database>#<collection> / <updated_at>#<id>   the record by its last write
 *   idx#<org>#<database>#<collection>#<field>@<gen> / <value>#<id>    index entry (indexed fields, and blob
 *                                                   fields: which records reference a file, blob-rules.ts)
 *   arrivals#<org>#<database> / <sha256>.<gen>     a file sent straight to the blob store, not yet checked (blobs.ts)
 *   dchg#<shard> / <ulid>#<random>                 a write's platform events not yet published (change-outbox.ts;
 *                                                   shared partitions, so the sweeper reads a fixed set)
 * A field's generation (the schema_version that added it) is part of its guard and index partitions,
 * so dropping a field drops its guards and entries at once and re-adding it starts clean.
 */
export const databaseKey = (org: string, database: string) => ({ pk: `org#${org}`, sk: `db#${database}` });
export const databasesPrefix = (org: string) => ({ pk: `org#${org}`, prefix: 'db#' });
export const collectionKey = (org: string, database: string, collection: string) => ({ pk: `db#${org}#${database}`, sk: `col#${collection}` });
export const recordPartition = (org: string, database: string, collection: string) => `rec#${org}#${database}#${collection}`;
export const recordKey = (org: string, database: string, collection: string, id: string) => ({ pk: recordPartition(org, database, collection), sk: id });
/** The record times a list may sort by, and the generic index that orders a collection's records by each. */
export const RECORD_TIME_INDEXES = { created_at: 'gsi1', updated_at: 'gsi2' } as const;
export type RecordTime = keyof typeof RECORD_TIME_INDEXES;
export const recordTimePartition = (org: string, database: string, collection: string, time: RecordTime) =>
  `${time === 'created_at' ? 'recc' : 'recu'}#${org}#${database}#${collection}`;
/**
 * A record item's index keys: its times are ISO 8601 with milliseconds, one length, so the key's
 * order is time order and ties go by id.
 */
export const recordTimeKeys = (org: string, database: string, collection: string, meta: { id: string; created_at: string; updated_at: string }) => ({
  gsi1pk: recordTimePartition(org, database, collection, 'created_at'),
  gsi1sk: `${meta.created_at}#${meta.id}`,
  gsi2pk: recordTimePartition(org, database, collection, 'updated_at'),
  gsi2sk: `${meta.updated_at}#${meta.id}`,
});
export const uniquePartition = (org: string, database: string, collection: string, field: string, generation: number) =>
  `uniq#${org}#${database}#${collection}#${field}@${generation}`;
export const indexPartition = (org: string, database: string, collection: string, field: string, generation: number) =>
  `idx#${org}#${database}#${collection}#${field}@${generation}`;
/**
 * Blob store key of a record body too large for one item: one per write (`nonce`), not just per
 * version, so a write that loses its transaction and deletes its body never deletes the winner's.
 */
export const recordBodyKey = (org: string, database: string, collection: string, id: string, version: number, nonce: string) =>
  `records/${org}/${encodeURIComponent(database)}/${collection}/${id}/${version}.${nonce}.json`;
/** Blob store key of a file (content-addressed, per database). */
export const blobKey = (org: string, database: string, sha256: string) => `blobs/${org}/${encodeURIComponent(database)}/${sha256}`;
/** Metadata of a stored blob (its existence is what `blob` fields are checked against). */
export const blobMetaKey = (org: string, database: string, sha256: string) => ({ pk: `blobs#${org}#${database}`, sk: sha256 });
/**
 * A file on its way to the blob store through a URL (a body too big for the runtime: blobs.ts,
 * "arrivals"): sk `<sha256>.<gen>`, `gen` naming the key its URL writes (arrivalBytesKey).
 */
export const arrivalKey = (org: string, database: string, sha256: string, gen: string) => ({ pk: `arrivals#${org}#${database}`, sk: `${sha256}.${gen}` });
/**
 * Blob store key an arrival's URL writes to: never a key metadata names (the URL stays usable for its
 * lifetime), so what it holds is copied under the file's own generation key once checked.
 */
export const arrivalBytesKey = (org: string, database: string, sha256: string, gen: string) => `arrivals/${org}/${encodeURIComponent(database)}/${sha256}.${gen}`;
export const arrivalsOf = (org: string, database: string, sha256: string) => ({ pk: `arrivals#${org}#${database}`, prefix: `${sha256}.` });
/** A multipart upload (sk `<upload_id>`) and its parts (sk `<upload_id>#part#<n, 5 digits>`). */
export const uploadKey = (org: string, database: string, uploadId: string, part?: number) =>
  ({ pk: `uploads#${org}#${database}`, sk: part === undefined ? uploadId : `${uploadId}#part#${String(part).padStart(5, '0')}` });
