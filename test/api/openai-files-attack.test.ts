/**
 * An attacker's pass over POST /v1/files (issue 38; docs/ai/openai-compatibility.md, "Files"):
 * multipart bombs, hostile filenames, sizes, aborted and unterminated bodies, wrong content types,
 * and concurrent retries. Each is the spec's 4xx (never a 500) and leaves no spool file behind.
 */
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FILE_BYTES, SPOOL_DIR } from '../../lambdas/ai/openai-compat/multipart.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';
import { bearer } from '../helpers/platform.js';

const MiB = 1024 * 1024;
const B = 'attackboundary1234';

let w: OpenAiWorld;
beforeAll(async () => {
  w = await startOpenAiWorld();
}, 60_000);
afterAll(() => w?.close());

/** This process's spool files (the platform runs in it): none may outlive its request. */
const spools = () => {
  try {
    return readdirSync(SPOOL_DIR).filter((n) => n.startsWith(`${process.pid}-`));
  } catch {
    return [];
  }
};

const part = (name: string, value: string, extra = '') => `--${B}\r\nContent-Disposition: form-data; name="${name}"${extra}\r\n\r\n${value}\r\n`;
const filePart = (bytes: string | Buffer, disposition = 'name="file"; filename="a.txt"', headers = 'Content-Type: text/plain\r\n') =>
  Buffer.concat([Buffer.from(`--${B}\r\nContent-Disposition: form-data; ${disposition}\r\n${headers}\r\n`), Buffer.from(bytes), Buffer.from('\r\n')]);
const end = `--${B}--\r\n`;
const form = (...parts: (string | Buffer)[]) => Buffer.concat(parts.map((p) => Buffer.from(p)));

async function post(body: Buffer | string, contentType = `multipart/form-data; boundary=${B}`, headers: Record<string, string> = {}) {
  const res = await fetch(`${w.p.urls.ai}/v1/files`, { method: 'POST', headers: { ...bearer(w.p.credentials.secret_key), 'content-type': contentType, ...headers }, body });
  return { status: res.status, body: (await res.json()) as any, headers: res.headers };
}

const expectRefused = (r: { status: number; body: any }, status: number, code: string, param?: string | null) => {
  expect([r.status, r.body.error?.code], JSON.stringify(r.body)).toEqual([status, code]);
  if (param !== undefined) expect(r.body.error.param).toBe(param);
};

describe('multipart bombs', () => {
  it('10,000 parts: 400, nothing stored', async () => {
    const parts = Array.from({ length: 10_000 }, (_, i) => `--${B}\r\nX-Nothing: ${i}\r\n\r\nx\r\n`).join('');
    expectRefused(await post(form(parts, part('purpose', 'assistants'), filePart('x'), end)), 400, 'invalid_body');
    const fields = Array.from({ length: 10_000 }, () => part('purpose', 'assistants')).join('');
    expectRefused(await post(form(fields, filePart('x'), end)), 400, 'invalid_body');
    expect(spools()).toEqual([]);
  });

  it('a 1 MiB preamble before the parts: skipped as MIME says, the file stored', async () => {
    const r = await post(form('x'.repeat(MiB) + '\r\n', part('purpose', 'assistants'), filePart('after the preamble'), end));
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ object: 'file', bytes: 18, filename: 'a.txt' });
  });

  it('an unterminated body (no closing boundary, or cut inside a part header): 400, no spool left', async () => {
    expectRefused(await post(form(part('purpose', 'assistants'), filePart('no end'))), 400, 'invalid_body');
    expectRefused(await post(form(part('purpose', 'assistants'), `--${B}\r\nContent-Disposition: form-data; name="file"; filena`)), 400, 'invalid_body');
    expectRefused(await post(''), 400, 'invalid_body');
    expect(spools()).toEqual([]);
  });

  it('two file parts, a field twice, a field over 1 KiB: 400', async () => {
    expectRefused(await post(form(part('purpose', 'assistants'), filePart('one'), filePart('two'), end)), 400, 'invalid_body', 'file');
    expectRefused(await post(form(part('purpose', 'assistants'), part('purpose', 'user_data'), filePart('x'), end)), 400, 'invalid_body', 'purpose');
    expectRefused(await post(form(part('purpose', 'a'.repeat(2000)), filePart('x'), end)), 400, 'invalid_body', 'purpose');
    expect(spools()).toEqual([]);
  });

  it('unknown fields, expires_after[__proto__] and [constructor], a file under another name: 400 unsupported_field naming it', async () => {
    for (const name of ['model', 'expires_after[__proto__]', 'expires_after[constructor]', '__proto__', 'expires_after']) {
      expectRefused(await post(form(part('purpose', 'assistants'), part(name, '{"polluted":true}'), filePart('x'), end)), 400, 'unsupported_field', name);
    }
    expectRefused(await post(form(part('purpose', 'assistants'), filePart('x', 'name="document"; filename="a.txt"'), end)), 400, 'unsupported_field', 'document');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('no file, `file` as text, no purpose, base64 transfer encoding, a bad anchor: 400 naming the field', async () => {
    expectRefused(await post(form(part('purpose', 'assistants'), end)), 400, 'invalid_body', 'file');
    expectRefused(await post(form(part('purpose', 'assistants'), part('file', 'text, not a file'), end)), 400, 'invalid_body', 'file');
    expectRefused(await post(form(filePart('x'), end)), 400, 'invalid_body', 'purpose');
    expectRefused(await post(form(part('purpose', 'assistants'), filePart('eA==', undefined, 'Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n'), end)), 400, 'invalid_body', 'file');
    expectRefused(await post(form(part('purpose', 'assistants'), part('expires_after[anchor]', 'last_active_at'), part('expires_after[seconds]', '3600'), filePart('x'), end)), 400, 'invalid_body', 'expires_after[anchor]');
    expectRefused(await post(form(part('purpose', 'assistants'), part('expires_after[seconds]', '1e9'), filePart('x'), end)), 400, 'invalid_body');
  });

  it('not multipart/form-data, no boundary, a boundary over 70 characters: 400 before a byte is stored', async () => {
    expectRefused(await post('{"purpose":"assistants"}', 'application/json'), 400, 'invalid_body');
    expectRefused(await post('purpose=assistants', 'application/x-www-form-urlencoded'), 400, 'invalid_body');
    expectRefused(await post(form(part('purpose', 'assistants'), end), `multipart/mixed; boundary=${B}`), 400, 'invalid_body');
    expectRefused(await post(form(part('purpose', 'assistants'), end), 'multipart/form-data'), 400, 'invalid_body');
    const long = 'b'.repeat(71);
    expectRefused(await post(`--${long}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n--${long}--\r\n`, `multipart/form-data; boundary=${long}`), 400, 'invalid_body');
    expect(spools()).toEqual([]);
  });
});

describe('hostile filenames: data only, never part of a key', () => {
  const create = (disposition: string, bytes = 'named') => post(form(part('purpose', 'assistants'), filePart(bytes, disposition), end));

  it('paths are cut to their last segment; an RTL override stays data; none reaches the store’s paths', async () => {
    expect((await create('name="file"; filename="../../etc/passwd"')).body.filename).toBe('passwd');
    expect((await create('name="file"; filename="C:\\\\x\\\\y.pdf"')).body).toMatchObject({ filename: 'y.pdf' });
    const rtl = await create('name="file"; filename="invoice\u202Efdp.exe"', 'rtl');
    expect(rtl.status).toBe(200);
    expect(rtl.body.filename).toBe('invoice\u202Efdp.exe');
    const dot = await create('name="file"; filename=".."', 'dots');
    expect(dot.body.filename).toBe('upload.bin');
    const star = await create("name=\"file\"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf", 'star');
    expect(star.body.filename).toBe('résumé.pdf');
    const content = await fetch(`${w.p.urls.ai}/v1/files/${star.body.id}/content`, { headers: bearer(w.p.credentials.secret_key) });
    expect(content.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf");
    expect(await content.text()).toBe('star');
    // The ids and every stored path are the platform's own: no name a client sent is in them.
    const paths: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) e.isDirectory() ? walk(join(dir, e.name)) : paths.push(join(dir, e.name));
    };
    walk(w.p.dataDir);
    expect(paths.filter((p) => /passwd|invoice|résumé|y\.pdf/.test(p))).toEqual([]);
  });

  it('NUL and control characters, a lone surrogate, 10 KB: 400 naming file, nothing kept', async () => {
    // Raw NUL or control bytes in a part's header are a malformed header to the parser already;
    // percent-encoded (RFC 5987) they arrive in the name, which the uploads' rule refuses.
    expectRefused(await create('name="file"; filename="a\u0000b.txt"'), 400, 'invalid_body');
    expectRefused(await create('name="file"; filename="a\u001bb.txt"'), 400, 'invalid_body');
    expectRefused(await create("name=\"file\"; filename*=UTF-8''a%00b.txt"), 400, 'invalid_body', 'file');
    expectRefused(await create("name=\"file\"; filename*=UTF-8''a%1B%5B2Jb.txt"), 400, 'invalid_body', 'file');
    expectRefused(await create(`name="file"; filename="${'n'.repeat(10_000)}.pdf"`), 400, 'invalid_body', 'file');
    // A lone surrogate cannot arrive as UTF-8: the decoder makes it U+FFFD, which is a name like any other.
    const lone = await create("name=\"file\"; filename*=UTF-8''a%ED%A0%80b.txt", 'lone');
    expect([200, 400]).toContain(lone.status);
    if (lone.status === 200) expect(lone.body.filename).not.toMatch(/[\uD800-\uDFFF]/);
    expect(spools()).toEqual([]);
  });
});

describe('sizes and streams', () => {
  it('a zero-byte file: 400 naming file', async () => {
    expectRefused(await post(form(part('purpose', 'assistants'), filePart(''), end)), 400, 'invalid_body', 'file');
  });

  it('512 MiB + 1 byte: 413 request_too_large naming /v1/uploads, the spool removed', async () => {
    const r = await streamed(MAX_FILE_BYTES + 1);
    expect(r.status).toBe(413);
    expect(r.body.error).toMatchObject({ code: 'request_too_large', param: 'file' });
    expect(r.body.error.message).toContain('/v1/uploads');
    expect(spools()).toEqual([]);
  }, 180_000);

  it('a client gone mid-upload leaves no spool file and no file', async () => {
    const before = (await new OpenAI({ apiKey: w.p.credentials.secret_key, baseURL: `${w.p.urls.ai}/v1`, organization: null, project: null }).files.list({ limit: 100 })).data.length;
    await streamed(64 * MiB, { abortAfter: 16 * MiB });
    for (let i = 0; i < 50 && spools().length; i++) await new Promise((r) => setTimeout(r, 100));
    expect(spools()).toEqual([]);
    expect((await w.client.files.list({ limit: 100 })).data.length).toBe(before);
  }, 60_000);
});

describe('retries at once', () => {
  it('three concurrent creates with one Idempotency-Key: one file', async () => {
    const key = `race-${Date.now()}`;
    const bytes = createHash('sha256').update(key).digest();
    const files = await Promise.all(
      [0, 1, 2].map(async () => w.clientFor(w.p.credentials.secret_key, { maxRetries: 5 }).files.create({ file: await toFile(bytes, 'race.bin'), purpose: 'assistants' }, { headers: { 'Idempotency-Key': key } })),
    );
    expect(new Set(files.map((f) => f.id)).size).toBe(1);
    const ids: string[] = [];
    for await (const f of w.client.files.list({ limit: 100 })) ids.push(f.id);
    expect(ids.filter((id) => id === files[0].id)).toHaveLength(1);
  });
});

/**
 * A form whose file part has `size` bytes, sent chunked from a generator (never whole in memory);
 * `abortAfter`: the request is destroyed once that many bytes went out.
 */
function streamed(size: number, opts: { abortAfter?: number } = {}): Promise<{ status: number; body: any }> {
  const url = new URL(`${w.p.urls.ai}/v1/files`);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { ...bearer(w.p.credentials.secret_key), 'content-type': `multipart/form-data; boundary=${B}`, 'transfer-encoding': 'chunked' } },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text || '{}') }));
        res.on('error', reject);
      },
    );
    let answered = false;
    req.on('response', () => (answered = true));
    req.on('error', (error) => (opts.abortAfter !== undefined || answered ? resolve({ status: 0, body: {} }) : reject(error)));
    const chunk = Buffer.alloc(MiB, 7);
    let sent = 0;
    const write = () => {
      if (sent === 0) req.write(form(part('purpose', 'assistants'), `--${B}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`));
      while (sent < size) {
        if (answered || req.destroyed) return;
        if (opts.abortAfter !== undefined && sent >= opts.abortAfter) {
          req.destroy();
          return setTimeout(() => resolve({ status: 0, body: {} }), 200);
        }
        const n = Math.min(MiB, size - sent);
        sent += n;
        if (!req.write(n === MiB ? chunk : chunk.subarray(0, n))) return void req.once('drain', write);
      }
      req.end(`\r\n${end}`);
    };
    write();
  });
}
