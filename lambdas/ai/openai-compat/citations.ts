/**
 * The Responses API's file citations (docs/ai/openai-compatibility.md, "Responses"): the grounded
 * answer's `[n]` markers (grounded-chat.ts asks the model for them) taken out of the text and turned
 * into `file_citation` annotations whose `index` is where the marker stood in the text the client gets.
 * One transformer for a whole text and for a stream of deltas: a delta may end inside a marker (`[`,
 * `[1`), so a tail that may still become one is held until the next delta (or the end) decides it.
 */

/** What passage n (1-based) came from: the file and our citation (page, heading, time). */
export interface CitationSource {
  file_id: string;
  filename: string;
  citation: { collection_id: string; item_id: string; package_id: string; chunk_id: string; locator: string };
}

/** OpenAI's FileCitation, with our `citation` as an extra field (the SDK keeps unknown fields). */
export interface FileCitation extends CitationSource {
  type: 'file_citation';
  /** UTF-16 offset in the text without markers where the marker stood. */
  index: number;
}

export interface CitedText {
  text: string;
  annotations: FileCitation[];
}

/** One marker: a number without a leading zero, at most 3 digits (passages number at most 50). */
const MARKER = /\[([1-9]\d{0,2})\]/y;
/** A tail that may still become a marker run: an optional space, then an unfinished marker (at most 5 characters). */
const RUN_PREFIX = /^ ?(?:\[(?:[1-9]\d{0,2})?)?$/;
/** A tail that may still become one more marker of a run (at most 4 characters). */
const MARKER_PREFIX = /^\[(?:[1-9]\d{0,2})?$/;
const WORD = /[\p{L}\p{N}]/u;

/**
 * Strips the markers of passages 1…n (`sources.length`) from text given in pieces. A run of markers
 * (`[1][2]`) right after one space takes the space with it when what follows is not a letter or digit
 * (`volcanic [1].` → `volcanic.`); each marker is one annotation. Other bracketed numbers (`[0]`,
 * `[n+1]`, `[01]`) are text. Nothing but markers and those spaces is ever dropped.
 */
export class CitationStripper {
  private held = '';
  /** UTF-16 length of the text given out so far. */
  private given = 0;

  constructor(private readonly sources: readonly CitationSource[]) {}

  /** The text and annotations `delta` settles (some of it may be held for the next call). */
  push(delta: string): CitedText {
    return this.scan(this.held + delta, false);
  }

  /** The end of the text: whatever was held is settled. */
  end(): CitedText {
    return this.scan(this.held, true);
  }

  /** A whole text at once. */
  static strip(text: string, sources: readonly CitationSource[]): CitedText {
    return new CitationStripper(sources).scan(text, true);
  }

  private scan(buffer: string, final: boolean): CitedText {
    const out: string[] = [];
    let outLength = 0;
    const annotations: FileCitation[] = [];
    const emit = (s: string) => {
      out.push(s);
      outLength += s.length;
    };
    let start = 0;
    let holdFrom = buffer.length;
    for (let i = 0; i < buffer.length; ) {
      const c = buffer[i];
      if (c !== ' ' && c !== '[') {
        i++;
        continue;
      }
      const numbers: number[] = [];
      let k = c === ' ' ? i + 1 : i;
      for (;;) {
        MARKER.lastIndex = k;
        const m = MARKER.exec(buffer);
        const n = m ? Number(m[1]) : 0;
        if (!m || n > this.sources.length) break;
        numbers.push(n);
        k = MARKER.lastIndex;
      }
      if (numbers.length === 0) {
        if (!final && buffer.length - i <= 5 && RUN_PREFIX.test(buffer.slice(i))) {
          holdFrom = i;
          break;
        }
        i++;
        continue;
      }
      // A run that ends the buffer (or may go on with one more marker): what follows decides the space.
      if (!final && (k === buffer.length || (buffer.length - k <= 4 && MARKER_PREFIX.test(buffer.slice(k))))) {
        holdFrom = i;
        break;
      }
      const next = buffer[k];
      const keepSpace = c === ' ' && next !== undefined && WORD.test(next);
      emit(buffer.slice(start, i));
      if (keepSpace) emit(' ');
      const index = this.given + outLength;
      for (const n of numbers) annotations.push({ type: 'file_citation', ...this.sources[n - 1], index });
      i = k;
      start = k;
    }
    emit(buffer.slice(start, holdFrom));
    this.held = buffer.slice(holdFrom);
    this.given += outLength;
    return { text: out.join(''), annotations };
  }
}
