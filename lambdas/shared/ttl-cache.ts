/**
 * The per-process caches of the hot path (credentials, model routes, databases, collections, CORS
 * origins): each entry lives until its own deadline, and the oldest entry makes room when full.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(private readonly maxEntries = 10_000) {}

  /** The value if it is still fresh at `now`. */
  get(key: string, now: number): V | undefined {
    const hit = this.entries.get(key);
    return hit && hit.until > now ? hit.value : undefined;
  }

  set(key: string, value: V, until: number): void {
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, { value, until });
  }

  /** The fresh value, or `load()`'s, kept until `now + ttlMs`. */
  async getOrLoad(key: string, now: number, ttlMs: number, load: () => Promise<V>): Promise<V> {
    const hit = this.get(key, now);
    if (hit !== undefined) return hit;
    const value = await load();
    this.set(key, value, now + ttlMs);
    return value;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }
}
