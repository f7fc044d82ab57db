/**
 * The console's pages on the local server (CONSOLE_PORT; docs/console.md): the built front-end in
 * console/dist/ (`npm run build:console`), beside the console API (`/console/api/…`, served by the
 * route table's functions). A path that names no file and no extension is a page of the single-page
 * app: it gets index.html. Every answer carries the console's security headers.
 *
 * Files are read on first request and kept, with an ETag and a gzip copy for browsers that take it;
 * the hashed assets (`/assets/…`) may be cached for a year, index.html is asked again each time.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { CONSOLE_SECURITY_HEADERS } from '../shared/console-headers.js';

/** Where `npm run build:console` writes the front-end, beside this module rather than the working directory. */
export const DEFAULT_CONSOLE_DIST = fileURLToPath(new URL('../../console/dist/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json',
};
const COMPRESSIBLE = /^(text\/|application\/json|image\/svg)/;

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Console not built</title></head>
<body><h1>The console is not built</h1>
<p>Run <code>npm run build:console</code> (it runs by itself in <code>npm ci</code>, <code>npm start</code> and <code>npm test</code> when the sources changed), then reload this page.</p>
<p>The console API answers at <code>/console/api/</code> all the same.</p></body></html>
`;

interface Kept {
  body: Buffer;
  gzip?: Buffer;
  etag: string;
}

export interface ConsoleFiles {
  /** Answers a request outside `/console/api/`. */
  serve(req: IncomingMessage, res: ServerResponse): void;
}

export function consoleFiles(dist = DEFAULT_CONSOLE_DIST): ConsoleFiles {
  const kept = new Map<string, Promise<Kept | undefined>>();

  const load = (path: string) => {
    let entry = kept.get(path);
    if (!entry) {
      entry = readFile(path).then(
        (body) => ({ body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`, gzip: COMPRESSIBLE.test(TYPES[extname(path)] ?? '') && body.length > 1024 ? gzipSync(body) : undefined }),
        () => undefined,
      );
      kept.set(path, entry);
      // A missing file (not built yet) is looked for again next time.
      void entry.then((file) => file ?? kept.delete(path));
    }
    return entry;
  };

  const write = (req: IncomingMessage, res: ServerResponse, status: number, type: string, file: Kept, cache: string) => {
    const headers: Record<string, string | number> = { ...CONSOLE_SECURITY_HEADERS, 'content-type': type, etag: file.etag, 'cache-control': cache, vary: 'Accept-Encoding' };
    if (status === 200 && req.headers['if-none-match']?.split(',').some((t) => t.trim() === file.etag)) {
      res.writeHead(304, headers);
      return res.end();
    }
    const gzip = file.gzip && /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    const body = gzip ? file.gzip! : file.body;
    if (gzip) headers['content-encoding'] = 'gzip';
    headers['content-length'] = body.length;
    res.writeHead(status, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  };

  const plain = (req: IncomingMessage, res: ServerResponse, status: number, text: string, type = 'text/plain; charset=utf-8') => {
    const body = Buffer.from(text);
    res.writeHead(status, { ...CONSOLE_SECURITY_HEADERS, 'content-type': type, 'content-length': body.length, 'cache-control': 'no-cache' });
    res.end(req.method === 'HEAD' ? undefined : body);
  };

  return {
    serve(req, res) {
      const method = req.method ?? 'GET';
      if (method !== 'GET' && method !== 'HEAD') return plain(req, res, 405, 'Only GET and HEAD here; the console API is under /console/api/.');
      let pathname: string;
      try {
        pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://console').pathname);
      } catch {
        return plain(req, res, 400, 'Bad path.');
      }
      if (!existsSync(join(dist, 'index.html'))) return plain(req, res, 503, NOT_BUILT, 'text/html; charset=utf-8');
      // Inside dist only: `..` and encoded separators never leave it.
      const file = normalize(join(dist, pathname));
      if (!file.startsWith(dist.endsWith(sep) ? dist : dist + sep) || pathname.includes('\0')) return plain(req, res, 404, 'Not found.');
      const page = () =>
        load(join(dist, 'index.html')).then((index) => (index ? write(req, res, 200, TYPES['.html'], index, 'no-cache') : plain(req, res, 503, NOT_BUILT, TYPES['.html'])));
      const ext = extname(pathname);
      if (!ext || pathname.endsWith('/')) return void page();
      void load(file).then((found) => {
        if (!found) return plain(req, res, 404, 'Not found.');
        const immutable = pathname.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache';
        write(req, res, 200, TYPES[ext] ?? 'application/octet-stream', found, immutable);
      });
    },
  };
}
