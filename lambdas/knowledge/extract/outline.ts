/**
 * Sections by headings, shared by the formats that have them (HTML, DOCX through its HTML, Markdown):
 * each heading starts a section whose locator is the path of headings above it and itself
 * (`heading=Install > Linux`); text before the first heading is `top`. A section's text begins
 * with its own heading's line, so a chunk of it still says what it is about; a heading with no
 * text under it (before a subheading) makes no section of its own.
 */
import type { Section } from './types.js';

export class Outline {
  private readonly path: { level: number; title: string }[] = [];
  private parts: string[] = [];
  private hasBody = false;
  private readonly done: Section[] = [];

  /** A heading of `level` (1 for the topmost): the section so far ends, its own begins. */
  heading(level: number, title: string): void {
    this.flush();
    const clean = title.replace(/\s+/g, ' ').trim();
    while (this.path.length > 0 && this.path[this.path.length - 1].level >= level) this.path.pop();
    if (clean) this.path.push({ level, title: clean });
    this.parts = clean ? [clean, '\n\n'] : [];
  }

  /** Text of the current section, separators included (`\n\n` between paragraphs). */
  text(s: string): void {
    if (!this.hasBody && /\S/.test(s)) this.hasBody = true;
    this.parts.push(s);
  }

  /** The sections, in document order. */
  finish(): Section[] {
    this.flush();
    return this.done;
  }

  private flush(): void {
    // The locator is the path as the section's heading left it (made only for a section with text:
    // a file of nothing but headings makes none).
    if (this.hasBody) this.done.push({ text: tidy(this.parts.join('')), locator: this.path.length > 0 ? `heading=${this.path.map((h) => h.title).join(' > ')}` : 'top' });
    this.parts = [];
    this.hasBody = false;
  }
}

/** Trailing spaces off each line, at most one blank line in a row, no blank lines at either end. */
function tidy(text: string): string {
  return trimLineEnds(text)
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * Each line without its trailing spaces and tabs, in one pass. Not `/[ \t]+$/gm`: that pattern tries
 * every space of a run that ends in a letter again, so a long run inside a line cost its square
 * (256 KiB of spaces in a `<pre>`: 210 s).
 */
function trimLineEnds(text: string): string {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let end = line.length;
    while (end > 0 && (line.charCodeAt(end - 1) === 0x20 || line.charCodeAt(end - 1) === 0x09)) end--;
    if (end < line.length) lines[i] = line.slice(0, end);
  }
  return lines.join('\n');
}
