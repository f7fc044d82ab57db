/**
 * Each item's extraction in a bounded child (lambdas/knowledge/extraction-pool.ts): the answer is what
 * extraction and chunking give in this process; past the memory or the CPU cap the child is killed
 * and the answer is `too_large` naming the cap; a child that dies otherwise is `parse_error`; and the
 * pool goes on serving after each.
 */
import { afterAll, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { closeExtractionPool, extractBounded } from '../../lambdas/knowledge/extraction-pool.js';
import { extractText } from '../../lambdas/knowledge/extract/index.js';
import { chunkSections } from '../../lambdas/knowledge/chunks.js';
import { waitFor } from '../helpers/wait.js';

afterAll(() => closeExtractionPool());

const CAPS = { memoryMb: 1024, cpuSeconds: 60 };
const text = (s: string) => new TextEncoder().encode(s);
/** Plain prose of about `mb` MB: chunking it (the tokenizer) takes seconds of CPU per MB and holds its text several times over. */
const prose = (mb: number) => text(`${'The quick brown fox jumps over the lazy dog, and then it rests. '.repeat(16)}\n\n`.repeat(Math.ceil((mb * 1024 * 1024) / 1042)));
/** The pids of this process's extraction children. */
const children = () =>
  execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes('--knowledge-extraction-child'))
    .map((line) => Number(line.trim().split(/\s+/)[0]));

it('answers what extraction and chunking give in this process, and reuses its child', async () => {
  const file = text('# Install\n\nRun the installer.\n\n## Linux\n\nUse the package.\n');
  const expected = await extractText(file, 'text/markdown', 'guide.md');
  if ('failed' in expected) throw new Error('the fixture does not extract');
  expect(await extractBounded({ bytes: file, contentType: 'text/markdown', filename: 'guide.md' }, CAPS)).toEqual({ sections: expected.sections, chunks: chunkSections(expected.sections) });
  const [first] = children();
  expect(await extractBounded({ bytes: text('plain words'), contentType: 'text/plain', filename: 'a.txt' }, CAPS)).toMatchObject({ sections: [{ text: 'plain words', locator: 'line=1' }] });
  expect(children()).toEqual([first]);
  // A file's own fault is its answer, as in this process.
  expect(await extractBounded({ bytes: text('%PDF-1.7\nnot really'), contentType: 'application/pdf', filename: 'x.pdf' }, CAPS)).toEqual({ failed: 'parse_error' });
});

it('kills the child past the CPU cap: too_large naming the cap, then serves the next item', async () => {
  const started = Date.now();
  const answer = await extractBounded({ bytes: prose(4), contentType: 'text/plain', filename: 'long.txt' }, { memoryMb: 1024, cpuSeconds: 1 });
  expect(answer).toEqual({ failed: 'too_large', message: expect.stringContaining('CPU time one item may use (1 s, KNOWLEDGE_MAX_CPU_S)') });
  expect(Date.now() - started).toBeLessThan(15_000);
  expect(await extractBounded({ bytes: text('after'), contentType: 'text/plain', filename: 'a.txt' }, { memoryMb: 1024, cpuSeconds: 1 })).toMatchObject({ sections: [{ text: 'after' }] });
}, 30_000);

it('kills the child past the memory cap: too_large naming the cap', async () => {
  const answer = await extractBounded({ bytes: prose(12), contentType: 'text/plain', filename: 'big.txt' }, { memoryMb: 160, cpuSeconds: 60 });
  expect(answer).toEqual({ failed: 'too_large', message: expect.stringContaining('memory one item may use (160 MiB, KNOWLEDGE_MAX_MEMORY_MB)') });
}, 30_000);

it('answers parse_error when the child dies otherwise, and starts another', async () => {
  const running = extractBounded({ bytes: prose(4), contentType: 'text/plain', filename: 'long.txt' }, CAPS);
  let victim = 0;
  await waitFor('a busy child', () => (victim = children()[0] ?? 0) > 0, 10_000, 20);
  process.kill(victim, 'SIGKILL');
  expect(await running).toEqual({ failed: 'parse_error', message: 'Reading the file stopped the parser (SIGKILL).' });
  expect(await extractBounded({ bytes: text('next'), contentType: 'text/plain', filename: 'a.txt' }, CAPS)).toMatchObject({ sections: [{ text: 'next' }] });
  expect(children()).not.toContain(victim);
}, 30_000);
