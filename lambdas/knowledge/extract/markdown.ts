/**
 * Markdown (marked's lexer): its headings, ATX and setext, are the locators; the text under a
 * heading is kept as written, Markdown and all: it reads as text, and a citation quotes the file as
 * its author wrote it. A YAML front matter block is metadata, not text, and is left out.
 */
import { Lexer, type Token } from 'marked';
import { Outline } from './outline.js';
import type { Section } from './types.js';

const FRONT_MATTER = /^---\r?\n[\s\S]*?\r?\n---[ \t]*(?:\r?\n|$)/;

/** Past this, a heading's title is taken as written rather than read for its inline Markdown. */
const MAX_HEADING_CHARS = 1000;

export function markdownSections(markdown: string): Section[] {
  const outline = new Outline();
  const source = markdown.replace(/\r\n?/g, '\n').replace(FRONT_MATTER, '');
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

/** A heading's words without their inline Markdown (links, emphasis, code marks). */
function plain(tokens: Token[]): string {
  return tokens.map((t) => ('tokens' in t && t.tokens ? plain(t.tokens) : 'text' in t ? String(t.text) : '')).join('');
}
