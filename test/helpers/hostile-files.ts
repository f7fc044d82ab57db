/**
 * The hostile files of issue 32's attack, made on the spot (no binaries checked in), each small to
 * send and costly to read naively: a PDF listing one page 300,000 times, DOCX zip bombs (one entry
 * of 1 GiB; 400 MiB of tiny paragraphs), a DOCX nested 200,000 deep, 1 MiB of pathological Markdown,
 * and binary bytes under a text type; and a PDF whose one page's content inflates to 1 GiB. Deterministic, and fast: all of them take well under a second
 * to make (the big deflate streams are a short compressed segment repeated, not 1 GiB compressed).
 * Each is `{ filename, contentType, bytes }`, ready to send as an item.
 */
import { constants, crc32, deflateRawSync } from 'node:zlib';

export interface HostileFile {
  filename: string;
  contentType: string;
  bytes: Uint8Array;
}

const MiB = 1024 * 1024;
export const DOCX_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

// --- PDF ---------------------------------------------------------------------------------------

/**
 * A valid PDF (cross-reference table and all) whose page tree lists one page `times` times
 * (`/Count` says so too): 1.8 MB for 300,000. Read naively, every listing is a page of its own.
 */
export function repeatedPagePdf(times = 300_000): HostileFile {
  const kids = '3 0 R '.repeat(times);
  return pdfFile('repeated-page.pdf', [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Count ${times} /Kids [${kids}] >>`,
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    stream('BT /F1 12 Tf 50 800 Td (The one page, listed many times.) Tj ET'),
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ]);
}

/** A PDF whose page tree loops: the root's kid is a node whose kid is the root again. */
export function loopingPageTreePdf(): HostileFile {
  return pdfFile('looping-pages.pdf', [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Count 2 /Kids [3 0 R] >>',
    '<< /Type /Pages /Parent 2 0 R /Count 2 /Kids [2 0 R 4 0 R] >>',
    '<< /Type /Page /Parent 3 0 R /MediaBox [0 0 595 842] /Contents 5 0 R /Resources << /Font << /F1 6 0 R >> >> >>',
    stream('BT /F1 12 Tf 50 800 Td (A page inside a loop.) Tj ET'),
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ]);
}

/**
 * A PDF of one page whose content stream (one line of text, then spaces) inflates to
 * `inflatedBytes` (1 GiB): about 1 MB sent, deflate's best. Read naively its one page is decoded whole.
 */
export function flateBombPdf(inflatedBytes = 1024 * MiB): HostileFile {
  const head = Buffer.from('BT /F1 12 Tf 50 800 Td (The page under the bomb.) Tj ET\n');
  const segment = Buffer.alloc(MiB, 0x20);
  let flushed = flushedSpaces.get(MiB);
  if (!flushed) flushedSpaces.set(MiB, (flushed = deflateRawSync(segment, { level: 9, finishFlush: constants.Z_FULL_FLUSH })));
  const count = Math.max(1, Math.round((inflatedBytes - head.length) / MiB));
  // zlib's wrapping: its header, the deflate stream, then the Adler-32 of every byte (for a run of one byte value, a sum).
  const adler = adlerExtend(adler32(head), 0x20, count * MiB);
  const trailer = Buffer.alloc(4);
  trailer.writeUInt32BE(adler >>> 0);
  const data = Buffer.concat([Buffer.from([0x78, 0xda]), deflateRawSync(head, { finishFlush: constants.Z_FULL_FLUSH }), ...Array<Buffer>(count).fill(flushed), deflateRawSync(Buffer.alloc(0)), trailer]);
  return pdfFile('flate-bomb.pdf', [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Count 1 /Kids [3 0 R] >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    Buffer.concat([Buffer.from(`<< /Length ${data.length} /Filter /FlateDecode >>\nstream\n`), data, Buffer.from('\nendstream')]),
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ]);
}

const flushedSpaces = new Map<number, Buffer>();

function adler32(bytes: Buffer): number {
  let a = 1;
  let b = 0;
  for (const byte of bytes) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

/** The Adler-32 of bytes whose checksum is `adler`, followed by `n` bytes of `value`. */
function adlerExtend(adler: number, value: number, n: number): number {
  const M = 65521n;
  const a = BigInt(adler & 0xffff);
  const b = BigInt(adler >>> 16);
  const N = BigInt(n);
  const v = BigInt(value);
  const a2 = (a + N * v) % M;
  const b2 = (b + N * a + (v * N * (N + 1n)) / 2n) % M;
  return Number((b2 << 16n) | a2);
}

function stream(content: string): string {
  return `<< /Length ${content.length} >>\nstream\n${content}\nendstream`;
}

/** A PDF of the given objects (numbered from 1, the first being the catalog), with a correct xref table. */
function pdfFile(filename: string, objects: (string | Buffer)[]): HostileFile {
  const parts = [Buffer.from('%PDF-1.7\n')];
  let length = parts[0].length;
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(length);
    const obj = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), typeof body === 'string' ? Buffer.from(body, 'latin1') : body, Buffer.from('\nendobj\n')]);
    parts.push(obj);
    length += obj.length;
  });
  const xref = [`xref\n0 ${objects.length + 1}\n`, '0000000000 65535 f \n', ...offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`)].join('');
  parts.push(Buffer.from(`${xref}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`));
  return { filename, contentType: 'application/pdf', bytes: new Uint8Array(Buffer.concat(parts)) };
}

// --- DOCX --------------------------------------------------------------------------------------

const W = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main';
const DOC_HEAD = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="${W}"><w:body>`;
const DOC_TAIL = '</w:body></w:document>';

/**
 * A DOCX whose word/document.xml inflates to `inflatedBytes` (1 GiB), nearly all of it one text run
 * of one letter: about 1 MB sent (deflate's best, about 1,000:1). `declaredBytes` (default: the
 * truth) is the size its zip directory claims, so a reader that trusts the directory is tested too.
 */
export function zipBombDocx(opts: { inflatedBytes?: number; declaredBytes?: number } = {}): HostileFile {
  const inflated = opts.inflatedBytes ?? 1024 * MiB;
  return docxOf('zip-bomb.docx', repeatedDeflate(`${DOC_HEAD}<w:p><w:r><w:t>`, 'a', `</w:t></w:r></w:p>${DOC_TAIL}`, inflated), opts.declaredBytes);
}

/** A DOCX of `inflatedBytes` (400 MiB) of tiny paragraphs (`<w:p>` of one letter's run, 33 bytes each), about 1.2 MB sent. */
export function tinyParagraphsDocx(inflatedBytes = 400 * MiB): HostileFile {
  return docxOf('tiny-paragraphs.docx', repeatedDeflate(DOC_HEAD, '<w:p><w:r><w:t>a</w:t></w:r></w:p>', DOC_TAIL, inflatedBytes));
}

/** A DOCX whose word/document.xml body is `xml`, deflated as any zip writer would. */
export function docxWithBody(xml: string, filename = 'body.docx'): HostileFile {
  return docxWithDocument(`${DOC_HEAD}${xml}${DOC_TAIL}`, filename);
}

/** A DOCX whose word/document.xml is `xml`, whole (a DTD, another root), deflated as any zip writer would. */
export function docxWithDocument(xml: string, filename = 'document.docx'): HostileFile {
  const raw = Buffer.from(xml);
  return docxOf(filename, { data: deflateRawSync(raw), size: raw.length, crc: crc32(raw) });
}

/** A DOCX whose body is `xml` (say, one paragraph) repeated to `inflatedBytes`: for measuring what each element costs. */
export function repeatingDocx(xml: string, inflatedBytes: number, filename = 'repeating.docx'): HostileFile {
  return docxOf(filename, repeatedDeflate(DOC_HEAD, xml, DOC_TAIL, inflatedBytes));
}

/**
 * A DOCX (~50 KB) whose body nests `depth` (200,000) elements inside each other: runs of tracked
 * insertions and smart tags, switching at random (seeded), so its XML deflates about 80:1 as a
 * real document's might, not the 1,000:1 of pure repetition: it is its nesting a reader must notice.
 */
export function deepNestingDocx(depth = 200_000): HostileFile {
  let state = 1;
  let name = 'w:ins';
  const names: string[] = [];
  for (let i = 0; i < depth; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    if ((state >>> 16) % 8 === 0) name = name === 'w:ins' ? 'w:smartTag' : 'w:ins';
    names.push(name);
  }
  const opens = names.map((n) => `<${n}>`).join('');
  const closes = names.reverse().map((n) => `</${n}>`).join('');
  const xml = Buffer.from(`${DOC_HEAD}<w:p>${opens}<w:r><w:t>deep</w:t></w:r>${closes}</w:p>${DOC_TAIL}`);
  return docxOf('deep-nesting.docx', { data: deflateRawSync(xml, { level: 9 }), size: xml.length, crc: crc32(xml) });
}

interface Deflated {
  /** A raw deflate stream. */
  data: Buffer;
  size: number;
  crc: number;
}

const segments = new Map<string, { raw: Buffer; flushed: Buffer }>();

/**
 * `prefix`, `unit` repeated to about `bytes` in all, then `suffix`, as one raw deflate stream built
 * without compressing it all: after a full flush deflate refers to nothing before it, so a MiB
 * segment's compressed bytes can be repeated as they are (compressed once per process).
 */
function repeatedDeflate(prefix: string, unit: string, suffix: string, bytes: number): Deflated {
  let segment = segments.get(unit);
  if (!segment) {
    const raw = Buffer.from(unit.repeat(Math.max(1, Math.floor(MiB / unit.length))));
    segment = { raw, flushed: deflateRawSync(raw, { level: 9, finishFlush: constants.Z_FULL_FLUSH }) };
    segments.set(unit, segment);
  }
  const head = Buffer.from(prefix);
  const tail = Buffer.from(suffix);
  const count = Math.max(1, Math.round((bytes - head.length - tail.length) / segment.raw.length));
  const parts: Buffer[] = [deflateRawSync(head, { finishFlush: constants.Z_FULL_FLUSH })];
  // The CRC is over every byte (zlib's crc32 reads a GiB in about 0.2 s).
  let crc = crc32(head);
  for (let i = 0; i < count; i++) {
    parts.push(segment.flushed);
    crc = crc32(segment.raw, crc);
  }
  parts.push(deflateRawSync(tail));
  crc = crc32(tail, crc);
  return { data: Buffer.concat(parts), size: head.length + count * segment.raw.length + tail.length, crc };
}

/** A DOCX of the given word/document.xml (first in the zip) and the parts Word needs around it. */
function docxOf(filename: string, document: Deflated, declaredSize = document.size): HostileFile {
  const small = (name: string, text: string): ZipEntry => {
    const raw = Buffer.from(text);
    return { name, data: deflateRawSync(raw), method: 8, size: raw.length, crc: crc32(raw) };
  };
  const entries: ZipEntry[] = [
    { name: 'word/document.xml', data: document.data, method: 8, size: declaredSize, crc: document.crc },
    small(
      '[Content_Types].xml',
      '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    ),
    small(
      '_rels/.rels',
      '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    ),
  ];
  return { filename, contentType: DOCX_TYPE, bytes: zipFile(entries) };
}

export interface ZipEntry {
  name: string;
  /** The entry's bytes as stored: raw deflate for method 8, as they are for method 0. */
  data: Uint8Array;
  method: 0 | 8;
  /** The inflated size the zip declares (local header and central directory). */
  size: number;
  crc: number;
}

/**
 * A zip of the entries, in order (no data descriptors). `zip64`: every size and offset in zip64
 * extra fields and a zip64 end record, as writers that stream do.
 */
export function zipFile(entries: ZipEntry[], opts: { zip64?: boolean } = {}): Uint8Array {
  const zip64 = opts.zip64 ?? false;
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name);
    const localExtra = zip64 ? zip64Extra([e.size, e.data.length]) : Buffer.alloc(0);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(zip64 ? 45 : 20, 4);
    local.writeUInt16LE(0x0800, 6); // names in UTF-8
    local.writeUInt16LE(e.method, 8);
    local.writeUInt32LE(0x21, 10); // 1980-01-01 00:00
    local.writeUInt32LE(e.crc >>> 0, 14);
    local.writeUInt32LE(zip64 ? 0xffffffff : e.data.length, 18);
    local.writeUInt32LE(zip64 ? 0xffffffff : e.size, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(localExtra.length, 28);
    locals.push(local, name, localExtra, Buffer.from(e.data.buffer, e.data.byteOffset, e.data.length));
    const centralExtra = zip64 ? zip64Extra([e.size, e.data.length, offset]) : Buffer.alloc(0);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(zip64 ? 45 : 20, 4);
    central.writeUInt16LE(zip64 ? 45 : 20, 6);
    local.copy(central, 8, 6, 26);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt16LE(centralExtra.length, 30);
    central.writeUInt32LE(zip64 ? 0xffffffff : offset, 42);
    centrals.push(central, name, centralExtra);
    offset += 30 + name.length + localExtra.length + e.data.length;
  }
  const directory = Buffer.concat(centrals);
  const tail: Buffer[] = [];
  if (zip64) {
    const record = Buffer.alloc(56);
    record.writeUInt32LE(0x06064b50, 0);
    record.writeBigUInt64LE(44n, 4);
    record.writeUInt16LE(45, 12);
    record.writeUInt16LE(45, 14);
    record.writeBigUInt64LE(BigInt(entries.length), 24);
    record.writeBigUInt64LE(BigInt(entries.length), 32);
    record.writeBigUInt64LE(BigInt(directory.length), 40);
    record.writeBigUInt64LE(BigInt(offset), 48);
    const locator = Buffer.alloc(20);
    locator.writeUInt32LE(0x07064b50, 0);
    locator.writeBigUInt64LE(BigInt(offset + directory.length), 8);
    locator.writeUInt32LE(1, 16);
    tail.push(record, locator);
  }
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(zip64 ? 0xffff : entries.length, 8);
  end.writeUInt16LE(zip64 ? 0xffff : entries.length, 10);
  end.writeUInt32LE(zip64 ? 0xffffffff : directory.length, 12);
  end.writeUInt32LE(zip64 ? 0xffffffff : offset, 16);
  return new Uint8Array(Buffer.concat([...locals, directory, ...tail, end]));
}

/** A zip64 extra field holding `values` (sizes, then an offset) as 64-bit numbers. */
function zip64Extra(values: number[]): Buffer {
  const extra = Buffer.alloc(4 + 8 * values.length);
  extra.writeUInt16LE(1, 0);
  extra.writeUInt16LE(8 * values.length, 2);
  values.forEach((v, i) => extra.writeBigUInt64LE(BigInt(v), 4 + 8 * i));
  return extra;
}

// --- Markdown ----------------------------------------------------------------------------------

/**
 * The attack's Markdown families, and those that cost marked's block pass most per byte: runs of
 * one inline mark, container lines (nested lists and quotes within the nesting that is still read
 * as Markdown, quotes with lazy continuation lines), tables, reference definitions, headings; and
 * long runs of spaces inside a line (a trailing-space pattern once tried each of them again), and
 * headings whose titles are runs of emphasis marks (titles are still read for their inline Markdown).
 */
export const MARKDOWN_FAMILIES = {
  brackets: '[',
  backticks: '`',
  asterisks: '*a',
  underscores: '_a',
  angles: '<',
  ampersands: '&',
  'list-indent': Array.from({ length: 127 }, (_, i) => `${'  '.repeat(i)}- a\n`).join(''),
  'list-items': '- a\n',
  quotes: Array.from({ length: 64 }, (_, i) => `${'>'.repeat(i + 1)} a\n`).join(''),
  'lazy-quotes': '> a\nb\n',
  tables: '| a | b | c | d |\n| - | - | - | - |\n',
  'reference-definitions': '[a]: b\n',
  headings: '# a\n',
  setext: 'a\n=\n',
  'space-runs': `a${' '.repeat(256 * 1024)}b\n`,
  'heading-titles': `# ${'_a'.repeat(255)}\nx\n`,
} as const;

export type MarkdownFamily = keyof typeof MARKDOWN_FAMILIES;

/** `bytes` (1 MiB) of one family's unit repeated, as a Markdown item. */
export function pathologicalMarkdown(family: MarkdownFamily, bytes = MiB): HostileFile {
  const unit = MARKDOWN_FAMILIES[family];
  const text = unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
  return { filename: `${family}.md`, contentType: 'text/markdown', bytes: new Uint8Array(Buffer.from(text)) };
}

/** Plain prose of `bytes` (1 MiB) in lines and paragraphs: what pathological Markdown is measured against. */
export function proseMarkdown(bytes = MiB): HostileFile {
  const unit = 'The quick brown fox jumps over the lazy dog, and the dog sleeps on.\nAnother line of the same paragraph follows it here.\n\n';
  return { filename: 'prose.md', contentType: 'text/markdown', bytes: new Uint8Array(Buffer.from(unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes))) };
}

// --- Binary under a text type --------------------------------------------------------------------

/** A real 1x1 PNG sent as Markdown. */
export function pngAsMarkdown(): HostileFile {
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==', 'base64');
  return { filename: 'image.md', contentType: 'text/markdown', bytes: new Uint8Array(png) };
}

/** Headers of binary formats (the rest of each file made of bytes with no NUL, so only the header tells). */
export const BINARY_HEADS = {
  png: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
  jpeg: [0xff, 0xd8, 0xff, 0xe0],
  gif: [...Buffer.from('GIF89a')],
  webp: [...Buffer.from('RIFF'), 0x24, 0x10, 0x01, 0x01, ...Buffer.from('WEBPVP8 ')],
  zip: [0x50, 0x4b, 0x03, 0x04],
  gzip: [0x1f, 0x8b, 0x08, 0x08],
  bzip2: [...Buffer.from('BZh91AY&SY')],
  xz: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00],
  '7z': [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c],
  rar: [...Buffer.from('Rar!'), 0x1a, 0x07, 0x01],
  zstd: [0x28, 0xb5, 0x2f, 0xfd],
  elf: [0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x01],
  'mach-o': [0xcf, 0xfa, 0xed, 0xfe],
  wasm: [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
  sqlite: [...Buffer.from('SQLite format 3'), 0x00],
  ole2: [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1],
} as const;

export type BinaryKind = keyof typeof BINARY_HEADS;

/**
 * A file of `kind` under a text type (`.md` as text/markdown, or `.txt` as text/plain): its header,
 * then 4 KiB of printable bytes, so only the header says it is binary.
 */
export function binaryAsText(kind: BinaryKind, as: 'markdown' | 'text' = 'text'): HostileFile {
  const rest = Buffer.from('x'.repeat(4096));
  const bytes = new Uint8Array(Buffer.concat([Buffer.from(BINARY_HEADS[kind]), rest]));
  return as === 'markdown' ? { filename: `${kind}.md`, contentType: 'text/markdown', bytes } : { filename: `${kind}.txt`, contentType: 'text/plain', bytes };
}

/** A PE executable's start (`MZ`, the DOS stub's pointer to `PE\0\0`) sent as text/plain. */
export function exeAsText(): HostileFile {
  const head = Buffer.alloc(256, 0x78);
  head.write('MZ', 0, 'latin1');
  head.writeUInt32LE(0x80, 0x3c);
  head.write('PE\0\0', 0x80, 'latin1');
  return { filename: 'setup.txt', contentType: 'text/plain', bytes: new Uint8Array(head) };
}

/** Random bytes without NUL (a share of them control bytes, as in any binary) sent as text/plain. */
export function noiseAsText(bytes = 64 * 1024): HostileFile {
  let state = 7;
  const out = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    out[i] = 1 + ((state >>> 16) % 255);
  }
  return { filename: 'noise.txt', contentType: 'text/plain', bytes: out };
}
