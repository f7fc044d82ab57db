/** Code blocks of the docs, for tests that run what the docs show as written. */
import { readFileSync } from 'node:fs';

/** The fenced blocks of `docPath` (relative to the repository root) whose info string is one of `languages`. */
export function docBlocks(docPath: string, languages: readonly string[]): string[] {
  const text = readFileSync(new URL(`../../${docPath}`, import.meta.url), 'utf8');
  return [...text.matchAll(/^```([a-z]*)\n([\s\S]*?)^```$/gm)].filter((m) => languages.includes(m[1])).map((m) => m[2]);
}
