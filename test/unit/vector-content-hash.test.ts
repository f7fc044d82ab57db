/** A document's content_sha256 (docs/ai/vector.md): order-free, and no two documents hash alike. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { contentSha256 } from '../../lambdas/vector/passages.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const member = (id: string, text: string) => ({ id, text_sha256: sha(text) });

describe('content_sha256', () => {
  it('is the documented hash, whatever order the passages come in', () => {
    const expected = sha(`${sha('a')}\n${sha('one')}\n${sha('b')}\n${sha('two')}\n`);
    expect(contentSha256([member('b', 'two'), member('a', 'one')])).toBe(expected);
  });

  it('tells apart a passage whose id holds newlines from the passages it would spell', () => {
    const spelled = [member('a', 'one'), member('b', 'two')];
    const forged = [{ id: `a\n${sha('one')}\nb`, text_sha256: sha('two') }];
    expect(contentSha256(forged)).not.toBe(contentSha256(spelled));
  });

  it('orders by the ids\' UTF-8 bytes, not by UTF-16 units', () => {
    // In UTF-16 the emoji (0xD83D 0xDE00) sorts before U+FF5E; in UTF-8 (F0 9F… against EF BD…) after it.
    const a = member('\uff5e', 'x');
    const b = member('\u{1f600}', 'y');
    expect(contentSha256([a, b])).toBe(sha(`${sha('\uff5e')}\n${sha('x')}\n${sha('\u{1f600}')}\n${sha('y')}\n`));
  });
});
