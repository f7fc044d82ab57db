/**
 * A fake OpenAI-compatible embeddings upstream on loopback (real HTTP) whose vectors mean something:
 * each word of a text adds to a few dimensions chosen by its hash, so texts sharing words are close and
 * a text is closest to itself (cosine 1). Tests switch it to fail, stall or change its dimensions.
 */
import http from 'node:http';
import { createHash } from 'node:crypto';
import { closeServer, listen } from './servers.js';

export interface FakeEmbedder {
  baseUrl: string;
  /** The inputs of every embeddings call, in order. */
  calls: string[][];
  behavior: { dimensions: number; status: number; stallMs: number };
  close(): Promise<void>;
}

export const FAKE_DIMENSIONS = 32;

/**
 * Each word's hash, remembered: hashing every word of every text made the fake cost as much CPU as
 * the PDF parser it is measured beside (bench/collections.ts). Bounded: cleared when full.
 */
const wordHashes = new Map<string, Buffer>();
function wordHash(word: string): Buffer {
  let h = wordHashes.get(word);
  if (!h) {
    if (wordHashes.size >= 100_000) wordHashes.clear();
    h = createHash('sha256').update(word).digest();
    wordHashes.set(word, h);
  }
  return h;
}

/** The vector the fake answers for `text`, unnormalized (what a test compares against). */
export function fakeVector(text: string, dimensions = FAKE_DIMENSIONS): number[] {
  const v: number[] = new Array<number>(dimensions).fill(0);
  const words = text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  for (const word of words.length ? words : [text]) {
    const h = wordHash(word);
    for (let k = 0; k < 3; k++) v[h[k] % dimensions] += h[3 + k] & 1 ? 1 : -1;
  }
  if (!v.some((x) => x !== 0)) v[0] = 1;
  return v;
}

export async function startFakeEmbedder(): Promise<FakeEmbedder> {
  const fake = { calls: [] as string[][], behavior: { dimensions: FAKE_DIMENSIONS, status: 200, stallMs: 0 } };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const body = raw ? JSON.parse(raw) : {};
      const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
      fake.calls.push(inputs);
      const b = fake.behavior;
      if (b.stallMs) await new Promise((r) => setTimeout(r, b.stallMs));
      if (res.destroyed) return;
      if (b.status !== 200) return res.writeHead(b.status, { 'content-type': 'application/json' }).end('{"error":{"message":"no"}}');
      const data = inputs.map((s, index) => ({ object: 'embedding', index, embedding: fakeVector(s, b.dimensions) }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: inputs.length * 2, total_tokens: inputs.length * 2 } }));
    });
  });
  return { ...fake, baseUrl: `${await listen(server)}/v1`, close: () => closeServer(server) };
}
