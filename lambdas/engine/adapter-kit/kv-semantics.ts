/** Pieces of key-value semantics that both adapters share (cursor encoding, update application, expiry). */
import type { KvItem, KvUpdate } from '../ports.js';
import { InvalidCursorError } from '../../shared/cursors.js';

export function encodeCursor(key: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

export function decodeCursor(cursor: string): Record<string, string> {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    // A cursor is a key: attribute names to strings, nothing else (a number or an object would reach the store's query as is).
    if (value && typeof value === 'object' && !Array.isArray(value) && Object.values(value).every((v) => typeof v === 'string')) return value;
  } catch {
    // fall through
  }
  throw new InvalidCursorError();
}

/** What an UpdateItem does to the stored item (or to an empty one with the key). */
export function applyUpdate(existing: KvItem | undefined, u: Pick<KvUpdate, 'update' | 'set' | 'add' | 'remove'>): KvItem {
  const next: KvItem = { ...(existing ?? {}), pk: u.update.pk, sk: u.update.sk };
  for (const [k, v] of Object.entries(u.set ?? {})) if (v !== undefined) next[k] = v;
  for (const [k, n] of Object.entries(u.add ?? {})) {
    const current = next[k];
    next[k] = (typeof current === 'number' ? current : 0) + n;
  }
  for (const k of u.remove ?? []) delete next[k];
  return next;
}

/** Unix seconds an item is invisible from, if it has an expiry. */
export function isExpired(item: Record<string, unknown>, nowMs: number): boolean {
  return typeof item.expires_at === 'number' && item.expires_at * 1000 <= nowMs;
}
