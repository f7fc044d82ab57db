/**
 * Crash safety of the vector database (docs/decisions/vector-database.md): `npm start` with two
 * workers is killed with SIGKILL, every process at once, while clients ingest through both; after a
 * restart on the same DATA_DIR:
 *
 * - every acknowledged passage is found by a query of its own text (top hit, score 1), once;
 * - an unacknowledged call is all or nothing (its 20 passages are all found or none is);
 * - each document is at its last acknowledged generation or at the one in flight, whole: its 20
 *   passages found, no passage of another generation found, the listing's count is theirs;
 * - the database's passage count is what the queries find;
 * - a further write of the scope recovers what the killed writer left (its lease lapses, its intent
 *   is rolled back or finished), and all of the above still holds after it.
 *
 * Each client alternates a call of 20 standalone passages and a whole new generation (20 passages,
 * half of their ids kept from one generation to the next with new texts) of one of its two documents.
 * Texts are random words, so with the fake embedder each is its own nearest passage (cosine 1). The
 * kill comes once enough calls were acknowledged and a writer's intent is on disk (read beside the
 * server), so it lands inside a write's turn; two cycles of load, kill, restart and checks.
 */
import { afterAll, expect, it } from 'vitest';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { postWithOperation, type Answer } from '../helpers/ai-calls.js';
import { adminAsyncOk, adminOk } from '../helpers/cli.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { intentPk, leaseKey } from '../../lambdas/vector/keys.js';

const CLIENTS = 4;
const PER_CALL = 20;
/** Acknowledged calls before the kill (a short random wait after, so it lands at another point each run). */
const ACKED_BEFORE_KILL = 16;
const CYCLES = 2;

const dataDir = mkdtempSync(join(tmpdir(), 'vector-crash-'));
let server: LocalProcess | undefined;
let embedder: FakeEmbedder | undefined;
let key: string;

afterAll(async () => {
  if (server) await crashLocalProcess(server);
  await embedder?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const start = async () => (server = await startLocalProcess({ DATA_DIR: dataDir, LOCAL_WORKERS: '2' }));
const words = (n: number) => Array.from({ length: n }, () => `w${randomBytes(5).toString('hex')}`).join(' ');
const call = (path: string, body: object) => postWithOperation(server!.urls.ai, key, path, `op-${randomUUID()}`, body);
const ingest = (documents: object[]) => call('/v1/vector/ingest', { scope: 'shared', documents });
const query = (text: string, topK: number) => call('/v1/vector/query', { mode: 'shared', query: text, top_k: topK });

interface Sent {
  id: string;
  text: string;
}
/**
 * A call of standalone passages: acknowledged (200, none skipped), in flight at the kill (its fate
 * unknown until the check after the restart finds all or none of it), or found absent.
 */
interface StandaloneCall {
  passages: Sent[];
  state: 'acked' | 'in-flight' | 'absent';
}
interface Doc {
  id: string;
  /** Per generation sent, its passages. */
  generations: Map<number, Sent[]>;
  /** The last acknowledged generation (after a check: the one found). */
  current: number;
  /** A generation sent and not answered (the kill came first). */
  inFlight: number | null;
}

/** Runs `work` on every item, `width` at a time. */
async function pool<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await work(items[next++]);
  }));
}

/** The top match of a query of `text` (top_k 1), or undefined. */
async function topOf(text: string): Promise<{ id: string; text: string; score: number } | undefined> {
  const a = await query(text, 1);
  expect(a.status, a.text).toBe(200);
  return a.body.matches[0];
}
const isSelf = (top: { id: string; text: string; score: number } | undefined, p: Sent) => top?.id === p.id && top.text === p.text && Math.abs(top.score - 1) < 1e-4;

async function listDocuments(): Promise<Map<string, { generation: number; passages: number }>> {
  const out = new Map<string, { generation: number; passages: number }>();
  let cursor: string | null = null;
  do {
    const res = await fetch(`${server!.urls.ai}/v1/vector/documents?scope=shared&limit=100${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    for (const d of body.data) out.set(d.document_id, d);
    cursor = body.next_cursor;
  } while (cursor);
  return out;
}

/**
 * Every check of the file's header on what the server shows now; settles what was in flight (a call
 * found whole is acknowledged from now on, one found empty absent; a document is at the generation
 * found). Resolves with the number of passages found.
 */
async function check(standalone: StandaloneCall[], docs: Doc[]): Promise<number> {
  let found = 0;
  const failures: string[] = [];
  // Standalone passages: an acknowledged call's all found; an unacknowledged one's all or none.
  await pool(standalone, 4, async (c) => {
    const hits = await Promise.all(c.passages.map(async (p) => {
      const top = await topOf(p.text);
      if (!isSelf(top, p) && top?.text === p.text) failures.push(`${p.id}: its text found under ${top.id}`);
      return isSelf(top, p);
    }));
    const n = hits.filter(Boolean).length;
    const all = c.passages.length;
    if (c.state === 'acked' && n !== all) failures.push(`acknowledged call ${c.passages[0].id}: ${n} of ${all} found`);
    if (c.state === 'absent' && n !== 0) failures.push(`call ${c.passages[0].id}, found absent before, now has ${n} of ${all}`);
    if (c.state === 'in-flight') {
      if (n !== 0 && n !== all) failures.push(`unacknowledged call ${c.passages[0].id}: ${n} of ${all} found (half a transaction)`);
      c.state = n === all ? 'acked' : 'absent';
    }
    found += n;
  });
  // Documents: one generation, whole, the last acknowledged or the one in flight; nothing of another.
  const listed = await listDocuments();
  for (const doc of docs) {
    const state = listed.get(doc.id);
    const allowed = [doc.current, ...(doc.inFlight === null ? [] : [doc.inFlight])].filter((g) => g > 0);
    doc.inFlight = null;
    if (!state) {
      if (doc.current > 0) failures.push(`${doc.id}: not listed, expected generation ${allowed.join(' or ')}`);
      continue;
    }
    if (!allowed.includes(state.generation)) failures.push(`${doc.id}: listed at generation ${state.generation}, expected ${allowed.join(' or ')}`);
    if (state.passages !== PER_CALL) failures.push(`${doc.id}: listed with ${state.passages} passages`);
    doc.current = state.generation;
    await pool([...doc.generations], 2, async ([generation, passages]) => {
      for (const p of passages) {
        const top = await topOf(p.text);
        if (generation === doc.current && !isSelf(top, p)) failures.push(`${doc.id} generation ${generation}: ${p.id} not found (top ${JSON.stringify(top)})`);
        if (generation !== doc.current && top?.text === p.text) failures.push(`${doc.id} is at generation ${doc.current}, yet ${p.id} of generation ${generation} is found`);
        if (generation === doc.current && isSelf(top, p)) found++;
      }
    });
  }
  // None found twice: broad queries answer distinct ids, each with the text it should have.
  const current = new Map<string, string>();
  for (const c of standalone) if (c.state === 'acked') for (const p of c.passages) current.set(p.id, p.text);
  for (const doc of docs) for (const p of doc.generations.get(doc.current) ?? []) current.set(p.id, p.text);
  const broad = [...standalone.slice(0, 6).map((c) => c.passages[0].text), ...docs.flatMap((d) => [...d.generations.values()].slice(0, 1).map((g) => g[0].text)), words(3), words(8)];
  await pool(broad, 4, async (text) => {
    const a = await query(text, 50);
    expect(a.status, a.text).toBe(200);
    const ids = a.body.matches.map((m: { id: string }) => m.id);
    if (new Set(ids).size !== ids.length) failures.push(`a query answered an id twice: ${ids.join(' ')}`);
    if (ids.length !== Math.min(50, current.size)) failures.push(`a broad query answered ${ids.length} matches of 50`);
    for (const m of a.body.matches) if (current.get(m.id) !== m.text) failures.push(`${m.id} found with text of another version or call`);
  });
  expect(failures).toEqual([]);
  return found;
}

/** Clients ingest until `ACKED_BEFORE_KILL` more calls are acknowledged and a writer's intent is on disk; then every process is killed. */
async function loadAndKill(standalone: StandaloneCall[], docs: Doc[], database: string, cycle: number) {
  const unexpected: string[] = [];
  let acked = 0;
  let killed = false;
  let enough!: () => void;
  const reached = new Promise<void>((resolve) => (enough = resolve));
  const client = async (c: number) => {
    for (let seq = 0; !killed; seq++) {
      let answer: Answer;
      let done: () => void;
      if (seq % 2 === 0) {
        const sent: StandaloneCall = { passages: Array.from({ length: PER_CALL }, (_, i) => ({ id: `s${cycle}-${c}-${seq}-${i}`, text: words(6) })), state: 'in-flight' };
        standalone.push(sent);
        done = () => (sent.state = 'acked');
        try {
          answer = await ingest(sent.passages);
        } catch (error) {
          if (!killed) unexpected.push(`${sent.passages[0].id}: ${(error as Error).message}`);
          return enough(); // after the kill: the server died with the call in flight
        }
      } else {
        const doc = docs[c * 2 + ((seq - 1) / 2) % 2];
        const generation = doc.current + 1;
        // Half the ids stay from one generation to the next (their text changes), half are the generation's own.
        const passages = Array.from({ length: PER_CALL }, (_, i) => ({ id: i < PER_CALL / 2 ? `${doc.id}-keep-${i}` : `${doc.id}-g${generation}-${i}`, text: words(6) }));
        doc.generations.set(generation, passages);
        doc.inFlight = generation;
        done = () => {
          doc.current = generation;
          doc.inFlight = null;
        };
        try {
          answer = await ingest(passages.map((p) => ({ ...p, document_id: doc.id, generation })));
        } catch (error) {
          if (!killed) unexpected.push(`${doc.id} generation ${generation}: ${(error as Error).message}`);
          return enough();
        }
      }
      if (answer.status === 200 && answer.body.ingested === PER_CALL && answer.body.skipped.length === 0) {
        done();
        if (++acked === ACKED_BEFORE_KILL) enough();
      } else if (!killed) {
        unexpected.push(`${answer.status} ${answer.text}`);
        return enough();
      }
    }
  };
  const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));
  await reached;
  // Beside the server, on the same files: wait for a writer inside its turn (an intent written, not yet cleared).
  const side = createEmbeddedEngine({ dataDir });
  const intents = () => side.kv.query({ pk: intentPk(database, 'shared'), limit: 1 });
  const waiting = Date.now();
  while (!(await intents()).items.length && Date.now() - waiting < 5_000 && !unexpected.length) await new Promise((resolve) => setImmediate(resolve));
  killed = true;
  await crashLocalProcess(server!);
  await Promise.all(clients);
  const left = { intent: (await intents()).items.length > 0, lease: (await side.kv.get(leaseKey(database, 'shared'))) !== undefined };
  await side.close();
  expect(unexpected).toEqual([]);
  return { acked, left, inFlight: standalone.filter((c) => c.state === 'in-flight').length + docs.filter((d) => d.inFlight !== null).length };
}

it('keeps every acknowledged passage, once, and each document whole at one generation, across SIGKILLs of every process mid-ingest', async () => {
  embedder = await startFakeEmbedder();
  await start();
  const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
  key = credentials.secret_key;
  const workspace = credentials.workspace_id;
  adminOk(dataDir, 'route', 'set', '--org', credentials.organization_id, '--id', 'emb', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', embedder.baseUrl, '--model', 'fake-embed', '--default');
  const database = (await adminAsyncOk(dataDir, 'vector-db', 'create', '--workspace', workspace, '--embedding-route', 'emb')).database_id as string;

  const standalone: StandaloneCall[] = [];
  const docs: Doc[] = Array.from({ length: CLIENTS * 2 }, (_, i) => ({ id: `doc-${i}`, generations: new Map(), current: 0, inFlight: null }));
  const report: string[] = [];
  for (let cycle = 0; cycle < CYCLES; cycle++) {
    const load = await loadAndKill(standalone, docs, database, cycle);
    await start();
    const found = await check(standalone, docs);
    // The counter moves in the commit's own transaction: it is what the queries found.
    expect(adminOk(dataDir, 'vector-db', 'show', '--workspace', workspace).passages).toBe(found);

    // A further write of the scope: it waits out the dead writer's lease (or gets 503 and retries), then
    // rolls back or finishes the transaction the kill interrupted.
    const recovering = Date.now();
    const extra: StandaloneCall = { passages: [{ id: `after-restart-${cycle}`, text: words(6) }], state: 'acked' };
    for (;;) {
      const a = await ingest(extra.passages);
      if (a.status === 200) {
        expect(a.body).toEqual({ ingested: 1, skipped: [] });
        break;
      }
      expect([a.status, a.body?.error?.code], a.text).toEqual([503, 'service_unavailable']);
      expect(Date.now() - recovering).toBeLessThan(90_000);
    }
    const recoveredMs = Date.now() - recovering;
    standalone.push(extra);
    // Every document moves on to its next generation.
    await pool(docs, 4, async (doc) => {
      const next = doc.current + 1;
      const passages = Array.from({ length: PER_CALL }, (_, i) => ({ id: `${doc.id}-g${next}-${i}`, text: words(6) }));
      doc.generations.set(next, passages);
      const written = await ingest(passages.map((p) => ({ ...p, document_id: doc.id, generation: next })));
      expect([written.status, written.body]).toEqual([200, { ingested: PER_CALL, skipped: [] }]);
      doc.current = next;
    });
    const after = await check(standalone, docs);
    expect(adminOk(dataDir, 'vector-db', 'show', '--workspace', workspace).passages).toBe(after);
    report.push(
      `cycle ${cycle}: ${load.acked} calls acknowledged, ${load.inFlight} in flight at the kill, left an intent: ${load.left.intent}, a lease: ${load.left.lease}; ` +
        `${found} passages found after the restart; the first write after it committed in ${(recoveredMs / 1000).toFixed(1)} s`,
    );
  }
  console.log(`vector crash:\n${report.join('\n')}`);
}, 300_000);
