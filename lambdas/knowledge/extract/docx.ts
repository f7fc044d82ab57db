/**
 * DOCX (mammoth): converted to HTML, whose headings are the document's Heading styles, then read as
 * HTML is. Images are dropped at conversion: they would be inlined as data URIs only to be skipped.
 *
 * mammoth reads its parts through our zip reader (`BoundedZip`), not its own: each part it asks for
 * is inflated within the zip caps, and each XML part is scanned (tags only, no DOM) for its element
 * count and depth before mammoth parses it, so it never builds a DOM the caps would refuse.
 * The main document is checked first, before mammoth starts.
 */
import mammoth from 'mammoth';
import { htmlSections } from './html.js';
import { Refusal, type Section } from './types.js';
import { BoundedZip } from './zip.js';

const NO_IMAGES = mammoth.images.imgElement(async () => ({ src: '' }));

/**
 * Elements, across the XML parts mammoth reads, past which a DOCX is `too_large`. mammoth holds
 * 2-3 KB an element (xmldom's DOM, its document model, the HTML): 100,000 elements peaked at
 * 270-380 MB and 3-4 s, so 200,000 stays well inside an item's 1 GiB; that is about a thousand
 * pages of Word's usual XML.
 */
export const MAX_DOCX_ELEMENTS = 200_000;
/**
 * Nesting past which a DOCX is `parse_error`, as HTML is (the HTML mammoth writes nests as deep):
 * the DOM's readers recurse (200,000 levels held a processor 2.7 s and failed on the stack anyway).
 * Word's own nesting (tables in tables, content controls) stays in the tens.
 */
export const MAX_DOCX_DEPTH = 1024;

const MAIN_DOCUMENT = 'word/document.xml';

export async function docxSections(bytes: Uint8Array): Promise<Section[]> {
  const zip = new BoundedZip(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length), 'DOCX');
  let elements = 0;
  const checked = new Map<string, Buffer>();
  const part = (name: string): Buffer => {
    const held = checked.get(name);
    if (held) {
      // Read once: mammoth decodes it now, and holding the bytes after would only cost memory.
      checked.delete(name);
      return held;
    }
    const data = zip.read(name);
    if (/\.(xml|rels)$/i.test(name)) elements += xmlElements(data, name, MAX_DOCX_ELEMENTS - elements);
    return data;
  };
  if (zip.has(MAIN_DOCUMENT)) checked.set(MAIN_DOCUMENT, part(MAIN_DOCUMENT));

  // mammoth's own zip input (`{ file }`, untyped): the interface its jszip wrapper has.
  const file = {
    exists: (name: string) => zip.has(name),
    read: async (name: string, encoding?: string) => {
      const data = part(name);
      if (encoding === 'base64') return data.toString('base64');
      return encoding ? new TextDecoder(encoding).decode(data) : new Uint8Array(data);
    },
    write: () => {
      throw new Error('read only');
    },
    toArrayBuffer: () => {
      throw new Error('read only');
    },
  };
  const { value } = await mammoth.convertToHtml({ file } as unknown as { buffer: Buffer }, { convertImage: NO_IMAGES });
  return htmlSections(value);
}

const LT = 0x3c;
const GT = 0x3e;
const SLASH = 0x2f;
const BANG = 0x21;
const QUESTION = 0x3f;
const DOUBLE_QUOTE = 0x22;
const SINGLE_QUOTE = 0x27;

/**
 * The number of elements in an XML part, read from its tags alone (linear, no DOM; quoted attribute
 * values may hold `>`). Throws Refusal past `budget` elements or `MAX_DOCX_DEPTH` levels, and for a
 * DOCTYPE: OOXML forbids DTDs, and entity declarations are how XML is made to expand.
 */
export function xmlElements(xml: Buffer, name: string, budget: number): number {
  let elements = 0;
  let depth = 0;
  const n = xml.length;
  let i = xml.indexOf(LT);
  while (i !== -1) {
    const next = xml[i + 1];
    let end: number;
    if (next === SLASH) {
      depth = Math.max(0, depth - 1);
      end = xml.indexOf(GT, i + 2);
    } else if (next === QUESTION) {
      end = xml.indexOf('?>', i + 2);
    } else if (next === BANG) {
      if (startsAt(xml, i, '<!--')) end = xml.indexOf('-->', i + 4);
      else if (startsAt(xml, i, '<![CDATA[')) end = xml.indexOf(']]>', i + 9);
      else throw new Refusal('parse_error', `The DOCX's ${name} declares a DTD (<!DOCTYPE or <!ENTITY), which Word documents never hold.`);
    } else {
      end = i + 1;
      for (; end < n; end++) {
        const c = xml[end];
        if (c === GT) break;
        if (c === DOUBLE_QUOTE || c === SINGLE_QUOTE) {
          end = xml.indexOf(c, end + 1);
          if (end === -1) end = n;
        }
      }
      if (end >= n) break; // cut short: the XML parser will say so
      if (xml[end - 1] !== SLASH && ++depth > MAX_DOCX_DEPTH) {
        throw new Refusal('parse_error', `The DOCX's ${name} nests elements more than ${MAX_DOCX_DEPTH.toLocaleString('en')} deep; Word's own documents stay in the tens.`);
      }
      if (++elements > budget) {
        throw new Refusal(
          'too_large',
          `The DOCX has more than ${MAX_DOCX_ELEMENTS.toLocaleString('en')} XML elements (about a thousand pages); split the document, or send it as PDF.`,
        );
      }
    }
    if (end === -1) break;
    i = xml.indexOf(LT, end + 1);
  }
  return elements;
}

function startsAt(bytes: Buffer, at: number, ascii: string): boolean {
  for (let k = 0; k < ascii.length; k++) if (bytes[at + k] !== ascii.charCodeAt(k)) return false;
  return true;
}
