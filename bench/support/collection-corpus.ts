/**
 * The collections benchmark's documents and queries, made by the bench with the tests' own file
 * makers (test/helpers/knowledge-files.ts): a PDF of `pages` pages of prose (one page of about 450
 * words each, every page its own text), and `files` Markdown files of nested headings over seeded
 * paragraphs. Queries are spans of the indexed chunks' own words, so each resembles a passage.
 */
import { markdownFile, paragraphs, pdfFile, proseLines, type Block } from '../../test/helpers/knowledge-files.js';

export interface Corpus {
  pdf: Uint8Array;
  pages: number;
  markdown: { filename: string; text: string }[];
}

/** Sections of one Markdown file, each of this many paragraphs of this many sentences (about 260 words a section). */
const SECTIONS = 4;
const PARAGRAPHS = 3;
const SENTENCES = 6;

/** One Markdown file: a title, then SECTIONS second-level headings, the last with a third-level one. */
function markdownBlocks(file: number): Block[] {
  const blocks: Block[] = [{ heading: 1, text: `Document ${file + 1}` }];
  for (let s = 0; s < SECTIONS; s++) {
    blocks.push({ heading: s === SECTIONS - 1 ? 3 : 2, text: `Section ${s + 1} of document ${file + 1}` });
    for (const text of paragraphs(PARAGRAPHS, SENTENCES, file * 100 + s + 1)) blocks.push({ text });
  }
  return blocks;
}

export async function makeCorpus(pages: number, files: number): Promise<Corpus> {
  return {
    pdf: await pdfFile(proseLines(pages)),
    pages,
    markdown: Array.from({ length: files }, (_, i) => ({ filename: `doc-${String(i + 1).padStart(3, '0')}.md`, text: markdownFile(markdownBlocks(i)) })),
  };
}

/** `n` queries of 8 words each, taken from the chunks' texts in a fixed spread: the same texts for every subject. */
export function queryTexts(chunkTexts: string[], n: number): string[] {
  return Array.from({ length: n }, (_, i) => {
    const words = chunkTexts[(i * 7919) % chunkTexts.length].split(/\s+/).filter(Boolean);
    const from = (i * 31) % Math.max(1, words.length - 8);
    return words.slice(from, from + 8).join(' ');
  });
}
