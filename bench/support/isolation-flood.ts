/**
 * The flooding organization's side of the isolation benchmark (bench/isolation.ts): ordinary Markdown
 * items of about 200 KB (headings over the tests' seeded paragraphs, test/helpers/knowledge-files.ts),
 * added inline (`{text, filename}`) to a `download` collection a few at a time, as the attack did; then
 * waited for through the collection's counts and read back (each item's state and `processed_at`).
 */
import http from 'node:http';
import { paragraphs } from '../../test/helpers/knowledge-files.js';
import { call, op, type Client } from '../../test/helpers/knowledge-calls.js';
import { postBytes } from '../../test/helpers/ai-calls.js';
import { waitFor } from '../../test/helpers/wait.js';

/** An ordinary Markdown file of about `bytes` (200 KB): a title, a second-level heading every 8 paragraphs, the same for the same `seed`. */
export function floodMarkdown(seed: number, bytes = 200_000): string {
  const parts = [`# Field notes ${seed}\n`];
  let size = parts[0].length;
  const texts = paragraphs(Math.ceil(bytes / 500), 6, seed + 1);
  for (let i = 0; size < bytes; i++) {
    const text = i % 8 === 0 ? `## Part ${i / 8 + 1}\n\n${texts[i % texts.length]}\n` : `${texts[i % texts.length]}\n`;
    parts.push(text);
    size += text.length + 1;
  }
  return parts.join('\n');
}

/** The flood's request bodies, made once before any is sent (making them is the bench's CPU, not the flood's). */
export function floodBodies(count: number): string[] {
  return Array.from({ length: count }, (_, i) => JSON.stringify({ text: floodMarkdown(i), filename: `notes-${String(i + 1).padStart(4, '0')}.md` }));
}

export interface FloodSent {
  /** Date.now() before the first add was sent (processed_at is wall time of the same machine). */
  firstAddAt: number;
  /** Date.now() once the last add answered. */
  lastAddAt: number;
  items: string[];
  /** Answers other than 202, by status. */
  refused: Record<string, number>;
}

/** Adds every body to the collection, `concurrency` at once over keep-alive connections. */
export async function sendFlood(c: Client, collection: string, bodies: string[], concurrency = 4): Promise<FloodSent> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const items: string[] = new Array(bodies.length);
  const refused: Record<string, number> = {};
  const url = `${c.url}/v1/collections/${collection}/items`;
  let next = 0;
  const firstAddAt = Date.now();
  const lane = async () => {
    while (next < bodies.length) {
      const i = next++;
      const a = await postBytes(url, bodies[i], { authorization: `Bearer ${c.key}`, 'content-type': 'application/json', 'x-operation-id': op() }, agent);
      if (a.status === 202) items[i] = a.body.item_id;
      else {
        const why = `${a.status} ${a.body?.error?.code ?? ''}`.trim();
        refused[why] = (refused[why] ?? 0) + 1;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, lane));
  } finally {
    agent.destroy();
  }
  return { firstAddAt, lastAddAt: Date.now(), items: items.filter(Boolean), refused };
}

export interface Counts {
  total: number;
  queued: number;
  processing: number;
  done: number;
  failed: number;
}

export const collectionCounts = async (c: Client, collection: string): Promise<Counts> => {
  const r = await call(c, 'GET', `/v1/collections/${collection}`);
  if (r.status !== 200) throw new Error(`GET collection: ${r.status} ${r.text.slice(0, 200)}`);
  return r.body.counts as Counts;
};

/** Waits (a GET of the collection every `everyMs`) until `total` items are in it and none is queued or processing. */
export async function waitSettled(c: Client, collection: string, total: number, timeoutMs: number, everyMs = 500): Promise<Counts> {
  let counts: Counts | undefined;
  await waitFor(
    `${total} items of ${collection} to settle`,
    async () => {
      counts = await collectionCounts(c, collection);
      return counts.total >= total && counts.queued + counts.processing === 0;
    },
    timeoutMs,
    everyMs,
  );
  return counts!;
}

export interface ItemState {
  id: string;
  status: string;
  processedAt?: number;
  error?: { code?: string; message?: string };
}

/** Every item of the collection (pages of 100): its state, processing end and error. */
export async function listItems(c: Client, collection: string): Promise<ItemState[]> {
  const out: ItemState[] = [];
  let cursor: string | null = null;
  do {
    const r = await call(c, 'GET', `/v1/collections/${collection}/items?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (r.status !== 200) throw new Error(`list items: ${r.status} ${r.text.slice(0, 200)}`);
    for (const item of r.body.data) out.push({ id: item.item_id, status: item.status, processedAt: item.processed_at ? Date.parse(item.processed_at) : undefined, error: item.error ?? undefined });
    cursor = r.body.next_cursor;
  } while (cursor);
  return out;
}
