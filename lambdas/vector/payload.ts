/**
 * What a passage's index entry carries back to a reader (its id, text, metadata, scope and document),
 * encoded so that a passage within the spec's 10 KiB always fits the index's 32 KiB payload, and S3
 * Vectors' 40 KB of metadata as JSON, whatever its characters: as JSON, a text of quotes or control
 * characters grows two- to sixfold. Instead each string is its UTF-8 bytes with their length, the
 * whole in base64 (4/3 of the bytes, no character JSON escapes). The metadata goes as its JSON, which
 * the passage's size already counts.
 */
import type { ScopeName } from './keys.js';

export interface Payload {
  id: string;
  text: string;
  metadata: Record<string, unknown>;
  scope: ScopeName;
  document_id: string | null;
}

const VERSION = 1;

export function encodePayload(p: Payload): string {
  const fields = [p.id, p.text, JSON.stringify(p.metadata), p.scope, p.document_id ?? ''].map((s) => Buffer.from(s, 'utf8'));
  const parts: Buffer[] = [Buffer.of(VERSION, p.document_id === null ? 0 : 1)];
  for (const f of fields) {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(f.length);
    parts.push(length, f);
  }
  return Buffer.concat(parts).toString('base64');
}

export function decodePayload(encoded: string): Payload {
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes[0] !== VERSION) throw new Error('a vector payload of an unknown version');
  const hasDocument = bytes[1] === 1;
  const fields: string[] = [];
  let at = 2;
  for (let i = 0; i < 5; i++) {
    const length = bytes.readUInt32BE(at);
    fields.push(bytes.toString('utf8', at + 4, at + 4 + length));
    at += 4 + length;
  }
  const [id, text, metadata, scope, documentId] = fields;
  return { id, text, metadata: JSON.parse(metadata) as Record<string, unknown>, scope: scope as ScopeName, document_id: hasDocument ? documentId : null };
}
