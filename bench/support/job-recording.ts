/**
 * What the knowledge jobs benchmark (bench/jobs.ts) works on: a long recording made by Debian's ffmpeg
 * once and kept in the OS temp dir between runs (an hour of video takes a minute or two to encode),
 * the transcript its fake transcription upstream answers for each piece (the same words whether the
 * job or the bench calls it), and the CPU time of this process's finished children.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { clockTicks } from './processes.js';

/**
 * `<tmp>/bench-jobs-cache/recording-<seconds>s-v2.mp4`, made when missing: a `testsrc2` picture at
 * 160x120 and 2 frames a second, scrolled a little each frame (as a camera pans or slides change: two
 * entries' frames 8 s apart differ, by 16 to 20 of 255 on media.ts's 16x16 thumbnails; `testsrc2`
 * alone repeats itself, so the frames step kept 3 of some 90 tried), and a 440 Hz tone, in MP4
 * (MPEG-4 Part 2 video, AAC mono 64 kbit/s audio, index at the front). Small and quick to make; the
 * audio, what a job spends its ffmpeg time on, is a real hour of it.
 */
export async function benchRecording(seconds: number): Promise<{ path: string; made: boolean }> {
  const dir = join(tmpdir(), 'bench-jobs-cache');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `recording-${seconds}s-v2.mp4`);
  if (existsSync(path)) return { path, made: false };
  const partial = `${path}.${process.pid}.partial.mp4`;
  try {
    await promisify(execFile)('ffmpeg', [
      ...['-nostdin', '-v', 'error', '-y'],
      ...['-f', 'lavfi', '-i', `testsrc2=duration=${seconds}:size=160x120:rate=2,scroll=h=0.0013:v=0.0029`],
      ...['-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`],
      ...['-c:v', 'mpeg4', '-c:a', 'aac', '-ac', '1', '-b:a', '64k', '-movflags', '+faststart', partial],
    ]);
    renameSync(partial, path);
  } finally {
    rmSync(partial, { force: true });
  }
  return { path, made: true };
}

/** Words the fake speaker says, drawn at random (seeded): every line its own, so no two entries merge. */
const WORDS = (
  'budget roadmap release customer vendor contract invoice schedule milestone migration database cluster region latency ' +
  'support ticket backlog sprint review design feedback pricing discount renewal onboarding training security audit ' +
  'compliance policy access token dashboard metric alert incident outage rollback deploy pipeline build test coverage ' +
  'staging production mobile browser checkout payment refund shipping warehouse inventory forecast quarter revenue ' +
  'margin hiring interview candidate offer manager team partner launch campaign webinar survey churn retention ' +
  'translation localization storage backup archive export import report meeting agenda decision owner deadline friday ' +
  'monday tuesday march april june september october november december morning afternoon tomorrow next week estimate ' +
  'risk blocker dependency approval legal finance marketing sales engineering product research analytics cost saving'
).split(' ');

function seeded(seed: string): () => number {
  let a = createHash('sha256').update(seed).digest().readUInt32LE(0);
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * What a Whisper-like upstream answers for a piece named `name` of `duration` seconds: a segment every
 * `segmentSeconds`, as many words as `wordsPerMinute` speech says in it, seeded by the piece's name
 * and the segment's place (the job and the bench's own calls get the same transcript).
 */
export function pieceTranscript(name: string, duration: number, segmentSeconds: number, wordsPerMinute: number) {
  const segments: { id: number; start: number; end: number; text: string }[] = [];
  for (let start = 0, id = 0; start < duration - 1e-6; start += segmentSeconds, id++) {
    const end = Math.min(duration, start + segmentSeconds);
    const random = seeded(`${name}#${id}`);
    const count = Math.max(3, Math.round((wordsPerMinute * (end - start)) / 60));
    const words = Array.from({ length: count }, () => WORDS[Math.floor(random() * WORDS.length)]);
    words[0] = words[0][0].toUpperCase() + words[0].slice(1);
    segments.push({ id, start, end, text: ` ${words.join(' ')}.` });
  }
  return { task: 'transcribe', language: 'english', duration, text: segments.map((s) => s.text).join(''), segments, usage: { type: 'duration', seconds: Math.ceil(duration) } };
}

let ticks: number | undefined;
/**
 * CPU seconds (user + system) of this process's children that ended and were waited for (ffmpeg and
 * ffprobe runs through prlimit, which execs them: the same process), from /proc/self/stat.
 */
export function childCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After "(comm)": cutime and cstime are fields 13 and 14 (0-based).
  return (Number(fields[13]) + Number(fields[14])) / (ticks ??= clockTicks());
}

/**
 * CPU seconds of every live process of a process group, split into the processes' own (Node, SQLite)
 * and their reaped children's (ffmpeg, ffprobe): where a job's CPU went beside ffmpeg's.
 */
export function groupCpuSplit(pgid: number): { own: number; children: number } {
  const t = (ticks ??= clockTicks());
  let own = 0;
  let children = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue;
    // A live ffmpeg (its parent has not reaped it yet) counts as a child's time.
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const self = (Number(fields[11]) + Number(fields[12])) / t;
    if (/^(ffmpeg|ffprobe|prlimit)$/.test(comm)) children += self;
    else own += self;
    children += (Number(fields[13]) + Number(fields[14])) / t;
  }
  return { own, children };
}
