/**
 * Documents the knowledge tests and benchmarks make themselves (no binaries checked in): a PDF whose
 * pages each hold their own text (pdf-lib), a DOCX with Word's heading styles (docx), HTML and
 * Markdown with nested headings, and recordings made by ffmpeg.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Document, HeadingLevel, Packer, Paragraph } from 'docx';
import { PDFDocument, StandardFonts } from 'pdf-lib';

/** A PDF with one page per entry, each page's lines drawn top to bottom (Helvetica: WinAnsi text only). */
export async function pdfFile(pages: string[][]): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (const lines of pages) {
    const page = doc.addPage([595, 842]);
    lines.forEach((line, i) => page.drawText(line, { x: 50, y: 800 - i * 14, size: 10, font }));
  }
  return doc.save();
}

/** `n` pages of prose, each page about `words` words in lines of 12, naming its page: `Page 7 ...`. */
export function proseLines(n: number, words = 450): string[][] {
  const vocabulary = ['collections', 'answer', 'questions', 'with', 'citations', 'to', 'the', 'page', 'heading', 'or', 'time', 'they', 'came', 'from', 'and', 'every', 'item', 'is', 'indexed', 'once'];
  return Array.from({ length: n }, (_, p) => {
    const lines: string[] = [];
    let line: string[] = [`Page ${p + 1}`];
    for (let w = 0; w < words; w++) {
      line.push(vocabulary[(w * 7 + p) % vocabulary.length] + (w % 15 === 14 ? '.' : ''));
      if (line.length === 12) {
        lines.push(line.join(' '));
        line = [];
      }
    }
    if (line.length) lines.push(line.join(' '));
    return lines;
  });
}

export type Block = { heading: 1 | 2 | 3; text: string } | { text: string };

const LEVELS = { 1: HeadingLevel.HEADING_1, 2: HeadingLevel.HEADING_2, 3: HeadingLevel.HEADING_3 } as const;

/** A DOCX whose headings use Word's Heading 1-3 styles and whose other blocks are plain paragraphs. */
export async function docxFile(blocks: Block[]): Promise<Uint8Array> {
  const doc = new Document({
    sections: [{ children: blocks.map((b) => new Paragraph('heading' in b ? { text: b.text, heading: LEVELS[b.heading] } : { text: b.text })) }],
  });
  return new Uint8Array(await Packer.toBuffer(doc));
}

/** The blocks the DOCX, HTML and Markdown fixtures share: an introduction, then nested headings. */
export const OUTLINE: Block[] = [
  { text: 'This guide installs the platform.' },
  { heading: 1, text: 'Install' },
  { text: 'Pick your system below.' },
  { heading: 2, text: 'Linux' },
  { text: 'Run the package manager.' },
  { text: 'Then start the service.' },
  { heading: 3, text: 'Debian' },
  { text: 'Use apt.' },
  { heading: 2, text: 'macOS' },
  { text: 'Use Homebrew.' },
  { heading: 1, text: 'Use' },
  { text: 'Open the console.' },
];

/** The outline as an HTML page, with what a reader never sees (script, style, navigation, hidden text) around it. */
export function htmlFile(blocks: Block[] = OUTLINE): string {
  const body = blocks.map((b) => ('heading' in b ? `<h${b.heading}>${escape(b.text)}</h${b.heading}>` : `<p>${escape(b.text)}</p>`)).join('\n');
  return `<!doctype html><html><head><title>Guide</title><style>p { color: red }</style><script>var secret = 1;</script></head>
<body><nav><a href="/">Home</a> <a href="/docs">Docs</a></nav><div hidden>hidden text</div>
${body}
<script>console.log('not text')</script></body></html>`;
}

/** The outline as Markdown (ATX headings), with a front matter block. */
export function markdownFile(blocks: Block[] = OUTLINE): string {
  return `---\ntitle: Guide\n---\n` + blocks.map((b) => ('heading' in b ? `${'#'.repeat(b.heading)} ${b.text}` : b.text)).join('\n\n') + '\n';
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** `count` paragraphs of `sentences` sentences each (5 to 24 words), the same for the same seed. */
export function paragraphs(count: number, sentences: number, seed = 1): string[] {
  const words = ['vector', 'index', 'stores', 'chunks', 'of', 'every', 'document', 'and', 'cites', 'its', 'pages', 'headings', 'when', 'a', 'query', 'arrives', 'from', 'an', 'application', 'platform'];
  let state = seed;
  const next = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  return Array.from({ length: count }, (_, p) =>
    Array.from({ length: sentences }, (_, s) => {
      const n = 5 + Math.floor(next() * 20);
      const body = Array.from({ length: n }, () => words[Math.floor(next() * words.length)]).join(' ');
      return `P${p}S${s} ${body}.`;
    }).join(' '),
  );
}

export interface RecordingFileOptions {
  seconds: number;
  /** `mp4` (the default): a test picture and, unless `audio: false`, a 440 Hz tone; `wav`: the tone only. */
  container?: 'mp4' | 'wav';
  audio?: boolean;
}

/** A short recording made by ffmpeg from its own sources (`testsrc`, `sine`), read back as bytes. */
export async function recordingFile(opts: RecordingFileOptions): Promise<Uint8Array> {
  const { seconds, container = 'mp4', audio = true } = opts;
  const dir = await mkdtemp(join(tmpdir(), 'recording-file-'));
  try {
    const out = join(dir, `recording.${container}`);
    const picture = container === 'mp4' ? ['-f', 'lavfi', '-i', `testsrc=duration=${seconds}:size=160x120:rate=10`] : [];
    const tone = audio ? ['-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`] : [];
    const codecs = container === 'mp4' ? ['-c:v', 'mpeg4', ...(audio ? ['-c:a', 'aac'] : [])] : [];
    await promisify(execFile)('ffmpeg', ['-nostdin', '-v', 'error', ...picture, ...tone, ...codecs, out]);
    return new Uint8Array(await readFile(out));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface RecordingAtOptions {
  seconds: number;
  /** `moving` (`testsrc2`: every few seconds looks different, the default), `still` (plain blue, every frame the same) or `none`. */
  picture?: 'moving' | 'still' | 'none';
  /** A 440 Hz tone (default true). */
  audio?: boolean;
  /** Picture size (default 160x120, 10 frames a second). */
  size?: string;
  /** Video bitrate (e.g. `8M`) over a noisy picture that cannot be compressed: a file large for its length. */
  videoBitrate?: string;
}

/**
 * A recording written by ffmpeg at `path` from its own sources; the extension picks the container
 * (MP4 is written with its index at the front, `+faststart`, as a reader over HTTP wants it).
 */
export async function recordingAt(path: string, opts: RecordingAtOptions): Promise<string> {
  const { seconds, picture = 'moving', audio = true, size = '160x120', videoBitrate } = opts;
  const frames = `duration=${seconds}:size=${size}:rate=10`;
  const source = picture === 'still' ? `color=c=blue:${frames}` : `testsrc2=${frames}${videoBitrate ? ',noise=alls=30:allf=t' : ''}`;
  const video = picture === 'none' ? [] : ['-f', 'lavfi', '-i', source];
  const tone = audio ? ['-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`] : [];
  const mp4 = /\.(mp4|m4a|mov)$/.test(path);
  const codecs = [
    ...(picture !== 'none' && mp4 ? ['-c:v', 'mpeg4', ...(videoBitrate ? ['-b:v', videoBitrate] : [])] : []),
    ...(audio && mp4 ? ['-c:a', 'aac'] : []),
    ...(mp4 ? ['-movflags', '+faststart'] : []),
  ];
  await promisify(execFile)('ffmpeg', ['-nostdin', '-v', 'error', '-y', ...video, ...tone, ...codecs, path]);
  return path;
}
