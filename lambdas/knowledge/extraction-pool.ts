/**
 * An item's extraction and chunking, run in a child process of its own under a memory cap and a CPU
 * time cap, killed from outside past either (docs/decisions/background-processes.md). A hostile file
 * (a page tree listing one page 300,000 times, a zip bomb, pathological Markdown) then costs one
 * child, never the process that runs the consumer: the item fails `too_large` at once, naming the
 * cap, and the other items of the batch go on. The same module runs on the local server's background
 * processes and inside the knowledge function on Lambda (a bundle forks itself).
 *
 * Children are kept and reused (a Node start costs more than most items), one item at a time each. A
 * child is watched through /proc: its resident memory and its CPU time since the item began, every
 * WATCH_MS. V8's heap cap (--max-old-space-size) stops it sooner for JavaScript objects; the watcher
 * also catches what V8 does not count (buffers, native memory). Without /proc (macOS), only the heap
 * cap and a wall-clock limit of the CPU cap hold.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { settings } from '../shared/settings.js';
import type { Chunk, ChunkOptions } from './chunks.js';
import type { ExtractFailure, Section } from './extract/index.js';

export interface ExtractionCaps {
  memoryMb: number;
  cpuSeconds: number;
}

export type Extraction = { sections: Section[]; chunks: Chunk[] } | { failed: ExtractFailure; message?: string };

interface Job {
  bytes: Uint8Array;
  contentType: string;
  filename: string;
  /** The item's own chunk sizes (an OpenAI `static` chunking strategy); absent: the defaults. */
  chunking?: ChunkOptions;
}

type ChildAnswer = { ok: Extraction } | { error: string };

/** The argument that makes this module, forked, serve extractions instead of being imported. */
const CHILD_FLAG = '--knowledge-extraction-child';
/** The extraction child's nice value (at least; never above its parent's priority). */
export const EXTRACTION_NICE = 10;
const WATCH_MS = 50;
/** A child idle this long exits: an idle background process holds no parser's memory. */
const IDLE_MS = 30_000;
/** A child that kept more than this share of the cap after an item is replaced rather than reused. */
const KEEP_BELOW_SHARE = 0.5;
/** Linux reports CPU time in clock ticks (USER_HZ, 100 on every Linux Lambda and Debian runs) and memory in pages of 4 KiB. */
const TICKS_PER_SECOND = 100;
const PAGE_BYTES = 4096;

export const extractionCaps = (): ExtractionCaps => ({ memoryMb: settings().knowledgeMaxMemoryMb, cpuSeconds: settings().knowledgeMaxCpuSeconds });

/** Extracts and chunks a file in a bounded child; a cap breached is `too_large` with the cap named. */
export async function extractBounded(job: Job, caps: ExtractionCaps = extractionCaps()): Promise<Extraction> {
  const child = takeChild(caps);
  let outcome: { answer: ChildAnswer } | { breached: string } | { died: string };
  try {
    outcome = await child.run(job, caps);
  } finally {
    releaseChild(child, caps);
  }
  if ('answer' in outcome) {
    if ('ok' in outcome.answer) return outcome.answer.ok;
    // The parsers answer a bad file; a throw that escaped them is still the file's fault.
    return { failed: 'parse_error', message: `The file could not be read (${outcome.answer.error.slice(0, 200)}).` };
  }
  if ('breached' in outcome) return { failed: 'too_large', message: outcome.breached };
  return { failed: 'parse_error', message: `Reading the file stopped the parser (${outcome.died}).` };
}

// ---------- the parent side: a pool of children ----------

const idle: PooledChild[] = [];

function takeChild(caps: ExtractionCaps): PooledChild {
  while (idle.length) {
    const child = idle.pop()!;
    if (child.usable(caps)) return child;
    child.kill();
  }
  return new PooledChild(caps);
}

function releaseChild(child: PooledChild, caps: ExtractionCaps) {
  if (!child.usable(caps) || child.residentBytes() > caps.memoryMb * 1024 * 1024 * KEEP_BELOW_SHARE) return child.kill();
  child.idle();
  idle.push(child);
}

/** Stops every idle child (a process shutting down). */
export function closeExtractionPool(): void {
  for (const child of idle.splice(0)) child.kill();
}

class PooledChild {
  private readonly process: ChildProcess;
  private readonly memoryMb: number;
  private exited: string | undefined;
  private killed = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private stderr = '';
  /** Resolves once the child loaded its parsers: their loading is not the item's CPU time. */
  private readonly ready: Promise<void>;

  constructor(caps: ExtractionCaps) {
    this.memoryMb = caps.memoryMb;
    const entry = fileURLToPath(import.meta.url);
    // Unbundled (the local server, tests) this file is TypeScript: the child loads it through tsx as
    // its parent did. A Lambda bundle is JavaScript and forks itself.
    const loader = entry.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [];
    this.process = fork(entry, [CHILD_FLAG], {
      execArgv: [...loader, `--max-old-space-size=${caps.memoryMb}`],
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.process.stderr!.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString()).slice(-2000)));
    this.process.once('exit', (code, signal) => (this.exited = signal ?? `exit code ${code}`));
    this.process.once('error', (error) => (this.exited ??= error.message));
    this.ready = new Promise((resolve) => {
      const onReady = (message: unknown) => (message === 'ready' ? resolve() : undefined);
      this.process.once('message', onReady);
      this.process.once('exit', () => resolve());
    });
  }

  usable(caps: ExtractionCaps): boolean {
    return this.exited === undefined && !this.killed && caps.memoryMb === this.memoryMb;
  }

  residentBytes(): number {
    return this.process.pid === undefined ? 0 : (readStat(this.process.pid)?.residentBytes ?? 0);
  }

  idle(): void {
    // An idle child keeps neither the event loop nor the process alive.
    this.process.unref();
    (this.process.channel as { unref?(): void } | undefined)?.unref?.();
    this.idleTimer = setTimeout(() => {
      const at = idle.indexOf(this);
      if (at >= 0) idle.splice(at, 1);
      this.kill();
    }, IDLE_MS);
    this.idleTimer.unref();
  }

  kill(): void {
    clearTimeout(this.idleTimer);
    // Marked at once: its 'exit' comes later, and it must not go back to the pool meanwhile.
    this.killed = true;
    if (this.exited === undefined) this.process.kill('SIGKILL');
  }

  async run(job: Job, caps: ExtractionCaps): Promise<{ answer: ChildAnswer } | { breached: string } | { died: string }> {
    clearTimeout(this.idleTimer);
    this.process.ref();
    (this.process.channel as { ref?(): void } | undefined)?.ref?.();
    await this.ready;
    const pid = this.process.pid!;
    const first = readStat(pid);
    const startCpu = first?.cpuSeconds ?? 0;
    const started = Date.now();
    const capBytes = caps.memoryMb * 1024 * 1024;
    const procAvailable = first !== undefined;
    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: { answer: ChildAnswer } | { breached: string } | { died: string }) => {
        if (settled) return;
        settled = true;
        clearInterval(watcher);
        this.process.off('message', onMessage);
        this.process.off('exit', onExit);
        resolve(outcome);
      };
      const breach = (message: string) => {
        this.kill();
        settle({ breached: message });
      };
      const onMessage = (answer: ChildAnswer) => settle({ answer });
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        // V8 stops at its heap cap with "Reached heap limit" (SIGABRT, or exit code 134).
        if (/heap limit|out of memory/i.test(this.stderr) || signal === 'SIGABRT' || code === 134) {
          settle({ breached: memoryMessage(caps) });
        } else settle({ died: signal ?? `exit code ${code}` });
      };
      this.process.on('message', onMessage);
      this.process.once('exit', onExit);
      const watcher = setInterval(() => {
        const stat = procAvailable ? readStat(pid) : undefined;
        if (stat) {
          if (stat.residentBytes > capBytes) return breach(memoryMessage(caps));
          if (stat.cpuSeconds - startCpu > caps.cpuSeconds) return breach(cpuMessage(caps));
        }
        // A child that neither works nor answers (or a system without /proc): wall-clock time bounds it.
        const wallLimit = procAvailable ? caps.cpuSeconds * 3 + 10 : caps.cpuSeconds;
        if (Date.now() - started > wallLimit * 1000) breach(cpuMessage(caps));
      }, WATCH_MS);
      if (this.exited !== undefined) return settle({ died: this.exited });
      this.process.send(job, (error) => error && settle({ died: error.message }));
    });
  }
}

const memoryMessage = (caps: ExtractionCaps) =>
  `Reading the file went over the memory one item may use (${caps.memoryMb} MiB, KNOWLEDGE_MAX_MEMORY_MB): it expands far beyond its size. Its processing was stopped.`;
const cpuMessage = (caps: ExtractionCaps) =>
  `Reading the file went over the CPU time one item may use (${caps.cpuSeconds} s, KNOWLEDGE_MAX_CPU_S). Its processing was stopped.`;

/** CPU time (user + system) and resident memory of a process, from /proc; undefined where there is none. */
function readStat(pid: number): { cpuSeconds: number; residentBytes: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count fields after its last `)`.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 (utime, stime) and 24 (rss) of proc(5), here from field 3 on.
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { cpuSeconds: ticks / TICKS_PER_SECOND, residentBytes: Number(fields[21]) * PAGE_BYTES };
}

// ---------- the child side ----------

if (process.argv.includes(CHILD_FLAG) && process.send) {
  // Below its parent: the parent holds the store's write lock at times and must not wait for a CPU
  // behind its own child's parsing (docs/decisions/background-processes.md).
  try {
    setPriority(Math.max(getPriority(), EXTRACTION_NICE));
  } catch {
    // A platform without priorities: the caps still bound the child.
  }
  const { extractText } = await import('./extract/index.js');
  const { chunkSections, countTokens } = await import('./chunks.js');
  // The tokenizer's table takes most of a second to build: built before `ready`, not on an item's CPU time.
  countTokens('ready');
  process.send('ready');
  process.on('message', async (job: Job) => {
    let answer: ChildAnswer;
    try {
      const extracted = await extractText(job.bytes, job.contentType, job.filename);
      answer = { ok: 'failed' in extracted ? extracted : { sections: extracted.sections, chunks: chunkSections(extracted.sections, job.chunking) } };
    } catch (error) {
      answer = { error: error instanceof Error ? error.message : String(error) };
    }
    process.send!(answer);
  });
  // The parent gone (killed, crashed): nothing is left to answer.
  process.on('disconnect', () => process.exit(0));
}
