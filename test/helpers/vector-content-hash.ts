/**
 * A document's `content_sha256` as docs/ai/vector.md defines it, computed the way a client would, over
 * [id, text] pairs: what the tests compare the platform's listing with.
 */
import { createHash } from 'node:crypto';

const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

export const documentSha256 = (passages: readonly (readonly [string, string])[]): string =>
  sha(
    [...passages]
      .sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
      .map(([id, text]) => `${sha(id)}\n${sha(text)}\n`)
      .join(''),
  );
