/** A blob read whole (small files: a package, a step's stored result, a transcript of at most 16 MiB). */
import type { Engine } from '../engine/ports.js';

/** The bytes at `key`, or undefined when absent. */
export async function readBytes(engine: Engine, key: string): Promise<Buffer | undefined> {
  const found = await engine.blobs.get(key);
  if (!found) return undefined;
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const part of found.body) {
    parts.push(part as Uint8Array);
    size += (part as Uint8Array).byteLength;
  }
  // One copy, into the result (Buffer.from of each chunk copied them all once more).
  return parts.length === 1 && Buffer.isBuffer(parts[0]) ? parts[0] : Buffer.concat(parts, size);
}

export const readText = async (engine: Engine, key: string): Promise<string | undefined> => (await readBytes(engine, key))?.toString('utf8');

export async function readJson<T>(engine: Engine, key: string): Promise<T | undefined> {
  const text = await readText(engine, key);
  return text === undefined ? undefined : (JSON.parse(text) as T);
}

export const writeJson = (engine: Engine, key: string, value: unknown) => engine.blobs.put(key, Buffer.from(JSON.stringify(value), 'utf8'));
