/**
 * An OpenAI-compatible embeddings upstream on loopback whose answer a test scripts: by default the
 * fake embedder's meaningful vectors (fake-embedder.ts), or any raw body and status it is given (the
 * malformed answers a broken or hostile upstream sends).
 */
import http from 'node:http';
import { closeServer, listen } from './servers.js';
import { fakeVector } from './fake-embedder.js';

export interface RawAnswer {
  status?: number;
  contentType?: string;
  body: string;
}

export interface ScriptedEmbedder {
  baseUrl: string;
  /** What the next calls get for their inputs; undefined: the fake embedder's vectors. */
  script: ((inputs: string[]) => RawAnswer) | undefined;
  close(): Promise<void>;
}

/** An embeddings list body of these vectors (any JSON values), as the OpenAI shape has it. */
export const listOf = (vectors: unknown[]) =>
  JSON.stringify({ object: 'list', data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })), model: 'scripted', usage: { prompt_tokens: 1, total_tokens: 1 } });

export async function startScriptedEmbedder(): Promise<ScriptedEmbedder> {
  const state: { script: ScriptedEmbedder['script'] } = { script: undefined };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : {};
      const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
      const answer = state.script?.(inputs) ?? { body: listOf(inputs.map((s) => fakeVector(s))) };
      res.writeHead(answer.status ?? 200, { 'content-type': answer.contentType ?? 'application/json' }).end(answer.body);
    });
  });
  return {
    baseUrl: `${await listen(server)}/v1`,
    get script() {
      return state.script;
    },
    set script(s) {
      state.script = s;
    },
    close: () => closeServer(server),
  };
}
