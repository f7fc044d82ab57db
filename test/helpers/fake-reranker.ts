/**
 * A fake rerank server on loopback (real HTTP), speaking the Cohere / Jina shape: POST /rerank with
 * `{model, query, documents, top_n}`, answer `{results: [{index, relevance_score}]}`. Its score is
 * how many of the query's words a document holds (ties: the later document first), so tests know the
 * order a rerank must give; results come back worst first, so the caller must sort them.
 */
import http from 'node:http';
import { closeServer, listen } from './servers.js';

export interface FakeRerankRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: { model?: unknown; query?: unknown; documents?: unknown; top_n?: unknown; [k: string]: unknown };
}

export type FakeRerankMode =
  /** A good answer. */
  | 'answer'
  /** 500 with a body that echoes a secret (it must not reach a reason). */
  | 'fail'
  /** No bytes for `slowMs`, then a good answer. */
  | 'slow'
  /** Every document ranked, whatever `top_n` asked (some servers do). */
  | 'ignore-top-n'
  /** Each a malformed answer. */
  | 'not-json'
  | 'no-results'
  | 'index-out-of-range'
  | 'index-repeated'
  | 'score-not-finite'
  | 'score-missing'
  | 'too-few'
  | 'huge';

export interface FakeReranker {
  /** The base URL a profile is given (`/rerank` is appended by the provider). */
  baseUrl: string;
  requests: FakeRerankRequest[];
  mode: FakeRerankMode;
  slowMs: number;
  /** Bytes of the `huge` answer. */
  hugeBytes: number;
  /** Requests the fake saw end because the caller went away before the answer. */
  aborted: number;
  close(): Promise<void>;
}

/** How the fake scores a document: the query's words it contains. */
export function fakeScore(query: string, document: string): number {
  const words = new Set(document.toLowerCase().split(/\W+/).filter(Boolean));
  return query.toLowerCase().split(/\W+/).filter((w) => w && words.has(w)).length;
}

export async function startFakeReranker(): Promise<FakeReranker> {
  const fake: Omit<FakeReranker, 'baseUrl' | 'close'> = { requests: [], mode: 'answer', slowMs: 0, hugeBytes: 9 * 1024 * 1024, aborted: 0 };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const body = raw ? JSON.parse(raw) : {};
      fake.requests.push({ path: req.url ?? '', headers: req.headers, body });
      let closed = false;
      res.on('close', () => {
        if (!res.writableFinished) {
          closed = true;
          fake.aborted++;
        }
      });
      const send = (status: number, payload: string) => {
        if (closed) return;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(payload);
      };
      const documents: string[] = Array.isArray(body.documents) ? body.documents : [];
      const topN = typeof body.top_n === 'number' ? body.top_n : documents.length;
      const ranked = documents
        .map((d, index) => ({ index, relevance_score: fakeScore(String(body.query ?? ''), d) / 10 }))
        .sort((a, b) => b.relevance_score - a.relevance_score || b.index - a.index)
        .slice(0, fake.mode === 'ignore-top-n' ? documents.length : topN);
      // Worst first on purpose: the provider sorts.
      const results = ranked.slice().reverse();
      const answer = (r: unknown) => send(200, JSON.stringify({ id: 'rr-fake', model: body.model, results: r, usage: { total_tokens: 42 } }));
      switch (fake.mode) {
        case 'slow':
          await new Promise((r) => setTimeout(r, fake.slowMs));
          return answer(results);
        case 'fail':
          return send(500, JSON.stringify({ error: { message: 'reranker says no, sk-secret-in-upstream-message' } }));
        case 'not-json':
          return send(200, '<html>gateway</html>');
        case 'no-results':
          return send(200, JSON.stringify({ data: results }));
        case 'index-out-of-range':
          return answer([...results.slice(1), { index: documents.length, relevance_score: 0.9 }]);
        case 'index-repeated':
          // The first result names the last one's document again.
          return answer(results.map((r, i) => (i === 0 ? { ...r, index: results[results.length - 1].index } : r)));
        case 'score-not-finite':
          // JSON has no Infinity; 1e400 parses as one.
          return send(200, `{"results":[${results.map((r, i) => `{"index":${r.index},"relevance_score":${i === 0 ? '1e400' : r.relevance_score}}`).join(',')}]}`);
        case 'score-missing':
          return answer(results.map((r, i) => (i === 0 ? { index: r.index } : r)));
        case 'too-few':
          return answer(results.slice(1));
        case 'huge':
          return answer(results.map((r) => ({ ...r, document: { text: 'x'.repeat(Math.ceil(fake.hugeBytes / Math.max(1, results.length))) } })));
        default:
          return answer(results);
      }
    });
  });
  return Object.assign(fake, { baseUrl: `${await listen(server)}/v1`, close: () => closeServer(server) });
}
