/**
 * A package: one processed version of an item (docs/ai/collections.md, "Packages"), kept as JSON Lines
 * in the blob store: a header line, the document's sections (its text, with locators), then its
 * chunks. It is what `GET .../package` serves as is, what `GET .../chunks` pages through, and what a
 * package's removal reads to know which vectors to delete.
 */
import type { Engine } from '../engine/ports.js';
import type { Section } from './extract/types.js';
import type { Chunk } from './chunks.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { packageBlobKey } from './collection-keys.js';
import { readBytes } from './blob-reads.js';

export interface PackageHeader {
  object: 'package';
  package_id: string;
  item_id: string;
  collection_id: string;
  filename: string;
  content_type: string;
  sha256: string;
  sections: number;
  chunk_count: number;
  created_at: string;
}

export type PackageLine = PackageHeader | ({ object: 'section' } & Section) | ({ object: 'chunk' } & Chunk);

export interface PackageOwner {
  org: string;
  workspace: string;
  collection: string;
  id: string;
}

export const packageKey = (item: PackageOwner, pkg: string) => packageBlobKey(item.org, item.workspace, item.collection, item.id, pkg);

/** Writes the package (a retry of the same package writes the same bytes again). */
export async function writePackage(engine: Engine, item: PackageOwner, header: Omit<PackageHeader, 'object' | 'sections' | 'chunk_count'>, sections: Section[], chunks: Chunk[]): Promise<void> {
  const lines: string[] = [JSON.stringify({ object: 'package', ...header, sections: sections.length, chunk_count: chunks.length } satisfies PackageHeader)];
  for (const s of sections) lines.push(JSON.stringify({ object: 'section', text: s.text, locator: s.locator }));
  for (const c of chunks) lines.push(JSON.stringify({ object: 'chunk', ...c }));
  await engine.blobs.put(packageKey(item, header.package_id), Buffer.from(lines.join('\n') + '\n', 'utf8'));
}

/** The package's bytes as stored (JSON Lines), or undefined when it is gone. */
export const packageBytes = (engine: Engine, item: PackageOwner, pkg: string): Promise<Buffer | undefined> => readBytes(engine, packageKey(item, pkg));

/**
 * Packages read lately, by blob key. A package's bytes never change (a retry writes the same ones), so
 * a client paging through its chunks, or storing their vectors call after call, reads the blob once,
 * not once a call. Only packages up to CACHED_PACKAGE_BYTES are kept, a few at a time.
 */
const recentChunks = new TtlCache<Chunk[]>(8);
const CACHED_PACKAGE_BYTES = 16 * 1024 * 1024;
const CACHE_MS = 60_000;

/** The package's chunks, in order; undefined when it is gone. */
export async function readChunks(engine: Engine, item: PackageOwner, pkg: string): Promise<Chunk[] | undefined> {
  const key = packageKey(item, pkg);
  const cached = recentChunks.get(key, Date.now());
  if (cached) return cached;
  const bytes = await packageBytes(engine, item, pkg);
  if (!bytes) return undefined;
  const chunks: Chunk[] = [];
  for (const line of bytes.toString('utf8').split('\n')) {
    if (!line) continue;
    const parsed = JSON.parse(line) as PackageLine;
    if (parsed.object === 'chunk') chunks.push({ chunk_id: parsed.chunk_id, text: parsed.text, locator: parsed.locator, tokens: parsed.tokens });
  }
  if (bytes.length <= CACHED_PACKAGE_BYTES) recentChunks.set(key, chunks, Date.now() + CACHE_MS);
  return chunks;
}
