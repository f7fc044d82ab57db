/**
 * What the operations port serves for reading the APIs (docs/decisions/openapi-serving.md): the
 * committed OpenAPI documents (docs/openapi/{ai,data,events}.json, written by `npm run openapi`) and
 * `/docs`, a page rendering them with Scalar's standalone bundle served from this checkout's
 * node_modules. The page loads nothing from another origin: no fonts, no proxy, no telemetry.
 *
 * Each file is read once, on its first request, and kept; answers carry an ETag (a repeated request
 * with If-None-Match gets a 304) and `cache-control: no-cache`, so a browser asks again each time and
 * a regenerated document shows after a restart.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The APIs with a document, as named in docs/openapi/ and in `/docs?api=`. */
export const OPENAPI_APIS = ['ai', 'data', 'events'] as const;
export const DOCS_PATHS = [...OPENAPI_APIS.map((api) => `/openapi/${api}.json`), '/docs'] as const;

/** Where the documents are committed, beside this module rather than the working directory `npm start` ran in. */
export const DEFAULT_OPENAPI_DIR = fileURLToPath(new URL('../../docs/openapi/', import.meta.url));

const SCALAR_ASSET = '/docs/assets/scalar-standalone.js';
const PAGE_SCRIPT = '/docs/assets/docs.js';

/**
 * Scalar's options, beside the three documents: its defaults would reach other origins. Its fonts
 * come from fonts.scalar.com (the page uses the system's); its client button opens client.scalar.com;
 * its developer toolbar offers uploading the document to Scalar's registry; its agent chat calls
 * Scalar's service (off on localhost already, off everywhere here); a test request would go from the
 * page to an API port, another origin this page's policy refuses (curl and the docs' examples do
 * that). No `proxyUrl`: no request goes through Scalar's proxy.
 */
const SCALAR_CONFIGURATION = {
  sources: [
    { title: 'AI API', slug: 'ai', url: '/openapi/ai.json' },
    { title: 'Data API', slug: 'data', url: '/openapi/data.json' },
    { title: 'Events API', slug: 'events', url: '/openapi/events.json' },
  ],
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  hideTestRequestButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
};

// Scalar reads `?api=data` itself to open that document (its slug).
const PAGE_SCRIPT_TEXT = `Scalar.createApiReference('#app', ${JSON.stringify(SCALAR_CONFIGURATION, null, 2)});\n`;

const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="app"></div>
<script src="${SCALAR_ASSET}"></script>
<script src="${PAGE_SCRIPT}"></script>
</body>
</html>
`;

/**
 * The page's policy: its scripts and requests from this origin only. Scalar injects its styles at run
 * time (style elements), hence 'unsafe-inline' for styles; its icons are inline SVG and data URLs.
 */
const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface StaticFile {
  body: Buffer;
  etag: string;
}

export interface Served {
  type: string;
  /** What a 404 says when the file is missing. */
  missing: string;
  headers?: Record<string, string>;
  load: () => Promise<StaticFile | undefined>;
}

const fromText = (text: string): StaticFile => fromBuffer(Buffer.from(text));
const fromBuffer = (body: Buffer): StaticFile => ({ body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` });

/** The file's content, or undefined when it does not exist (another failure is thrown). */
async function readIfPresent(path: string): Promise<StaticFile | undefined> {
  try {
    return fromBuffer(await readFile(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The standalone bundle of the installed @scalar/api-reference (its package exports no path to it); undefined when not installed. */
async function scalarBundle(): Promise<StaticFile | undefined> {
  let main: string;
  try {
    main = createRequire(import.meta.url).resolve('@scalar/api-reference');
  } catch {
    return undefined;
  }
  return readIfPresent(join(dirname(main), 'browser', 'standalone.js'));
}

/** A file read on its first request and kept; a missing one is looked for again next time. */
function once(load: () => Promise<StaticFile | undefined>): () => Promise<StaticFile | undefined> {
  let kept: Promise<StaticFile | undefined> | undefined;
  return () =>
    (kept ??= load().then(
      (file) => {
        if (!file) kept = undefined;
        return file;
      },
      (error) => {
        kept = undefined;
        throw error;
      },
    ));
}

export interface DocsFiles {
  /** What `pathname` serves, or undefined when it is none of these files. */
  lookup(pathname: string): Served | undefined;
}

/** The documents in `openapiDir` (tests give their own), the page and its scripts. */
export function docsFiles(openapiDir = DEFAULT_OPENAPI_DIR): DocsFiles {
  const json = 'application/json';
  const javascript = 'text/javascript; charset=utf-8';
  const served = new Map<string, Served>([
    ...OPENAPI_APIS.map((api): [string, Served] => [
      `/openapi/${api}.json`,
      { type: json, missing: `The OpenAPI document ${api}.json is missing: \`npm run openapi\` writes it to docs/openapi/.`, load: once(() => readIfPresent(join(openapiDir, `${api}.json`))) },
    ]),
    ['/docs', { type: 'text/html; charset=utf-8', headers: { 'content-security-policy': DOCS_CSP, 'referrer-policy': 'no-referrer' }, missing: '', load: once(async () => fromText(PAGE_HTML)) }],
    [PAGE_SCRIPT, { type: javascript, missing: '', load: once(async () => fromText(PAGE_SCRIPT_TEXT)) }],
    [SCALAR_ASSET, { type: javascript, missing: "Scalar's bundle is missing: `npm ci` installs @scalar/api-reference.", load: once(scalarBundle) }],
  ]);
  return { lookup: (pathname) => served.get(pathname) };
}

/** Whether one of the If-None-Match header's tags (or `*`) is the file's: then 304. */
function notModified(req: IncomingMessage, etag: string): boolean {
  const header = req.headers['if-none-match'];
  if (!header) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t === etag || t === `W/${etag}`;
  });
}

/** Answers GET or HEAD with the file (or 304); false when it is missing, for the caller's 404. */
export function sendFile(req: IncomingMessage, res: ServerResponse, served: Served, file: StaticFile | undefined): boolean {
  if (!file) return false;
  const headers = { 'content-type': served.type, etag: file.etag, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff', ...served.headers };
  if (notModified(req, file.etag)) {
    res.writeHead(304, headers);
    res.end();
    return true;
  }
  res.writeHead(200, { ...headers, 'content-length': file.body.length });
  res.end(req.method === 'HEAD' ? undefined : file.body);
  return true;
}
