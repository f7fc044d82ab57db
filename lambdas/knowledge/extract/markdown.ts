/**
 * Markdown (marked's lexer): its headings, ATX and setext, are the locators; the text under a
 * heading is kept as written, Markdown and all: it reads as text, and a citation quotes the file as
 * its author wrote it. A YAML front matter block is metadata, not text, and is left out.
 */
import { Lexer, type Token } from 'marked';
import { Outline } from './outline.js';
import type { Section } from './types.js';

const FRONT_MATTER = /^---\r?\n[\s\S]*?\r?\n---[ \t]*(?:\r?\n|$)/;

export function markdownSections(markdown: string): Section[] {
  const outline = new Outline();
  const source = markdown.replace(/\r\n?/g, '\n').replace(FRONT_MATTER, '');
  for (const token of new Lexer().lex(source)) {
    if (token.type === 'heading') outline.heading(token.depth, plain(token.tokens ?? []));
    else outline.text(token.raw);
  }
  return outline.finish();
}

/** A heading's words without their inline Markdown (links, emphasis, code marks). */
function plain(tokens: Token[]): string {
  return tokens.map((t) => ('tokens' in t && t.tokens ? plain(t.tokens) : 'text' in t ? String(t.text) : '')).join('');
}
