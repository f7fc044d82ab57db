/**
 * Extraction and chunking bundle as a function's code does (the stack's esbuild settings, one ESM
 * file) and run from that file alone: no parser is left outside the bundle, none needs a native
 * module, and the tokenizer's table is inside it.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { esbuildOptions, PROJECT_ROOT } from '../../lib/function-defaults.js';
import { docxFile, OUTLINE, pdfFile } from '../helpers/knowledge-files.js';

const dir = mkdtempSync(join(tmpdir(), 'knowledge-bundle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('knowledge extraction in a Lambda bundle', () => {
  it('runs from the bundle alone: a PDF and a DOCX extracted and chunked', async () => {
    const result = await build({
      ...esbuildOptions(),
      stdin: {
        contents: "export { extractText } from './lambdas/knowledge/extract/index.ts'; export { chunkSections } from './lambdas/knowledge/chunks.ts';",
        resolveDir: PROJECT_ROOT,
        loader: 'ts',
      },
      outfile: join(dir, 'knowledge.mjs'),
      metafile: true,
    });
    expect(result.errors).toEqual([]);
    // Everything is in the one file: nothing imported at run time but Node's own modules.
    const imports = Object.values(result.metafile.outputs).flatMap((o) => o.imports.filter((i) => i.external).map((i) => i.path));
    expect(imports.filter((p) => !p.startsWith('node:') && !['fs', 'path', 'url', 'crypto', 'stream', 'util', 'events', 'buffer', 'zlib', 'os'].includes(p))).toEqual([]);
    writeFileSync(join(dir, 'doc.pdf'), await pdfFile([['First page.'], ['Second page.']]));
    writeFileSync(join(dir, 'doc.docx'), await docxFile(OUTLINE));
    writeFileSync(
      join(dir, 'run.mjs'),
      `import { readFileSync } from 'node:fs';
import { extractText, chunkSections } from './knowledge.mjs';
const pdf = await extractText(readFileSync('doc.pdf'), 'application/pdf', 'doc.pdf');
const docx = await extractText(readFileSync('doc.docx'), 'application/octet-stream', 'doc.docx');
const locators = (x) => (x.sections ? chunkSections(x.sections).map((c) => c.locator) : x);
console.log(JSON.stringify({ pdf: locators(pdf), docx: locators(docx) }));`,
    );
    const { stdout } = await promisify(execFile)(process.execPath, ['run.mjs'], { cwd: dir });
    expect(JSON.parse(stdout)).toEqual({
      pdf: ['page=1', 'page=2'],
      docx: ['top', 'heading=Install', 'heading=Install > Linux', 'heading=Install > Linux > Debian', 'heading=Install > macOS', 'heading=Use'],
    });
    // Recorded in docs/decisions/knowledge-extraction.md (~MB, most of it PDF.js and the tokenizer's table).
    expect(statSync(join(dir, 'knowledge.mjs')).size).toBeLessThan(8 * 1024 * 1024);
  }, 90_000); // an esbuild of every parser, then a fresh node: 14 s on a loaded 2-core machine, over 30 s under a benchmark beside it
});
