/**
 * The vector benchmark's embeddings upstream: an OpenAI-compatible `/embeddings` on loopback, in the
 * bench's process, that turns the text `q<i>` into the data set's query vector i (so a query through
 * the platform searches exactly what the library rows search) and any other text into one unit vector
 * (the database's dimensions probe). The bench makes the passages' vectors itself: ingest embeds nothing.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { VectorDataSet } from './vector-data.js';

export interface QueryEmbedder {
  baseUrl: string;
  /** Embeddings calls answered. */
  calls: number;
  close(): Promise<void>;
}

export async function startQueryEmbedder(data: VectorDataSet): Promise<QueryEmbedder> {
  const unit = Array.from({ length: data.dimensions }, (_, j) => (j === 0 ? 1 : 0));
  const vectorOf = (text: string) => {
    const i = /^q(\d+)$/.exec(text)?.[1];
    // A Float32Array's values print as doubles that parse back to the same floats: no recall is lost on the wire.
    return i === undefined ? unit : Array.from(data.query(Number(i)));
  };
  const state = { calls: 0 };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (raw += chunk));
    req.on('end', () => {
      state.calls++;
      const body = JSON.parse(raw || '{}') as { input?: string | string[]; model?: string };
      const inputs = Array.isArray(body.input) ? body.input : [String(body.input ?? '')];
      const answer = JSON.stringify({
        object: 'list',
        model: body.model,
        data: inputs.map((text, index) => ({ object: 'embedding', index, embedding: vectorOf(text) })),
        usage: { prompt_tokens: inputs.length, total_tokens: inputs.length },
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) }).end(answer);
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    get calls() {
      return state.calls;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
