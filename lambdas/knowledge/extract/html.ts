/**
 * HTML's readable text (htmlparser2): what a reader sees, headings kept as locators. Scripts, styles,
 * templates, embedded media and hidden elements are left out, and so is navigation, which repeats on
 * every page of a site and would make every page match a query about it.
 */
import { Parser } from 'htmlparser2';
import { Outline } from './outline.js';
import type { Section } from './types.js';

const SKIPPED = new Set(['head', 'title', 'script', 'style', 'noscript', 'template', 'svg', 'math', 'canvas', 'iframe', 'object', 'video', 'audio', 'nav', 'select', 'button']);

/** Elements after which text goes on in a new paragraph. */
const PARAGRAPH = new Set(['p', 'div', 'section', 'article', 'main', 'header', 'footer', 'aside', 'blockquote', 'pre', 'table', 'ul', 'ol', 'dl', 'figure', 'form', 'fieldset', 'details', 'hr', 'address']);
/** Elements after which text goes on in a new line of the same paragraph. */
const LINE = new Set(['br', 'li', 'tr', 'dt', 'dd', 'caption', 'figcaption', 'summary', 'legend']);
const CELL = new Set(['td', 'th']);
const HEADING = /^h([1-6])$/;
/**
 * Elements open at once past which a page is refused (parse_error): htmlparser2 looks closing tags up
 * in its stack of open elements, so its time grows with the square of the nesting (200,000 nested
 * divs, 2.2 MB: 23 s). Browsers stop nesting at 512; real pages stay far below.
 */
export const MAX_HTML_DEPTH = 1024;

export function htmlSections(html: string): Section[] {
  const outline = new Outline();
  let skipDepth = 0;
  let preDepth = 0;
  let heading: { level: number; title: string } | undefined;
  // Whether the text written so far ends a line: collapsed text then starts without a space.
  let atLineStart = true;

  const write = (s: string) => {
    outline.text(s);
    atLineStart = s.endsWith('\n');
  };
  const breakWith = (separator: string) => {
    if (heading) heading.title += ' ';
    else write(separator);
  };

  let depth = 0;
  const parser = new Parser(
    {
      onopentag(name, attributes) {
        if (++depth > MAX_HTML_DEPTH) throw new Error(`elements nested deeper than ${MAX_HTML_DEPTH}`);
        if (skipDepth > 0 || SKIPPED.has(name) || 'hidden' in attributes || attributes['aria-hidden'] === 'true') {
          skipDepth++;
          return;
        }
        const level = HEADING.exec(name);
        if (level) heading = { level: Number(level[1]), title: '' };
        else if (PARAGRAPH.has(name)) breakWith('\n\n');
        else if (LINE.has(name) && name !== 'br') breakWith('\n');
        if (name === 'pre') preDepth++;
      },
      ontext(raw) {
        if (skipDepth > 0) return;
        if (heading) {
          heading.title += raw;
          return;
        }
        if (preDepth > 0) return write(raw);
        const collapsed = raw.replace(/\s+/g, ' ');
        write(atLineStart ? collapsed.trimStart() : collapsed);
      },
      onclosetag(name) {
        depth--;
        if (skipDepth > 0) {
          skipDepth--;
          return;
        }
        if (heading && HEADING.test(name)) {
          outline.heading(heading.level, heading.title);
          heading = undefined;
          atLineStart = true;
          return;
        }
        if (name === 'pre') preDepth--;
        if (PARAGRAPH.has(name)) breakWith('\n\n');
        else if (LINE.has(name)) breakWith('\n');
        else if (CELL.has(name)) breakWith(' ');
      },
    },
    { decodeEntities: true, lowerCaseTags: true },
  );
  parser.end(html);
  return outline.finish();
}
