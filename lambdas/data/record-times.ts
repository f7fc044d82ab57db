/**
 * The time indexes of an older collection: records written before record items carried their time
 * keys (keys.ts, recordTimeKeys) are in neither, so a list sorted by created_at or updated_at would
 * miss them and is refused (record-reads.ts) until this backfill has run: it gives every record of
 * the collection its keys, then marks the collection (`time_keys`). Idempotent; run after every
 * instance writes the keys (a record an older instance writes meanwhile would lack them again).
 */
import type { Engine } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import { collectionKey, recordPartition, recordTimeKeys } from './keys.js';
import { collectionNotFound } from './collections.js';

export async function backfillTimeKeys(engine: Engine, org: string, database: string, collection: string): Promise<{ records: number; updated: number }> {
  const { kv } = engine;
  if (!(await kv.get(collectionKey(org, database, collection)))) throw collectionNotFound(collection);
  let records = 0;
  let updated = 0;
  let cursor: string | undefined;
  do {
    const page = await kv.query({ pk: recordPartition(org, database, collection), limit: 100, cursor });
    for (const item of page.items) {
      records++;
      const keys = recordTimeKeys(org, database, collection, { id: String(item.id), created_at: String(item.created_at), updated_at: String(item.updated_at) });
      if (Object.entries(keys).every(([k, v]) => item[k] === v)) continue;
      try {
        // Only the version read: a write since then wrote its own keys; a delete left nothing to index.
        await kv.update({ key: { pk: item.pk, sk: item.sk }, set: keys, condition: { ifEquals: { version: item.version as number, updated_at: String(item.updated_at) } } });
        updated++;
      } catch (error) {
        if (!(error instanceof ConditionFailedError)) throw error;
      }
    }
    cursor = page.cursor;
  } while (cursor);
  await kv.update({ key: collectionKey(org, database, collection), set: { time_keys: true }, condition: { ifExists: true } });
  return { records, updated };
}
