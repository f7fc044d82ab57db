/**
 * Markdown: its headings, ATX and setext, are the locators; the text under a heading is kept as
 * written, Markdown and all: it reads as text, and a citation quotes the file as its author wrote
 * it. A YAML front matter block is metadata, not text, and is left out.
 *
 * Which lines are headings is decided by a line scanner of ours (`headings`), one pass with a
 * constant amount of work a line, following CommonMark's block rules as far as they decide it (and
 * marked's reading where the two differ): fenced and indented code, HTML blocks, block quotes and
 * list items with their lazy continuation lines (a heading inside them is not the document's),
 * tables, link reference definitions. marked's block lexer did this before, but its cost a line is
 * large and, in places, not linear: a flat list cost 3 s a MiB, nested lists 2.5 s, and a block quote
 * with lazy continuation lines grows with the square of its length (64 KiB: 7 s; a MiB: hours).
 * marked's inline lexer still reads a heading's title, which is short.
 */
import { Lexer, type Token } from 'marked';
import { Outline } from './outline.js';
import { plainTextSections } from './text.js';
import type { Section } from './types.js';

const FRONT_MATTER = /^---\r?\n[\s\S]*?\r?\n---[ \t]*(?:\r?\n|$)/;

/**
 * Nesting past which a file is read as plain text, whole, located by its lines: no document nests
 * lists 128 deep or quotes 64 deep (marked's block pass grew with the cube of such nesting, and
 * such files are made by machines, not authors).
 */
const MAX_INDENT_COLUMNS = 256;
const MAX_QUOTE_DEPTH = 64;

/**
 * Past this, a heading's title is taken as written rather than read for its inline Markdown: marked's
 * inline pass grows with the square of a run of emphasis marks (a 1,000-character title of `_a`
 * took 1.4 ms, so a MiB of such headings 1.4 s); real titles are a line of words.
 */
const MAX_HEADING_CHARS = 512;
/** And past this many characters of titles read so, the rest are taken as written: a bound on the whole file's inline work. */
const MAX_INLINE_TITLE_CHARS = 256 * 1024;
/** A title without a character inline Markdown gives meaning to reads as written (most titles: no lexer needed). */
const PLAIN_TITLE = /^[^\\`*_[\]<>!&~|\n]*$/;

export function markdownSections(markdown: string): Section[] {
  const source = markdown.replace(/\r\n?/g, '\n').replace(FRONT_MATTER, '');
  if (nestedTooDeep(source)) return plainTextSections(source);
  const { found, links } = headings(source);
  const lexer = new Lexer();
  // Reference links in a title (`[the guide][g]`) read as their text, as marked's own pass would have.
  Object.assign(lexer.tokens.links, links);
  const outline = new Outline();
  let from = 0;
  let inline = MAX_INLINE_TITLE_CHARS;
  for (const h of found) {
    outline.text(source.slice(from, h.start));
    const read = h.title.length <= MAX_HEADING_CHARS && h.title.length <= inline && !PLAIN_TITLE.test(h.title);
    if (read) inline -= h.title.length;
    outline.heading(h.level, read ? plain(lexer.inlineTokens(h.title)) : h.title);
    from = h.end;
  }
  outline.text(source.slice(from));
  return outline.finish();
}

function nestedTooDeep(source: string): boolean {
  // Each line's leading run of spaces, tabs and `>`, counted where it is longer than a quote's cap could be.
  for (let at = 0; at < source.length; ) {
    let quotes = 0;
    let columns = 0;
    let i = at;
    for (; i < source.length; i++) {
      const ch = source.charCodeAt(i);
      if (ch === 0x3e) quotes++;
      else if (ch === 0x20) columns++;
      else if (ch === 0x09) columns += 4;
      else break;
    }
    if (quotes > MAX_QUOTE_DEPTH || columns > MAX_INDENT_COLUMNS) return true;
    const end = source.indexOf('\n', i);
    if (end === -1) break;
    at = end + 1;
  }
  return false;
}

/** A heading's words without their inline Markdown (links, emphasis, code marks). */
function plain(tokens: Token[]): string {
  return tokens.map((t) => ('tokens' in t && t.tokens ? plain(t.tokens) : 'text' in t ? String(t.text) : '')).join('');
}

interface Heading {
  level: number;
  /** As written: the ATX line's text, or the setext paragraph's lines. */
  title: string;
  /** Where the heading's lines start and where the line after them starts, in the source. */
  start: number;
  end: number;
}

type Links = Record<string, { href: string; title: string }>;

// Every pattern is anchored and tried once a line, and none backtracks more than linearly in it.
const FENCE_OPEN = /^(`{3,}|~{3,})(.*)$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const SETEXT = /^(?:=+|-+)[ \t]*$/;
const LIST_ITEM = /^([*+-]|\d{1,9}[.)])(?=[ \t]|$)/;
const BLANK = /^[ \t]*$/;
/** A link reference definition: its label, then its destination and title, which may each start the next line. */
const DEFINITION = /^\[((?:\\.|[^[\]\\])+)\]:[ \t]*(.*)$/;
const DESTINATION = /^[ \t]*(<[^<>\n]*>|[^\s<>]\S*)(?:[ \t]+("[^"]*"|'[^']*'|\([^()]*\)))?[ \t]*$/;
const TITLE = /^[ \t]*("[^"]*"|'[^']*'|\([^()]*\))[ \t]*$/;
/** A list item that interrupts a paragraph: a bullet or `1.`, with content. */
const INTERRUPTING_ITEM = /^(?:[*+-]|1[.)])[ \t]+[^ \t]/;
/** Lines marked never reads into a setext heading's text: one like a list item, and one like a delimiter row (`delimiterLike`). */
const LIST_LIKE = /^(?:[*+-]|\d{1,9}[.)]) /;
/** Container marks inside a container's line (nested quotes, list markers), taken off one at a time. */
const NESTED_MARK = /(?: {0,3}>[ ]?| {0,3}(?:[*+-]|\d{1,9}[.)])(?:[ \t]+|$))/y;

/** HTML blocks (CommonMark's seven kinds): what starts each, and what ends it (a pattern, or a blank line). */
const HTML_BLOCKS: { start: RegExp; end: RegExp | 'blank'; interrupts: boolean }[] = [
  { start: /^<(?:script|pre|style|textarea)(?:[ \t>]|$)/i, end: /<\/(?:script|pre|style|textarea)>/i, interrupts: true },
  { start: /^<!--/, end: /-->/, interrupts: true },
  { start: /^<\?/, end: /\?>/, interrupts: true },
  { start: /^<![A-Za-z]/, end: />/, interrupts: true },
  { start: /^<!\[CDATA\[/, end: /\]\]>/, interrupts: true },
  {
    start:
      /^<\/?(?:address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul)(?:[ \t]|\/?>|$)/i,
    end: 'blank',
    interrupts: true,
  },
  {
    // A whole open or closing tag alone on its line; it cannot interrupt a paragraph.
    start: /^(?:<[A-Za-z][A-Za-z0-9-]*(?:[ \t]+[A-Za-z_:][\w.:-]*(?:[ \t]*=[ \t]*(?:[^\s"'=<>`]+|'[^']*'|"[^"]*"))?)*[ \t]*\/?>|<\/[A-Za-z][A-Za-z0-9-]*[ \t]*>)[ \t]*$/,
    end: 'blank',
    interrupts: false,
  },
];
/** A tag line longer than this is not taken for an HTML block of the seventh kind (its pattern is the costliest). */
const MAX_TAG_LINE = 1000;

interface Fence {
  char: string;
  length: number;
}

/**
 * The document's top-level headings, in order, and its link reference definitions, in one pass
 * over its lines. State is what CommonMark needs to tell a heading line from one that only looks
 * like one: an open fence or HTML block, an open paragraph (a setext underline makes it a heading),
 * a table, and a container (quote or list item) with whether its innermost block is a paragraph
 * (whose lazy continuation lines are the container's, not the document's).
 */
function headings(source: string): { found: Heading[]; links: Links } {
  const found: Heading[] = [];
  const links: Links = Object.create(null);
  let fence: Fence | undefined;
  let html: RegExp | 'blank' | undefined;
  let paragraph: number | undefined; // where the open top-level paragraph starts
  let setext = false; // whether an underline would make the paragraph a heading
  let lastLine = ''; // the paragraph's last line, for a table's header
  let lastStart = 0; // and where it starts
  let lastSetext = false; // whether that line alone could be a setext heading's text
  let lines = 0; // the paragraph's lines
  let definition: { start: number; line: string; label: string; href?: string } | undefined; // waiting for its destination or title
  let table = false;
  let container: 'quote' | 'list' | undefined;
  let listColumn = 0; // where a list item's content starts
  let blankInList = false;
  let emptyItem = false; // a list item with nothing yet: a blank line ends it (an item starts with at most one)
  let inner: { paragraph: boolean; fence?: Fence } = { paragraph: false };

  const innerLine = (content: string) => {
    if (inner.fence) {
      if (closesFence(content, inner.fence)) inner.fence = undefined;
      return;
    }
    let at = 0;
    for (let m = 0; m < 64; m++) {
      NESTED_MARK.lastIndex = at;
      if (!NESTED_MARK.test(content) || NESTED_MARK.lastIndex === at) break;
      at = NESTED_MARK.lastIndex;
    }
    const rest = content.slice(at);
    if (BLANK.test(rest)) {
      inner.paragraph = false;
      return;
    }
    const { columns, chars } = indentOf(rest);
    if (columns >= 4) return; // indented code, or a paragraph's continuation: either way unchanged
    const line = rest.slice(chars);
    const open = FENCE_OPEN.exec(line);
    if (open && !(open[1][0] === '`' && open[2].includes('`'))) {
      inner = { paragraph: false, fence: { char: open[1][0], length: open[1].length } };
      return;
    }
    if (atxLevel(line) || thematicBreak(line) || (inner.paragraph && SETEXT.test(line)) || htmlBlock(line, true)) {
      inner.paragraph = false;
      return;
    }
    inner.paragraph = true;
  };

  const openItem = (text: string, indent: number, marker: string) => {
    const after = indent + marker.length;
    const content = text.slice(indentOf(text).chars + marker.length);
    const spaces = indentOf(content, after);
    container = 'list';
    blankInList = false;
    inner = { paragraph: false };
    // Content starts after the marker and 1-4 spaces; an empty item, or 5 or more spaces (code), after one.
    emptyItem = BLANK.test(content);
    listColumn = emptyItem || spaces.columns - after > 4 ? after + 1 : spaces.columns;
    innerLine(content);
  };

  let start = 0;
  while (start <= source.length) {
    let end = source.indexOf('\n', start);
    if (end === -1) end = source.length;
    const text = source.slice(start, end);
    const next = Math.min(end + 1, source.length);
    const lineStart = start;
    start = end + 1;

    if (fence) {
      if (closesFence(text, fence)) fence = undefined;
      continue;
    }
    if (html) {
      if (html === 'blank' ? BLANK.test(text) : html.test(text)) html = undefined;
      continue;
    }
    if (BLANK.test(text)) {
      paragraph = undefined;
      definition = undefined;
      table = false;
      if (container === 'quote') container = undefined;
      else if (container === 'list') {
        if (emptyItem) container = undefined;
        blankInList = true;
        inner.paragraph = false;
      }
      continue;
    }
    if (definition) {
      // `[label]:` ends its line: the next holds the destination; a destination alone: the next may hold the title.
      const pending = definition;
      definition = undefined;
      if (pending.href === undefined) {
        const rest = DESTINATION.exec(text);
        if (rest) {
          define(links, pending.label, rest[1], rest[2]);
          if (!rest[2]) definition = { ...pending, href: rest[1] };
          continue;
        }
        // No definition after all: its line starts a paragraph, which this line continues or interrupts.
        paragraph = lastStart = pending.start;
        setext = lastSetext = true;
        lastLine = pending.line;
        lines = 1;
      } else {
        const title = TITLE.exec(text);
        if (title) {
          define(links, pending.label, pending.href, title[1], true);
          continue;
        }
      }
    }
    const { columns: indent, chars } = indentOf(text);
    const line = text.slice(chars);

    if (container === 'list') {
      if (indent >= listColumn) {
        blankInList = false;
        emptyItem = false;
        innerLine(text.slice(charsFor(text, listColumn)));
        continue;
      }
      // A sibling item (any marker, empty or not) before a lazy line: the list is the container here, not a paragraph.
      const item = indent <= 3 && !thematicBreak(line) ? LIST_ITEM.exec(line) : null;
      if (item) {
        openItem(text, indent, item[1]);
        continue;
      }
      if (!blankInList && inner.paragraph && !inner.fence && lazy(line, indent)) continue;
      container = undefined;
    } else if (container === 'quote') {
      if (indent <= 3 && line[0] === '>') {
        innerLine(line.slice(line[1] === ' ' ? 2 : 1));
        continue;
      }
      if (inner.paragraph && !inner.fence && lazy(line, indent)) continue;
      container = undefined;
    }

    // The line is the document's own. Its first character picks the patterns worth trying.
    if (indent >= 4) {
      // A paragraph's continuation, a table's row, or indented code.
      if (paragraph !== undefined) {
        lastLine = line;
        lastStart = lineStart;
        lastSetext = false;
        lines++;
      }
      continue;
    }
    const c = line[0];
    const level = c === '#' ? atxLevel(line) : 0;
    if (level) {
      found.push({ level, title: atxTitle(line.slice(level)), start: lineStart, end: next });
      paragraph = undefined;
      table = false;
      continue;
    }
    const open = c === '`' || c === '~' ? FENCE_OPEN.exec(line) : null;
    if (open && !(open[1][0] === '`' && open[2].includes('`'))) {
      fence = { char: open[1][0], length: open[1].length };
      paragraph = undefined;
      table = false;
      continue;
    }
    // A lone tag (the seventh kind) neither interrupts a paragraph nor ends a table (a row, to marked).
    const block = htmlBlock(line, paragraph !== undefined || table);
    if (block) {
      // The line that starts it may end it too (`<!-- a comment -->`).
      html = block === 'blank' || !block.test(line.slice(2)) ? block : undefined;
      paragraph = undefined;
      table = false;
      continue;
    }
    if (paragraph !== undefined && (c === '=' || c === '-') && SETEXT.test(line)) {
      if (setext) {
        found.push({ level: c === '=' ? 1 : 2, title: source.slice(paragraph, lineStart - 1), start: paragraph, end: next });
        paragraph = undefined;
        continue;
      }
      // marked: a paragraph with a line it never reads into a heading's text ends before its last
      // line when dashes follow (its table rule), and that line alone becomes the heading.
      if (c === '-' && lines > 1 && lastSetext) {
        found.push({ level: 2, title: source.slice(lastStart, lineStart - 1), start: lastStart, end: next });
        paragraph = undefined;
        continue;
      }
    }
    if ((c === '*' || c === '-' || c === '_') && thematicBreak(line)) {
      paragraph = undefined;
      table = false;
      continue;
    }
    if (c === '>') {
      container = 'quote';
      inner = { paragraph: false };
      innerLine(line.slice(line[1] === ' ' ? 2 : 1));
      paragraph = undefined;
      table = false;
      continue;
    }
    const item = c === '*' || c === '-' || c === '+' || (c >= '0' && c <= '9') ? LIST_ITEM.exec(line) : null;
    // Within a paragraph only a bullet or `1.` with content starts a list (`a` over `-` is a setext heading).
    if (item && (paragraph === undefined || INTERRUPTING_ITEM.test(line))) {
      openItem(text, indent, item[1]);
      paragraph = undefined;
      table = false;
      continue;
    }
    if (table) continue;
    if (paragraph !== undefined && (line.includes('|') || line.includes(':')) && cells(line) === cells(lastLine) && delimiterRow(line)) {
      // The paragraph's last line is the table's header (marked splits the paragraph there).
      table = true;
      paragraph = undefined;
      continue;
    }
    const label = c === '[' ? DEFINITION.exec(line) : null;
    if (paragraph === undefined) {
      if (label) {
        const rest = label[2] ? DESTINATION.exec(label[2]) : undefined;
        if (!label[2]) {
          definition = { start: lineStart, line, label: label[1] };
          continue;
        }
        if (rest) {
          define(links, label[1], rest[1], rest[2]);
          if (!rest[2]) definition = { start: lineStart, line, label: label[1], href: rest[1] };
          continue;
        }
      }
      paragraph = lineStart;
      setext = true;
      lines = 0;
    }
    const readable = !(item && LIST_LIKE.test(line)) && !((c === '|' || c === ':' || c === '-') && delimiterLike(line));
    if (!readable) setext = false;
    // Cut off on its own, a definition's line is read as a definition again and an item's as a list, not as a heading.
    lastSetext = readable && !item && !(label && label[2] && DESTINATION.test(label[2]));
    lastLine = line;
    lastStart = lineStart;
    lines++;
  }
  return { found, links };
}

/** A definition's link, as marked keeps it (the first of a label wins; a later title completes its own). */
function define(links: Links, label: string, href: string, title: string | undefined, titleOnly = false): void {
  const key = label.toLowerCase().replace(/\s+/g, ' ');
  const link = { href: href.replace(/^<|>$/g, ''), title: title ? title.slice(1, -1) : '' };
  if (titleOnly) {
    if (links[key]?.href === link.href) links[key].title = link.title;
    return;
  }
  links[key] ??= link;
}

/** A line continuing a container's paragraph though it lacks the container's mark: one that starts no block. */
function lazy(line: string, indent: number): boolean {
  if (indent >= 4) return true;
  const c = line[0];
  if (c === '>' || (c === '#' && atxLevel(line)) || ((c === '*' || c === '-' || c === '_') && thematicBreak(line)) || htmlBlock(line, true)) return false;
  const open = c === '`' || c === '~' ? FENCE_OPEN.exec(line) : null;
  if (open && !(open[1][0] === '`' && open[2].includes('`'))) return false;
  // Any list item ends a container's paragraph here (marked's reading: in a list a sibling, in a quote a list of its own).
  return !LIST_ITEM.test(line);
}

/** The HTML block a line (indentation off) starts, by its end condition; within a paragraph, only the kinds that interrupt one. */
function htmlBlock(line: string, inParagraph: boolean): RegExp | 'blank' | undefined {
  if (line[0] !== '<') return undefined;
  for (const { start, end, interrupts } of HTML_BLOCKS) {
    if (inParagraph && !interrupts) continue;
    if (end === 'blank' && !interrupts && line.length > MAX_TAG_LINE) continue;
    if (start.test(line)) return end;
  }
  return undefined;
}

function closesFence(text: string, fence: Fence): boolean {
  const m = FENCE_CLOSE.exec(text);
  return m !== null && m[1][0] === fence.char && m[1].length >= fence.length;
}

/** An ATX heading's level: its run of 1-6 `#`, followed by a space, a tab or the line's end; else 0. */
function atxLevel(line: string): number {
  let n = 0;
  while (n < 7 && line[n] === '#') n++;
  const after = line[n];
  return n >= 1 && n <= 6 && (after === undefined || after === ' ' || after === '\t') ? n : 0;
}

/** An ATX heading's title: trimmed, its closing run of `#` off when a space precedes it (as marked reads it). */
function atxTitle(raw: string): string {
  const title = raw.trim();
  let end = title.length;
  while (end > 0 && title[end - 1] === '#') end--;
  if (end === title.length) return title;
  const rest = title.slice(0, end);
  return !rest || rest.endsWith(' ') ? rest.trim() : title;
}

/**
 * A thematic break: three or more of one of `*`, `-`, `_`, and nothing else but spaces and tabs.
 * Read by hand: the pattern for it backtracks through every mark of a long line that fails at its end.
 */
function thematicBreak(line: string): boolean {
  const mark = line[0];
  if (mark !== '*' && mark !== '-' && mark !== '_') return false;
  let marks = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === mark) marks++;
    else if (c !== ' ' && c !== '\t') return false;
  }
  return marks >= 3;
}

/** A table's delimiter row: cells of `-` (a `:` at either end allowed) between pipes; read by hand, as above. */
function delimiterRow(line: string): boolean {
  const n = line.length;
  let i = 0;
  const spaces = () => {
    while (i < n && (line[i] === ' ' || line[i] === '\t')) i++;
  };
  spaces();
  if (line[i] === '|') i++;
  let cells = 0;
  for (;;) {
    spaces();
    if (i >= n) return cells > 0;
    if (line[i] === ':') i++;
    const dashes = i;
    while (line[i] === '-') i++;
    if (i === dashes) return false;
    if (line[i] === ':') i++;
    spaces();
    cells++;
    if (i >= n) return true;
    if (line[i] !== '|') return false;
    i++;
  }
}

/** Like a delimiter row to marked: nothing but `|`, `:`, `-` and spaces, and a pipe among them. */
function delimiterLike(line: string): boolean {
  let pipe = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '|') pipe = true;
    else if (c !== ':' && c !== '-' && c !== ' ') return false;
  }
  return pipe;
}

/** A table row's cells: its unescaped pipes, less a leading and a trailing one. */
function cells(row: string): number {
  const line = row.trim();
  let pipes = 0;
  for (let i = 0; i < line.length; i++) {
    if (line[i] === '\\') i++;
    else if (line[i] === '|') pipes++;
  }
  if (line.startsWith('|')) pipes--;
  if (line.length > 1 && line.endsWith('|') && line[line.length - 2] !== '\\') pipes--;
  return pipes + 1;
}

/** Leading whitespace in columns (a tab to the next multiple of 4, from `column`) and in characters. */
function indentOf(text: string, column = 0): { columns: number; chars: number } {
  let columns = column;
  let chars = 0;
  for (; chars < text.length; chars++) {
    if (text[chars] === ' ') columns++;
    else if (text[chars] === '\t') columns += 4 - (columns % 4);
    else break;
  }
  return { columns, chars };
}

/** How many characters of leading whitespace make up `columns` columns (a tab counting to its stop). */
function charsFor(text: string, columns: number): number {
  let at = 0;
  let chars = 0;
  while (chars < text.length && at < columns && (text[chars] === ' ' || text[chars] === '\t')) {
    at += text[chars] === '\t' ? 4 - (at % 4) : 1;
    chars++;
  }
  return chars;
}
