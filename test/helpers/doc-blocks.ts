/** Code blocks of the docs, for tests that run what the docs show as written. */
import { readFileSync } from 'node:fs';

/** The fenced blocks of `docPath` (relative to the repository root) whose info string is one of `languages`. */
export function docBlocks(docPath: string, languages: readonly string[]): string[] {
  const text = readFileSync(new URL(`../../${docPath}`, import.meta.url), 'utf8');
  return [...text.matchAll(/^```([a-z]*)\n([\s\S]*?)^```$/gm)].filter((m) => languages.includes(m[1])).map((m) => m[2]);
}

export interface Fence {
  /** The info string (`sh`, `js`, or empty). */
  language: string;
  /** The block's text, the fence's indentation taken off (a block inside a list item is indented). */
  body: string;
  /** The 1-based line of the block's first line in the file. */
  line: number;
}

/** Every fenced block of a Markdown text, indented ones too, and the text with each block's lines emptied (their count kept, for the inline code). */
export function fences(text: string): { fences: Fence[]; prose: string } {
  const found: Fence[] = [];
  const prose = text.replace(/^( *)```([a-z]*)[^\n]*\n([\s\S]*?)^\1```[ \t]*$/gm, (whole: string, indent: string, language: string, body: string, offset: number) => {
    const line = text.slice(0, offset).split('\n').length + 1;
    found.push({ language, line, body: body.split('\n').map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l.trimStart())).join('\n') });
    return whole.replace(/[^\n]/g, '');
  });
  return { fences: found, prose };
}
