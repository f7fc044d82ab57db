/** The checks both key-value adapters make before a write, as DynamoDB makes them (engine/item-size.ts counts). */
import type { KvItem, KvValue, KvWrite } from '../ports.js';
import { writeKey } from '../ports.js';
import { LIMITS } from '../limits.js';
import { EngineLimitError } from '../errors.js';
import { itemSize, unstorableValue } from '../item-size.js';

/**
 * Returns the item's size, throwing the DynamoDB limit error when it is over 400 KB. Given the item's
 * JSON, a small item is measured by that alone: DynamoDB counts a string or name by its bytes (JSON
 * only adds quotes and escapes) and a number, boolean, null, list or map at most one byte more than
 * its JSON, so the size is below twice the JSON length, and the JSON length is a close, safe estimate.
 */
export function assertItemSize(item: KvItem, json?: string): number {
  for (const name in item) {
    const why = unstorableValue(item[name]);
    if (why) throw new EngineLimitError('item_value', `item ${item.pk}/${item.sk}: ${why}`);
  }
  if (json !== undefined) {
    const bytes = Buffer.byteLength(json);
    if (bytes * 2 <= LIMITS.itemBytes) return bytes;
  }
  const size = itemSize(item);
  if (size > LIMITS.itemBytes) {
    throw new EngineLimitError('item_size', `item ${item.pk}/${item.sk} is ${size} bytes, over ${LIMITS.itemBytes}`);
  }
  return size;
}

/** The checks DynamoDB makes on a TransactWriteItems request before running it; returns each write's size. */
export function assertTransactionShape(writes: KvWrite[], measure: (item: KvItem) => number = (item) => assertItemSize(item)): number[] {
  if (writes.length === 0 || writes.length > LIMITS.transactionItems) {
    throw new EngineLimitError('transaction_items', `a transaction holds 1 to ${LIMITS.transactionItems} writes, got ${writes.length}`);
  }
  const seen = new Set<string>();
  let bytes = 0;
  const sizes: number[] = [];
  for (const w of writes) {
    const key = writeKey(w);
    const id = `${key.pk}\u0000${key.sk}`;
    if (seen.has(id)) {
      throw new EngineLimitError('transaction_duplicate_item', `two writes in one transaction name ${key.pk}/${key.sk}`);
    }
    seen.add(id);
    const size = 'put' in w ? measure(w.put) : 'update' in w ? itemSize({ ...w.update, ...(w.set as Record<string, KvValue>) }) : itemSize(key as KvItem);
    sizes.push(size);
    bytes += size;
  }
  if (bytes > LIMITS.transactionBytes) {
    throw new EngineLimitError('transaction_size', `transaction is ${bytes} bytes, over ${LIMITS.transactionBytes}`);
  }
  return sizes;
}

/** BatchGetItem takes 1 to 100 distinct keys. */
export function assertBatchGetShape(keys: { pk: string; sk: string }[]): void {
  if (keys.length > LIMITS.batchGetItems) {
    throw new EngineLimitError('batch_get_items', `a batch get takes at most ${LIMITS.batchGetItems} keys, got ${keys.length}`);
  }
  if (new Set(keys.map((k) => `${k.pk}\u0000${k.sk}`)).size !== keys.length) {
    throw new EngineLimitError('batch_get_items', 'a batch get names a key twice');
  }
}
