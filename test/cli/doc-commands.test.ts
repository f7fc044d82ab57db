/**
 * Every admin CLI line and every curl line of README.md and docs/ (fenced blocks, indented ones too,
 * and inline code) names something that exists: the admin lines parse with the CLI's own parser
 * (`parseCommand`, which a run uses; placeholders such as `ID`, `$ORG`, `<org>` stand for values, and
 * `…` for options left out), the curl lines' method and path match a route of the route table (or
 * the operations port's paths), the API told by the URL's variable or port. A wrong command in the
 * docs fails here, before a reader copies it (docs/decisions/doc-examples.md).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fences } from '../helpers/doc-blocks.js';
import { helpFor, parseCommand } from '../../lambdas/admin/cli.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { Router } from '../../lambdas/http/router.js';
import { OPS_PATHS } from '../../lambdas/local/ops-server.js';
import { loadSettings } from '../../lambdas/shared/settings.js';
import type { Api } from '../../lambdas/shared/api.js';

const ROOT = join(import.meta.dirname, '..', '..');

/** README.md and every Markdown file under docs/. */
function docFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : []));
  return [join(ROOT, 'README.md'), ...walk(join(ROOT, 'docs'))];
}

/** Blocks of these languages hold no shell line. */
const NOT_SHELL = new Set(['js', 'ts', 'python', 'go', 'json', 'mermaid', 'ebnf']);

/** The index of the `)` closing the `(` at `open`. */
function closing(text: string, open: number): number {
  let depth = 0;
  for (let j = open; j < text.length; j++) {
    if (text[j] === '(') depth++;
    else if (text[j] === ')' && --depth === 0) return j;
  }
  throw new Error(`unclosed $( in ${text.slice(open, open + 60)}`);
}

/**
 * The words of the shell command starting at `start`, as bash splits them (quotes taken off, a
 * backslash-newline joining lines), without expanding anything: `$VAR` and `$(…)` stay as written.
 * The command ends at an unquoted `|`, `;`, `&`, `)`, a redirection, a newline or a comment. A `<name>`
 * is a placeholder (a value), not a redirection.
 */
export function shellWords(text: string, start: number): string[] {
  const words: string[] = [];
  let word: string | undefined;
  const add = (s: string) => (word = (word ?? '') + s);
  let i = start;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && text[i + 1] === '\n') {
      if (word !== undefined) words.push(word);
      word = undefined;
      i += 2;
    } else if (c === '\\') {
      add(text[i + 1] ?? '');
      i += 2;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unclosed ' in ${text.slice(i, i + 60)}`);
      add(text.slice(i + 1, end));
      i = end + 1;
    } else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') {
        if (text[j] === '\\' && /["\\$`\n]/.test(text[j + 1])) {
          add(text[j + 1]);
          j += 2;
        } else if (text[j] === '$' && text[j + 1] === '(') {
          const end = closing(text, j + 1);
          add(text.slice(j, end + 1));
          j = end + 1;
        } else add(text[j++]);
      }
      if (j >= text.length) throw new Error(`unclosed " in ${text.slice(i, i + 60)}`);
      add('');
      i = j + 1;
    } else if (c === '$' && text[i + 1] === '(') {
      const end = closing(text, i + 1);
      add(text.slice(i, end + 1));
      i = end + 1;
    } else if (c === '<' && /^<[\w.-]+>/.test(text.slice(i))) {
      const placeholder = /^<[\w.-]+>/.exec(text.slice(i))![0];
      add(placeholder);
      i += placeholder.length;
    } else if (/[|;&)<>\n]/.test(c) || (c === '#' && word === undefined)) {
      break;
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
      i++;
    } else {
      add(c);
      i++;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** Where an admin or curl command starts: the start of a command (after a space, `$(`, a pipe, `;`, `&&`, a backtick). */
const ADMIN = /(?<=^|[\s(;|&`])npm run (?:--silent )?admin -- /g;
const CURL = /(?<=^|[\s(;|&`])curl(?=[ \t])/g;

export interface Found {
  kind: 'admin' | 'curl';
  /** `file:line`. */
  where: string;
  words: string[];
  /** The line as written, for the failure's message. */
  text: string;
}

/** The admin and curl commands of one Markdown text. */
export function commandsOf(text: string, file: string): Found[] {
  const found: Found[] = [];
  const scan = (source: string, firstLine: number) => {
    for (const [kind, pattern] of [['admin', ADMIN], ['curl', CURL]] as const) {
      for (const m of source.matchAll(pattern)) {
        const start = m.index! + m[0].length;
        const line = firstLine + source.slice(0, m.index).split('\n').length - 1;
        const where = `${file}:${line}`;
        let words: string[];
        try {
          words = shellWords(source, start);
        } catch (error) {
          found.push({ kind, where, words: [], text: (error as Error).message });
          continue;
        }
        found.push({ kind, where, words, text: source.slice(m.index).split('\n')[0] });
      }
    }
  };
  const { fences: blocks, prose } = fences(text);
  for (const block of blocks) if (!NOT_SHELL.has(block.language)) scan(block.body, block.line);
  // Inline code: a span may run over a line break (a newline inside it is a space).
  for (const m of prose.matchAll(/`([^`\n]+(?:\n[^`\n]+)*)`/g)) {
    const line = prose.slice(0, m.index).split('\n').length;
    scan(m[1].replace(/\n/g, ' '), line);
  }
  return found;
}

/** What is wrong with an admin line (undefined: nothing). `…` leaves options out: the required ones are not asked for. */
export function adminProblem(words: string[]): string | undefined {
  const elided = words.some((w) => w === '…' || w === '...');
  const argv = words.filter((w) => w !== '…' && w !== '...');
  // `<command>`: the generic form, not a command.
  if (/^<.+>$/.test(argv[0] ?? '')) return undefined;
  try {
    if (argv.includes('--help') || argv.includes('-h') || argv[0] === 'help') helpFor(argv);
    else parseCommand(argv, { elided });
    return undefined;
  } catch (error) {
    return (error as Error).message.split('\n')[0];
  }
}

/** curl's options that take the next word as their value. */
const TAKES_VALUE = new Set([
  '-X', '--request', '-H', '--header', '-d', '--data', '--data-raw', '--data-binary', '--data-urlencode', '--json', '-F', '--form', '-T', '--upload-file',
  '-o', '--output', '-u', '--user', '-w', '--write-out', '-m', '--max-time', '-e', '--referer', '-A', '--user-agent', '-b', '--cookie', '-c',
  '--cookie-jar', '--connect-timeout', '-r', '--range', '--retry', '--url', '-K', '--config',
]);
const SENDS_BODY = new Set(['-d', '--data', '--data-raw', '--data-binary', '--data-urlencode', '--json', '-F', '--form']);

/** The method curl sends and the URL it is given, from its words. */
export function curlRequest(words: string[]): { method: string; url?: string } {
  let method: string | undefined;
  let implied = 'GET';
  let url: string | undefined;
  const apply = (flag: string, value: string) => {
    if (flag === '-X' || flag === '--request') method = value;
    else if (SENDS_BODY.has(flag)) implied = implied === 'GET' ? 'POST' : implied;
    else if (flag === '-T' || flag === '--upload-file') implied = 'PUT';
    else if (flag === '--url') url ??= value;
  };
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    if (w.startsWith('--')) {
      const [flag, inline] = w.split(/=(.*)/s);
      if (flag === '--head') implied = 'HEAD';
      if (inline !== undefined) apply(flag, inline);
      else if (TAKES_VALUE.has(flag)) apply(flag, words[++i] ?? '');
    } else if (/^-X[A-Z]+$/.test(w)) {
      method = w.slice(2);
    } else if (/^-[a-zA-Z]+$/.test(w)) {
      // A cluster (`-sSI`): its last letter may take the next word.
      if (w.includes('I')) implied = 'HEAD';
      const last = `-${w.at(-1)}`;
      if (TAKES_VALUE.has(last)) apply(last, words[++i] ?? '');
    } else url ??= w;
  }
  return { method: method ?? implied, url };
}

/** The local ports, as `npm start` opens them by default (README: AI :8080, Data :8081, Events :8082, ops :8083). */
const defaults = loadSettings({});
const PORTS = new Map<string, Api | 'ops'>([
  [String(defaults.aiPort), 'ai'],
  [String(defaults.dataPort), 'data'],
  [String(defaults.eventsPort), 'events'],
  [String(defaults.opsPort), 'ops'],
]);
/** The docs' names for each API's URL (`AI_URL=http://127.0.0.1:8080`, the stack's outputs). */
const BASES: [RegExp, Api | 'ops'][] = [
  [/^\$\{?AI(_URL)?\}?(?=\/|$)/, 'ai'],
  [/^\$\{?DATA(_URL)?\}?(?=\/|$)/, 'data'],
  [/^\$\{?EVENTS(_URL)?\}?(?=\/|$)/, 'events'],
  [/^\$\{?OPS(_URL)?\}?(?=\/|$)/, 'ops'],
];
/** URLs the platform hands out (a presigned part or file URL), not one of its APIs: nothing to match. */
const HANDED_OUT = new Set(['$loc', '$URL_OF_PART_1']);

const routers = new Map<Api, Router>((['ai', 'data', 'events'] as const).map((api) => [api, new Router(api, ROUTES)]));

/** What is wrong with a curl line (undefined: nothing). */
export function curlProblem(words: string[]): string | undefined {
  const { method, url } = curlRequest(words);
  if (!url) return 'no URL';
  if (HANDED_OUT.has(url)) return undefined;
  let api: Api | 'ops' | undefined;
  let rest: string | undefined;
  const local = /^(?:https?:\/\/)?(?:localhost|127\.0\.0\.1):(\d+)(.*)$/.exec(url);
  if (local) {
    api = PORTS.get(local[1]);
    rest = local[2];
    if (!api) return `port ${local[1]} serves no API (${[...PORTS].map(([port, a]) => `${a} :${port}`).join(', ')})`;
  } else {
    for (const [base, which] of BASES) {
      const m = base.exec(url);
      if (m) [api, rest] = [which, url.slice(m[0].length)];
    }
  }
  if (!api || rest === undefined) return `${url}: the URL names no API (its variable or port says which)`;
  // A variable or a command's output in the path stands for one segment's value.
  const path = (rest.split('?')[0] || '/').replace(/\$\{?\w+\}?|\$\([^)]*\)/g, 'x');
  if (api === 'ops') return ['GET', 'HEAD'].includes(method) && (OPS_PATHS as readonly string[]).includes(path) ? undefined : `${method} ${path}: the operations port serves GET ${OPS_PATHS.join(', ')}`;
  const { route } = routers.get(api)!.match(method, path);
  return route.path === '$default' ? `${method} ${path}: no route of the ${api} API` : undefined;
}

const problem = (f: Found) => (f.words.length === 0 ? f.text : f.kind === 'admin' ? adminProblem(f.words) : curlProblem(f.words));

describe('the commands the docs show', () => {
  const found = docFiles().flatMap((file) => commandsOf(readFileSync(file, 'utf8'), relative(ROOT, file)));

  it('every `npm run admin -- …` line parses with the CLI\'s own parser, and every curl line names a route', () => {
    const wrong = found.flatMap((f) => {
      const p = problem(f);
      return p === undefined ? [] : [`${f.where}: ${f.text}\n  → ${p}`];
    });
    expect(wrong, wrong.join('\n')).toEqual([]);
    // The test reads what it should: the docs hold dozens of each (not a scan that found nothing).
    expect(found.filter((f) => f.kind === 'admin').length).toBeGreaterThan(20);
    expect(found.filter((f) => f.kind === 'curl').length).toBeGreaterThan(60);
  });

  it('finds each kind of line: fenced, indented in a list item, continued, inside $(…), inline over a line break', () => {
    const doc = [
      'Run `npm run admin -- org features <org>',
      '--disable collections` to switch it off.',
      '',
      '```sh',
      'ORG=$(npm run --silent admin -- org create --name Acme | jq -r .id)',
      'curl -sS -X POST "$AI_URL/v1/collections/$COL/items" -H "Authorization: Bearer $KEY" \\',
      '  -d \'{"a": 1}\'',
      '```',
      '',
      '1. A step:',
      '   ```sh',
      '   curl -sS -I "$DATA_URL/v1/databases/shop/blobs/$SHA"',
      '   ```',
    ].join('\n');
    const got = commandsOf(doc, 'x.md').map((f) => [f.where, f.kind, f.words]);
    expect(got).toEqual([
      ['x.md:5', 'admin', ['org', 'create', '--name', 'Acme']],
      ['x.md:6', 'curl', ['-sS', '-X', 'POST', '$AI_URL/v1/collections/$COL/items', '-H', 'Authorization: Bearer $KEY', '-d', '{"a": 1}']],
      ['x.md:12', 'curl', ['-sS', '-I', '$DATA_URL/v1/databases/shop/blobs/$SHA']],
      ['x.md:1', 'admin', ['org', 'features', '<org>', '--disable', 'collections']],
    ]);
  });

  it('fails a wrong command: a positional argument, an unknown option or command, a missing required option; takes placeholders and `…`', () => {
    expect(adminProblem(['org', 'features', '<org>', '--disable', 'collections'])).toMatch(/positional argument/);
    expect(adminProblem(['org', 'features', '--org', '<org>', '--disable', 'collections'])).toBeUndefined();
    expect(adminProblem(['org', 'features', '--org', 'ID', '--off', 'collections'])).toMatch(/--off/);
    expect(adminProblem(['org', 'feature', '--org', 'ID'])).toMatch(/unknown command "org feature"/);
    expect(adminProblem(['route', 'set', '--org', '$ORG', '--id', 'chat'])).toMatch(/missing --endpoint, --provider/);
    expect(adminProblem(['route', 'set', '…', '--endpoint', '/v1/chat/completions', '--default'])).toBeUndefined();
    expect(adminProblem(['route', 'set', '…', '--endpint', '/v1/chat/completions'])).toMatch(/--endpint/);
    expect(adminProblem(['key', 'create', '--help'])).toBeUndefined();
  });

  it('fails a curl line whose method and path name no route, or whose URL names no API', () => {
    expect(curlProblem(['-s', 'localhost:8080/v1/models', '-H', 'Authorization: Bearer $KEY'])).toBeUndefined();
    expect(curlProblem(['-s', 'localhost:8081/v1/models'])).toMatch(/GET \/v1\/models: no route of the data API/);
    expect(curlProblem(['-s', 'http://127.0.0.1:8083/readyz'])).toBeUndefined();
    expect(curlProblem(['-s', 'http://127.0.0.1:8083/v1/models'])).toMatch(/operations port/);
    expect(curlProblem(['-s', 'localhost:9999/v1/models'])).toMatch(/port 9999 serves no API/);
    expect(curlProblem(['-sS', '$AI_URL/v1/collections/$COL'])).toBeUndefined();
    expect(curlProblem(['-sS', '-X', 'PATCH', '$AI_URL/v1/collections/$COL'])).toMatch(/PATCH \/v1\/collections\/x: no route/);
    expect(curlProblem(['-sS', '$AI_URL/v1/collections/$COL', '-d', '{}'])).toMatch(/POST/);
    expect(curlProblem(['-sS', '-T', 'part.0', '$AI_URL/v1/uploads/$ID/parts/1'])).toBeUndefined();
    expect(curlProblem(['-sSI', '$DATA_URL/v1/databases/shop/blobs/$SHA'])).toBeUndefined();
    expect(curlProblem(['-sS', '$DATA_URL/v1/activity?limit=2&cursor=$NEXT_CURSOR'])).toBeUndefined();
    expect(curlProblem(['-sS', '$SOMEWHERE/v1/models'])).toMatch(/names no API/);
  });
});
