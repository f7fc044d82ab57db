import type { KvItem, KvValue, KvWrite } from './ports.js';
import { LIMITS } from './limits.js';
import { EngineLimitError } from './errors.js';

/** Size of a value as DynamoDB counts it (see "Item sizes and formats" in the DynamoDB guide). */
function valueSize(value: KvValue): number {
  if (value === null || typeof value === 'boolean') return 1;
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  if (typeof value === 'number') {
    const digits = String(Math.abs(value)).replace(/[.e+-]/g, '').replace(/^0+/, '').length || 1;
    return Math.ceil(digits / 2) + 1;
  }
  if (Array.isArray(value)) return 3 + value.reduce<number>((n, v) => n + 1 + valueSize(v), 0);
  return 3 + Object.entries(value).reduce<number>((n, [k, v]) => n + 1 + Buffer.byteLength(k, 'utf8') + valueSize(v), 0);
}

export function itemSize(item: KvItem): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) {
    if (value === undefined) continue;
    size += Buffer.byteLength(name, 'utf8') + valueSize(value);
  }
  return size;
}

export function assertItemSize(item: KvItem): void {
  const size = itemSize(item);
  if (size > LIMITS.itemBytes) {
    throw new EngineLimitError('item_size', `item ${item.pk}/${item.sk} is ${size} bytes, over ${LIMITS.itemBytes}`);
  }
}

/** The checks DynamoDB makes on a TransactWriteItems request before running it. */
export function assertTransactionShape(writes: KvWrite[]): void {
  if (writes.length === 0 || writes.length > LIMITS.transactionItems) {
    throw new EngineLimitError('transaction_items', `a transaction holds 1 to ${LIMITS.transactionItems} writes, got ${writes.length}`);
  }
  const seen = new Set<string>();
  let bytes = 0;
  for (const w of writes) {
    const key = writeKey(w);
    const id = `${key.pk}\u0000${key.sk}`;
    if (seen.has(id)) {
      throw new EngineLimitError('transaction_duplicate_item', `two writes in one transaction name ${key.pk}/${key.sk}`);
    }
    seen.add(id);
    if ('put' in w) {
      assertItemSize(w.put);
      bytes += itemSize(w.put);
    } else if ('update' in w) {
      bytes += itemSize({ ...w.update, ...(w.set as Record<string, KvValue>) });
    } else {
      bytes += itemSize(key as KvItem);
    }
  }
  if (bytes > LIMITS.transactionBytes) {
    throw new EngineLimitError('transaction_size', `transaction is ${bytes} bytes, over ${LIMITS.transactionBytes}`);
  }
}

export function writeKey(w: KvWrite) {
  return 'put' in w ? { pk: w.put.pk, sk: w.put.sk } : 'update' in w ? w.update : 'delete' in w ? w.delete : w.check;
}
