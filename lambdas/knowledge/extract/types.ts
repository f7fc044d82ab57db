/**
 * What text extraction gives back: a document's text as sections, each with the place it came from
 * (its locator), or why there is no text to give. A bad file is an answer, never a throw: an item
 * fails with the reason and the others go on.
 */

/**
 * Where a section's text is in its document, as `key=value`:
 * - `page=12`: a PDF page (1-based);
 * - `heading=Install > Linux`: the path of headings above it (HTML, DOCX, Markdown);
 * - `top`: what comes before a document's first heading;
 * - `line=N`: plain text starting at line N (1-based); chunking turns it into `line=N-M`;
 * - `t=00:12:05-00:13:10`: a time range of a recording (a transcript's segment; see `timeLocator`).
 */
export type Locator = string;

export interface Section {
  text: string;
  locator: Locator;
}

export type ExtractFailure = 'unsupported_type' | 'parse_error' | 'empty_text' | 'too_large';

/** `message`, when there is one, tells the item's owner what to do (configure a transcription route, install ffmpeg). */
export type Extracted = { sections: Section[] } | { failed: ExtractFailure; message?: string };

/**
 * Thrown by a parser that refuses a file before reading it further (a zip bomb, a page tree listing
 * 300,000 pages, XML nested too deep): `extractText` answers `failure` with `message`, which names
 * the cap and what to do.
 */
export class Refusal extends Error {
  constructor(
    readonly failure: ExtractFailure,
    message: string,
  ) {
    super(message);
    this.name = 'Refusal';
  }
}

/** A file larger than this is not read (`too_large`): a Lambda holds it whole in memory while parsing. */
export const MAX_INPUT_BYTES = 100 * 1024 * 1024;

/** More text than this (about 5 M tokens, 10,000 dense pages) is `too_large`: its chunks would not fit one item's budget. */
export const MAX_OUTPUT_CHARS = 20_000_000;

/** The locator of a recording's segment, `t=HH:MM:SS-HH:MM:SS`, from its start and end in seconds. */
export function timeLocator(startS: number, endS: number): Locator {
  return `t=${clock(startS)}-${clock(endS)}`;
}

/** `HH:MM:SS` of seconds from a recording's start (whole seconds, from 0). */
export function clock(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(Math.floor(s / 3600))}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}`;
}
