/**
 * The hostile files of issue 32's attack for the isolation benchmark (bench/isolation.ts), made by the
 * tests' own makers (test/helpers/hostile-files.ts), each with how the bench sends it: uploaded
 * (`POST /v1/uploads`, then added by its upload id), or inline (`{text, filename}`) for the Markdown
 * families, as the attack sent them.
 *
 * The attack's files: a PDF listing one page 300,000 times, a DOCX whose one entry inflates to 1 GiB,
 * a DOCX of 400 MiB of tiny paragraphs, a DOCX nested 200,000 deep, 1 MiB of `[` and 1 MiB of
 * backticks as inline Markdown, a PNG sent as Markdown. `families: 'all'` (BENCH_MARKDOWN=all) sends
 * every Markdown family the makers know (runs of `*`, `_`, `<`, `&`, list indentation, quotes,
 * tables, reference definitions...) instead of the attack's two.
 *
 * What each item should end as is what test/api/knowledge-isolation.test.ts expects: the PDF and the
 * two zip bombs `failed too_large`, the deep DOCX `too_large` or `parse_error`, the PNG
 * `unsupported_type`, and pathological Markdown `done`: it is text, to be read in time linear in its
 * size (issue 32, "Deliver" 3), not refused.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from './processes.js';

export interface HostileFile {
  /** What it is, for the tables. */
  label: string;
  filename: string;
  contentType: string;
  bytes: Uint8Array;
  /** Sent as an inline text item rather than an upload. */
  inline: boolean;
  /** How its item should end: failed with one of these codes, or done (pathological Markdown is still text, read in linear time). */
  expect: { status: 'failed'; codes: string[] } | { status: 'done' };
}

interface Made {
  filename: string;
  contentType: string;
  bytes: Uint8Array;
}

const MAKERS = join(ROOT, 'test', 'helpers', 'hostile-files.ts');
/** The Markdown families the attack sent. */
const ATTACK_FAMILIES = ['brackets', 'backticks'];

/** The files, or undefined while the makers are not there. */
export async function hostileFiles(families: 'attack' | 'all' = 'attack'): Promise<HostileFile[] | undefined> {
  // Imported by path, not statically: the bench still runs (without this phase) in a tree without them.
  if (!existsSync(MAKERS)) return undefined;
  const m = (await import(pathToFileURL(MAKERS).href)) as {
    repeatedPagePdf(): Made;
    zipBombDocx(): Made;
    tinyParagraphsDocx(): Made;
    deepNestingDocx(): Made;
    pathologicalMarkdown(family: string, bytes?: number): Made;
    pngAsMarkdown(): Made;
    MARKDOWN_FAMILIES?: Record<string, string>;
  };
  const tooLarge = { status: 'failed', codes: ['too_large'] } as const;
  const upload = (label: string, f: Made, expect: HostileFile['expect']): HostileFile => ({ label, ...f, inline: false, expect });
  const names = families === 'all' && m.MARKDOWN_FAMILIES ? Object.keys(m.MARKDOWN_FAMILIES) : ATTACK_FAMILIES;
  return [
    upload('PDF, one page listed 300,000 times', m.repeatedPagePdf(), { ...tooLarge, codes: [...tooLarge.codes] }),
    upload('DOCX zip bomb (1 GiB entry)', m.zipBombDocx(), { ...tooLarge, codes: [...tooLarge.codes] }),
    upload('DOCX of 400 MiB tiny paragraphs', m.tinyParagraphsDocx(), { ...tooLarge, codes: [...tooLarge.codes] }),
    upload('DOCX nested 200,000 deep', m.deepNestingDocx(), { status: 'failed', codes: ['too_large', 'parse_error'] }),
    ...names.map((family): HostileFile => ({ label: `1 MiB Markdown: ${family}`, ...m.pathologicalMarkdown(family), inline: true, expect: { status: 'done' } })),
    upload('PNG sent as Markdown', m.pngAsMarkdown(), { status: 'failed', codes: ['unsupported_type'] }),
  ];
}
