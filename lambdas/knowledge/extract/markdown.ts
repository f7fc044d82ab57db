/**
 * Markdown (marked's lexer): its headings, ATX and setext, are the locators; the text under a
 * heading is kept as written, Markdown and all: it reads as text, and a citation quotes the file as
 * its author wrote it. A YAML front matter block is metadata, not text, and is left out.
 */
import { Lexer, type Token } from 'marked';
import { Outline } from './outline.js';
import { plainTextSections } from './text.js';
import type { Section } from './types.js';

const FRONT_MATTER = /^---\r?\n[\s\S]*?\r?\n---[ \t]*(?:\r?\n|$)/;

/**
 * Nesting past which marked's block pass costs too much (its time grows with the cube of list depth:
 * 800 levels took 3.5 s; 1,600 levels of quotes 2.4 s, and deeper ones overflow the stack): a file
 * nested deeper is read as plain text, whole, located by its lines.
 */
const MAX_INDENT_COLUMNS = 256;
const MAX_QUOTE_DEPTH = 64;
/** A line's leading spaces, tabs and quote marks. */
const LEADING = /^[ \t>]*/gm;

/** Past this, a heading's title is taken as written rather than read for its inline Markdown. */
const MAX_HEADING_CHARS = 1000;

export function markdownSections(markdown: string): Section[] {
  const outline = new Outline();
  const source = markdown.replace(/\r\n?/g, '\n').replace(FRONT_MATTER, '');
  if (nestedTooDeep(source)) return plainTextSections(source);
  const lexer = new Lexer();
  // Blocks only: the text is kept as written, so only headings need their inline Markdown read.
  // marked's inline pass takes time super-linear in runs of emphasis marks (`*a*a*a...`: 128,000
  // characters took 6 s), which a body of any size may hold; a heading is one short line.
  for (const token of lexer.blockTokens(source, [])) {
    if (token.type === 'heading') outline.heading(token.depth, token.text.length > MAX_HEADING_CHARS ? token.text : plain(lexer.inlineTokens(token.text)));
    else outline.text(token.raw);
  }
  return outline.finish();
}

function nestedTooDeep(source: string): boolean {
  for (const [lead] of source.matchAll(LEADING)) {
    if (lead.length <= MAX_QUOTE_DEPTH) continue;
    let quotes = 0;
    let columns = 0;
    for (const ch of lead) {
      if (ch === '>') quotes++;
      else columns += ch === '\t' ? 4 : 1;
    }
    if (quotes > MAX_QUOTE_DEPTH || columns > MAX_INDENT_COLUMNS) return true;
  }
  return false;
}

/** A heading's words without their inline Markdown (links, emphasis, code marks). */
function plain(tokens: Token[]): string {
  return tokens.map((t) => ('tokens' in t && t.tokens ? plain(t.tokens) : 'text' in t ? String(t.text) : '')).join('');
}
