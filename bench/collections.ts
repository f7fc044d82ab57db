/**
 * Knowledge collections (docs/ai/collections.md) on the local platform, in the bench's process, with
 * the tests' fake embedder in a process of its own (bench/support/collection-platform.ts): how fast
 * files become searchable, and what a cited collection query costs beside a bare vector query, each
 * against a baseline measured in the same run (docs/decisions/collections-benchmark.md, docs/benchmarks.md).
 *
 * Files (made by the bench, bench/support/collection-corpus.ts): a PDF of BENCH_PAGES (300) pages of
 * about 450 words, and BENCH_FILES (50) Markdown files of nested headings, all uploaded through
 * `POST /v1/uploads` into one `cloud` collection.
 *
 * Warm-up, untimed: one parse and chunking of the PDF, and a 3-page PDF item through the pipeline in a
 * collection deleted after (the parser, the tokenizer, the queue, the embeddings route, the index).
 * Indexing, BENCH_ROUNDS (3) rounds, the order of the two subjects swapped each round:
 *   parser alone   `pdfSections` (unpdf) on the PDF's bytes: pages a second; the chunker alone on its
 *                  sections is timed beside it (not part of the baseline);
 *   pipeline       the PDF item from `POST .../items` (round 1) or `POST .../reprocess` (later rounds)
 *                  until its record's `processed_at`: queue, blob read, parse, chunk, package, embed,
 *                  index, the final write. Pages a second = pages / that time.
 *   Target every round: pipeline pages/s >= 0.5x the parser's of the same round. Beside it, reported:
 *   the same ratio by this process's CPU time (the platform's; the embedder runs apart), which other
 *   processes' load disturbs less than wall time.
 *   The Markdown files are then added together and timed to the last `processed_at` (files a second;
 *   reported, no target).
 * Queries: the collection's chunk texts are ingested into the workspace's `shared` scope through
 * `POST /v1/vector/ingest` (the same number of passages, the same texts, the same index), then per
 * round BENCH_QUERIES (200) queries, each sent to both (alternating which goes first), top_k 10, over
 * one keep-alive connection, each with its own X-Operation-Id:
 *   collection query   `POST /v1/collections/{id}/query`;
 *   vector query       `POST /v1/vector/query` mode shared: the baseline.
 *   Target every round: collection p50 <= 1.5x the vector query's p50.
 * Beside them (reported only): both searches without HTTP (`searchChunks`, `searchVectors`, no
 * embeddings call) and the index alone (`engine.vectors.query` with each one's scope filter).
 *
 * Profiling: run it as `BENCH_PROFILE_DIR=/tmp/prof node --cpu-prof --cpu-prof-dir=/tmp/prof --import
 * tsx bench/run.ts collections`; the measured windows go to /tmp/prof/collections-phases.json, for
 * `tsx bench/support/profile-summary.ts <profile> /tmp/prof/collections-phases.json pipeline`.
 */
import http from 'node:http';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KvItem } from '../lambdas/engine/ports.js';
import { collectionScope, searchChunks } from '../lambdas/knowledge/chunk-index.js';
import { itemKey } from '../lambdas/knowledge/collection-keys.js';
import { chunkSections } from '../lambdas/knowledge/chunks.js';
import { markdownSections } from '../lambdas/knowledge/extract/markdown.js';
import { pdfSections } from '../lambdas/knowledge/extract/pdf.js';
import { searchVectors } from '../lambdas/vector/query.js';
import { fakeVector } from '../test/helpers/fake-embedder.js';
import { pdfFile, proseLines } from '../test/helpers/knowledge-files.js';
import { postWithOperation } from '../test/helpers/ai-calls.js';
import { addItem, call, createCollection, op, post, uploadFile, type Client } from '../test/helpers/knowledge-calls.js';
import { waitFor } from '../test/helpers/wait.js';
import { makeCorpus, queryTexts } from './support/collection-corpus.js';
import { startCollectionPlatform, type CollectionPlatform } from './support/collection-platform.js';
import { envNumber, profileDirFromEnv } from './support/env.js';
import { fmt, fmtInt, type Table } from './support/table.js';
import type { Benchmark, BenchReport, Figure } from './support/types.js';

const K = 10;
const WARMUP = 20;
/** Passages an ingest call takes at most. */
const INGEST_BATCH = 100;
const PIPELINE_TARGET = 0.5;
const QUERY_TARGET = 1.5;

const now = () => performance.now();
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const median = (values: number[]) => percentile(values, 50);
/** The clock of V8's CPU profiles, for the phases file profile-summary.ts reads. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

interface IndexingRound {
  round: number;
  parseMs: number;
  chunkMs: number;
  /** CPU of this process (the platform runs in it; the embedder does not) while the parser ran, and while the pipeline did. */
  parseCpuMs: number;
  pipelineMs: number;
  pipelineCpuMs: number;
  chunks: number;
}

interface QueryRound {
  round: number;
  /** Latencies (ms) per subject. */
  ms: Record<Subject, number[]>;
}

const SUBJECTS = ['collection (HTTP)', 'vector (HTTP)', 'collection (no HTTP)', 'vector (no HTTP)', 'index, collection scope', 'index, shared scope'] as const;
type Subject = (typeof SUBJECTS)[number];

/**
 * Waits until every item is settled, reading their records in the store every 20 ms (a SQLite read:
 * no HTTP polling in the platform's process while it works); each must be done. Answers each item's
 * processing end (`processed_at`, ms since the epoch) and chunk count.
 */
async function doneItems(p: CollectionPlatform, collection: string, items: string[]): Promise<{ processedAt: number; chunks: number }[]> {
  const keys = items.map((id) => itemKey(p.org, p.workspace, collection, id));
  let records: (KvItem | undefined)[] = [];
  const settled = async () => {
    records = await p.engine.kv.getMany(keys);
    return records.every((r) => r?.state === 'done' || r?.state === 'failed');
  };
  await waitFor(`${items.length} items to settle`, settled, 120_000, 20);
  return records.map((r) => {
    if (r!.state !== 'done') throw new Error(`item ${r!.filename} ${r!.state}: ${r!.error_code} ${r!.error_message}`);
    return { processedAt: Date.parse(String(r!.processed_at)), chunks: Number(r!.chunk_count) };
  });
}

/** Every chunk text of an item's served package, through GET .../chunks. */
async function chunkTexts(c: Client, collection: string, itemId: string): Promise<string[]> {
  const texts: string[] = [];
  let cursor: string | null = null;
  do {
    const r = await call(c, 'GET', `/v1/collections/${collection}/items/${itemId}/chunks?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (r.status !== 200) throw new Error(`chunks: ${r.status} ${r.text}`);
    texts.push(...r.body.data.map((d: { text: string }) => d.text));
    cursor = r.body.next_cursor;
  } while (cursor);
  return texts;
}

/** Ingests the texts into the `shared` scope as passages `c<i>`, calls of 100. */
async function ingestShared(c: Client, texts: string[]): Promise<void> {
  for (let from = 0; from < texts.length; from += INGEST_BATCH) {
    const documents = texts.slice(from, from + INGEST_BATCH).map((text, i) => ({ id: `c${from + i}`, text }));
    const r = await post(c, '/v1/vector/ingest', { scope: 'shared', documents });
    if (r.status !== 200 || r.body.ingested !== documents.length) throw new Error(`ingest: ${r.status} ${r.text.slice(0, 300)}`);
  }
}

export const benchmark: Benchmark = {
  name: 'collections',
  title: 'Knowledge collections: a PDF and Markdown files indexed through the queue (vs the PDF parser alone), cited queries over HTTP (vs a bare vector query)',
  async run(progress): Promise<BenchReport> {
    const pages = envNumber('BENCH_PAGES', 300);
    const files = envNumber('BENCH_FILES', 50);
    const rounds = envNumber('BENCH_ROUNDS', 3);
    const queries = envNumber('BENCH_QUERIES', 200);

    let started = now();
    const corpus = await makeCorpus(pages, files);
    progress(`files: a PDF of ${pages} pages (${fmtInt(corpus.pdf.length)} bytes), ${files} Markdown files (${fmtInt(corpus.markdown.reduce((n, m) => n + Buffer.byteLength(m.text), 0))} bytes), made in ${fmt((now() - started) / 1000)} s; ${cpus().length} CPUs, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);

    // Under `node --cpu-prof` (the platform runs in this process): the measured windows, for profile-summary.ts.
    const profileDir = profileDirFromEnv();
    const phases: { name: string; startUs: number; endUs: number }[] = [];
    const phase = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
      const startUs = monotonicUs();
      try {
        return await work();
      } finally {
        phases.push({ name, startUs, endUs: monotonicUs() });
      }
    };

    let platform: CollectionPlatform | undefined;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      platform = await startCollectionPlatform();
      const p = platform;
      const c = p.client;
      const col = await createCollection(c, 'cloud', 'Bench');

      started = now();
      const pdfUpload = await uploadFile(c, corpus.pdf, 'book.pdf', 'application/pdf');
      const mdUploads: string[] = [];
      for (const m of corpus.markdown) mdUploads.push(await uploadFile(c, Buffer.from(m.text), m.filename, 'text/markdown'));
      progress(`uploads: ${1 + files} files uploaded and completed in ${fmt((now() - started) / 1000, 2)} s`);

      // Warm-up, untimed: the parser's and the tokenizer's first use (building the tokenizer's table takes
      // most of a second), and the pipeline's (the queue, the embeddings route, the index) on a small PDF
      // in a collection of its own, deleted after.
      started = now();
      chunkSections(await pdfSections(corpus.pdf));
      const coldMs = now() - started;
      const warmCol = await createCollection(c, 'cloud', 'Warm-up');
      const warmItem = await addItem(c, warmCol, { upload_id: await uploadFile(c, await pdfFile(proseLines(3)), 'warm-up.pdf', 'application/pdf') });
      await doneItems(p, warmCol, [warmItem.body.item_id]);
      const deleted = await call(c, 'DELETE', `/v1/collections/${warmCol}`);
      if (deleted.status !== 200 && deleted.status !== 204) throw new Error(`delete the warm-up collection: ${deleted.status} ${deleted.text}`);

      // Indexing the PDF: the parser alone and the pipeline, in alternating order.
      const indexing: IndexingRound[] = [];
      let pdfItem = '';
      for (let round = 1; round <= rounds; round++) {
        const r: Partial<IndexingRound> = { round };
        const parser = async () => {
          const t = now();
          const cpu = cpuMs();
          const sections = await pdfSections(corpus.pdf);
          r.parseMs = now() - t;
          r.parseCpuMs = cpuMs() - cpu;
          if (sections.length !== pages) throw new Error(`the parser found ${sections.length} pages of text, not ${pages}`);
          const t2 = now();
          chunkSections(sections);
          r.chunkMs = now() - t2;
        };
        const pipeline = async () => {
          const t0 = Date.now();
          const cpu = cpuMs();
          if (round === 1) {
            const added = await addItem(c, col, { upload_id: pdfUpload });
            if (added.status !== 202) throw new Error(`add item: ${added.status} ${added.text}`);
            pdfItem = added.body.item_id;
          } else {
            const again = await post(c, `/v1/collections/${col}/items/${pdfItem}/reprocess`, {});
            if (again.status !== 202) throw new Error(`reprocess: ${again.status} ${again.text}`);
          }
          const [done] = await doneItems(p, col, [pdfItem]);
          r.pipelineCpuMs = cpuMs() - cpu; // to the read that saw it done: up to 20 ms more than the wall time
          r.pipelineMs = done.processedAt - t0;
          r.chunks = done.chunks;
        };
        const steps = [
          () => phase('parser', parser),
          async () => {
            await phase('pipeline', pipeline);
            // The replaced package's vectors are removed after the final write: that finishes outside the timings.
            await sleep(1_000);
          },
        ];
        for (const step of round % 2 ? steps : steps.reverse()) await step();
        indexing.push(r as IndexingRound);
        progress(
          `indexing round ${round}/${rounds}: parser ${fmt((pages / r.parseMs!) * 1000)} pages/s, pipeline ${fmt((pages / r.pipelineMs!) * 1000)} pages/s ` +
            `(${fmtInt(r.pipelineMs!)} ms, ${r.chunks} chunks), ratio ${fmt(r.parseMs! / r.pipelineMs!, 2)}`,
        );
      }

      // The Markdown files, added together, until the last is processed; their parser and chunker alone for comparison.
      started = now();
      for (const m of corpus.markdown) chunkSections(markdownSections(m.text));
      const mdAloneMs = now() - started;
      const mdStarted = Date.now();
      const mdItems: string[] = [];
      for (const upload of mdUploads) {
        const added = await addItem(c, col, { upload_id: upload });
        if (added.status !== 202) throw new Error(`add item: ${added.status} ${added.text}`);
        mdItems.push(added.body.item_id);
      }
      const mdDone = await phase('markdown', () => doneItems(p, col, mdItems));
      const mdLast = Math.max(...mdDone.map((d) => d.processedAt));
      const mdChunks = mdDone.reduce((n, d) => n + d.chunks, 0);
      const mdMs = mdLast - mdStarted;
      progress(`markdown: ${files} files (${mdChunks} chunks) processed in ${fmtInt(mdMs)} ms: ${fmt((files / mdMs) * 1000)} files/s; parser + chunker alone ${fmt((files / mdAloneMs) * 1000)} files/s`);

      // The same texts as bare passages in the shared scope of the same database.
      const texts: string[] = [];
      for (const id of [pdfItem, ...mdItems]) texts.push(...(await chunkTexts(c, col, id)));
      // What the fake embedder does for the PDF's chunks (in its own process during the rounds), timed here alone.
      started = now();
      for (const text of texts.slice(0, indexing[0].chunks)) fakeVector(text);
      const embedderMs = now() - started;
      started = now();
      await ingestShared(c, texts);
      const ingestMs = now() - started;
      await p.engine.vectors.caughtUp(p.database.index);
      progress(`vector database: ${texts.length} passages (the collection's chunk texts) ingested into shared in ${fmtInt(ingestMs)} ms`);

      const questions = queryTexts(texts, queries);
      const vectors = questions.map((q) => Float32Array.from(fakeVector(q)));
      const where = { org: p.org, workspace: p.workspace, collection: col, index: p.database.index };
      const principal = { credentialId: 'bench' };
      // The first answer of each is checked: a full top-k (and, for the collection, every item indexed).
      let checkedAnswer = false;
      let checkedVectorAnswer = false;
      const run: Record<Subject, (i: number) => Promise<void>> = {
        'collection (HTTP)': async (i) => {
          const r = await postWithOperation(c.url, c.key, `/v1/collections/${col}/query`, op(), { query: questions[i], top_k: K }, agent);
          if (r.status !== 200) throw new Error(`collection query: ${r.status} ${r.text.slice(0, 300)}`);
          if (!checkedAnswer) {
            const body = JSON.parse(r.text);
            if (body.matches.length !== K || !body.indexing.complete) throw new Error(`collection query: ${body.matches.length} matches, indexing ${JSON.stringify(body.indexing)}`);
            checkedAnswer = true;
          }
        },
        'vector (HTTP)': async (i) => {
          const r = await postWithOperation(c.url, c.key, '/v1/vector/query', op(), { mode: 'shared', query: questions[i], top_k: K }, agent);
          if (r.status !== 200) throw new Error(`vector query: ${r.status} ${r.text.slice(0, 300)}`);
          if (!checkedVectorAnswer) {
            const matches = JSON.parse(r.text).matches.length;
            if (matches !== K) throw new Error(`vector query: ${matches} matches`);
            checkedVectorAnswer = true;
          }
        },
        'collection (no HTTP)': async (i) => void (await searchChunks(p.engine, where, vectors[i], K)),
        'vector (no HTTP)': async (i) => void (await searchVectors(p.engine, p.database, principal, 'shared', vectors[i], K)),
        'index, collection scope': async (i) => void (await p.engine.vectors.query(p.database.index, { vector: vectors[i], topK: K, filter: { scope: collectionScope(col) } })),
        'index, shared scope': async (i) => void (await p.engine.vectors.query(p.database.index, { vector: vectors[i], topK: K, filter: { scope: 'shared' } })),
      };
      /** Pairs measured query by query, alternating which goes first: the collection row against its baseline. */
      const pairs: [Subject, Subject][] = [
        ['collection (HTTP)', 'vector (HTTP)'],
        ['collection (no HTTP)', 'vector (no HTTP)'],
        ['index, collection scope', 'index, shared scope'],
      ];
      const queryRounds: QueryRound[] = [];
      for (let round = 1; round <= rounds; round++) {
        const ms = Object.fromEntries(SUBJECTS.map((s) => [s, [] as number[]])) as Record<Subject, number[]>;
        for (const pair of pairs) {
          for (let i = 0; i < WARMUP; i++) for (const s of pair) await run[s](i);
          for (let i = 0; i < queries; i++) {
            for (const s of (i + round) % 2 ? pair : [pair[1], pair[0]]) {
              const t = now();
              const startUs = monotonicUs();
              await run[s](i);
              ms[s].push(now() - t);
              if (profileDir) phases.push({ name: s, startUs, endUs: monotonicUs() });
            }
          }
        }
        queryRounds.push({ round, ms });
        progress(`query round ${round}/${rounds}: p50 ms ` + SUBJECTS.map((s) => `${s} ${fmt(median(ms[s]), 3)}`).join(', '));
      }
      if (profileDir) {
        writeFileSync(join(profileDir, 'collections-phases.json'), JSON.stringify(phases));
        progress(`phases (parser, pipeline, markdown, and each query subject) in ${join(profileDir, 'collections-phases.json')}`);
      }

      // Verdict: every round meets both targets.
      const checks: string[] = [];
      const indexingRows = indexing.map((r) => {
        const ratio = r.parseMs / r.pipelineMs;
        if (ratio < PIPELINE_TARGET) checks.push(`indexing round ${r.round}: pipeline ${fmt(ratio, 2)}x the parser's pages/s`);
        return [
          String(r.round),
          fmt((pages / r.parseMs) * 1000),
          fmtInt(r.parseMs),
          fmtInt(r.chunkMs),
          fmtInt(r.parseCpuMs),
          fmt((pages / r.pipelineMs) * 1000),
          fmtInt(r.pipelineMs),
          fmtInt(r.pipelineCpuMs),
          String(r.chunks),
          `${fmt(ratio, 2)} ${ratio >= PIPELINE_TARGET ? 'ok' : 'MISS'}`,
          fmt(r.parseCpuMs / r.pipelineCpuMs, 2),
        ];
      });
      const queryRows: string[][] = [];
      const ratioRows: string[][] = [];
      for (const q of queryRounds) {
        for (const s of SUBJECTS) queryRows.push([String(q.round), s, fmt(median(q.ms[s]), 3), fmt(percentile(q.ms[s], 99), 3)]);
        const ratio = (a: Subject, b: Subject, p: number) => percentile(q.ms[a], p) / percentile(q.ms[b], p);
        const http50 = ratio('collection (HTTP)', 'vector (HTTP)', 50);
        if (http50 > QUERY_TARGET) checks.push(`query round ${q.round}: collection p50 ${fmt(http50, 2)}x the vector query's`);
        ratioRows.push([
          String(q.round),
          `${fmt(http50, 2)} ${http50 <= QUERY_TARGET ? 'ok' : 'MISS'}`,
          fmt(ratio('collection (HTTP)', 'vector (HTTP)', 99), 2),
          fmt(ratio('collection (no HTTP)', 'vector (no HTTP)', 50), 2),
          fmt(ratio('index, collection scope', 'index, shared scope', 50), 2),
        ]);
      }

      const indexingTable: Table = {
        title: `Indexing a ${pages}-page PDF (ms; the pipeline: from POST .../items or .../reprocess to the item's processed_at; the chunker is timed apart from the parser; CPU: this process's, where the platform runs and the embedder does not)`,
        headers: ['round', 'parser pages/s', 'parser ms', 'chunker ms', 'parser CPU ms', 'pipeline pages/s', 'pipeline ms', 'pipeline CPU ms', 'chunks', `pipeline/parser (>= ${PIPELINE_TARGET})`, 'by CPU (reported)'],
        align: ['r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
        rows: indexingRows,
      };
      const queryTable: Table = {
        title: `Top-${K} queries over ${texts.length} chunks (collection) and as many passages (shared scope), ${queries} queries a round (ms)`,
        headers: ['round', 'subject', 'p50 ms', 'p99 ms'],
        align: ['r', 'l', 'r', 'r'],
        rows: queryRows,
      };
      const ratioTable: Table = {
        title: 'Collection query / vector query, by round',
        headers: ['round', `HTTP p50 (<= ${QUERY_TARGET})`, 'HTTP p99', 'no HTTP p50', 'index alone p50'],
        align: ['r', 'r', 'r', 'r', 'r'],
        rows: ratioRows,
      };
      const otherTable: Table = {
        title: 'Other figures',
        headers: ['figure', 'value'],
        align: ['l', 'r'],
        rows: [
          ['first parse + chunking of the PDF (cold, before the rounds; ms)', fmtInt(coldMs)],
          ["the fake embedder's work for the PDF's chunks, timed alone in this process (ms; its process does it during the pipeline)", fmtInt(embedderMs)],
          [`${files} Markdown files through the pipeline (added together, to the last processed_at): files/s`, fmt((files / mdMs) * 1000)],
          [`${files} Markdown files: ms, chunks`, `${fmtInt(mdMs)}, ${mdChunks}`],
          ['Markdown parser + chunker alone: files/s', fmt((files / mdAloneMs) * 1000)],
          [`the chunk texts ingested into shared (POST /v1/vector/ingest, calls of ${INGEST_BATCH}): passages/s`, fmtInt((texts.length / ingestMs) * 1000)],
        ],
      };
      const figures: Figure[] = [
        { name: 'PDF parser pages /s', value: median(indexing.map((r) => (pages / r.parseMs) * 1000)) },
        { name: 'pipeline pages /s', value: median(indexing.map((r) => (pages / r.pipelineMs) * 1000)) },
        { name: 'Markdown files /s', value: (files / mdMs) * 1000, digits: 1 },
        { name: 'collection query p50 ms', value: median(queryRounds.map((q) => median(q.ms['collection (HTTP)']))), digits: 2 },
        { name: 'vector query p50 ms', value: median(queryRounds.map((q) => median(q.ms['vector (HTTP)']))), digits: 2 },
        { name: 'collection query p99 ms', value: median(queryRounds.map((q) => percentile(q.ms['collection (HTTP)'], 99))), digits: 2 },
      ];
      const worstIndexing = Math.min(...indexing.map((r) => r.parseMs / r.pipelineMs));
      const worstQuery = Math.max(...queryRounds.map((q) => median(q.ms['collection (HTTP)']) / median(q.ms['vector (HTTP)'])));
      return {
        tables: [indexingTable, queryTable, ratioTable, otherTable],
        figures,
        verdict: {
          pass: checks.length === 0,
          summary: checks.length
            ? checks.join('; ')
            : `every round: pipeline >= ${fmt(worstIndexing, 2)}x the parser's pages/s (target ${PIPELINE_TARGET}), collection query p50 <= ${fmt(worstQuery, 2)}x the vector query's (target ${QUERY_TARGET})`,
        },
      };
    } finally {
      agent.destroy();
      await platform?.close();
    }
  },
};
