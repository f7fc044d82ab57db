/**
 * The text of one member of a JSON object as it was sent, for what must go on unchanged: JSON.parse
 * rounds integers past 2^53, turns `1e400` into Infinity (then `null` once serialized again) and `-0`
 * into `0`. Only for text JSON.parse has already accepted, so the scan trusts its syntax.
 */

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);
const VALUE_END = new Set([',', '}', ']', ' ', '\t', '\n', '\r']);

function skipWhitespace(text: string, i: number): number {
  while (WHITESPACE.has(text[i])) i++;
  return i;
}

/** Just past the string starting at `i` (its opening quote). */
function stringEnd(text: string, i: number): number {
  let j = i + 1;
  while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
  return j + 1;
}

/** Just past the value starting at `i`. */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c !== '{' && c !== '[') {
    let j = i;
    while (j < text.length && !VALUE_END.has(text[j])) j++;
    return j;
  }
  let depth = 0;
  for (let j = i; j < text.length; j++) {
    const ch = text[j];
    if (ch === '"') j = stringEnd(text, j) - 1;
    else if (ch === '{' || ch === '[') depth++;
    else if ((ch === '}' || ch === ']') && --depth === 0) return j + 1;
  }
  return text.length;
}

/**
 * The text of the top-level member `name` of the JSON object `text`: the last one, as JSON.parse
 * keeps the last of repeated names (`"\u0069nput"` is `input` too). Undefined when there is none or
 * `text` is not an object.
 */
export function memberText(text: string, name: string): string | undefined {
  let i = skipWhitespace(text, 0);
  if (text[i] !== '{') return undefined;
  let found: string | undefined;
  for (i = skipWhitespace(text, i + 1); text[i] === '"'; ) {
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const start = skipWhitespace(text, skipWhitespace(text, keyEnd) + 1);
    const end = valueEnd(text, start);
    if (key === name) found = text.slice(start, end);
    i = skipWhitespace(text, end);
    if (text[i] !== ',') break;
    i = skipWhitespace(text, i + 1);
  }
  return found;
}
