/**
 * Malformed input through the local server: JSON bodies nested past the
 * documented depth limit, non-finite numbers in record data, and HTTP requests Node's parser refuses
 * (duplicate Content-Length, oversized headers) — each answered with the one JSON error shape, never
 * a 500 or Node's bare default answer.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError } from '../helpers/data-api.js';
import { MAX_JSON_DEPTH } from '../../lambdas/http/middleware/json-body.js';

let p: TestPlatform;
let server: Record<string, string>;
const DB = 'malformed';

const call = (method: string, path: string, body?: unknown) => callApi(p.urls.data, server, method, path, body);
const coll = (name: string) => `/v1/databases/${DB}/collections/${name}`;
const recs = (name: string) => `${coll(name)}/records`;
const batch = (body: unknown) => call('POST', `/v1/databases/${DB}/batch`, body);

const nestedArrays = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
const nestedObjects = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  expect((await call('PUT', `/v1/databases/${DB}`)).status).toBe(201);
  expect((await call('PUT', coll('free'), { mode: 'free' })).status).toBeLessThan(300);
  expect((await call('PUT', coll('typed'), { fields: [{ name: 'doc', type: 'json' }, { name: 'n', type: 'number' }] })).status).toBeLessThan(300);
});
afterAll(async () => p?.close());

describe('deeply nested JSON', () => {
  it('refuses a record create nested 5,000 levels deep with 400 invalid_body, not a 500', async () => {
    for (const deep of [nestedArrays(5000), nestedObjects(5000)]) {
      expectError(await call('POST', recs('free'), `{"deep":${deep}}`), 400, 'invalid_body');
      expectError(await call('POST', recs('typed'), `{"doc":${deep}}`), 400, 'invalid_body');
    }
  });

  it('refuses a batch nested 5,000 levels deep with 400 invalid_body, not a 500', async () => {
    for (const deep of [nestedArrays(5000), nestedObjects(5000)]) {
      const body = `{"ops":[{"op":"create","collection":"free","data":{"deep":${deep}}}]}`;
      expectError(await batch(body), 400, 'invalid_body');
    }
  });

  it('takes a body nested exactly to the limit and refuses one level more', async () => {
    // The body object is level 1 and the field's value starts at level 2.
    const ok = await call('POST', recs('typed'), `{"doc":${nestedArrays(MAX_JSON_DEPTH - 1)}}`);
    expect(ok.status, JSON.stringify(ok.body)?.slice(0, 300)).toBe(201);
    expect(JSON.stringify(ok.body.doc)).toBe(nestedArrays(MAX_JSON_DEPTH - 1));
    expectError(await call('POST', recs('typed'), `{"doc":${nestedArrays(MAX_JSON_DEPTH)}}`), 400, 'invalid_body');
  });
});

describe('non-finite numbers', () => {
  it('refuses 1e400 (Infinity once parsed) anywhere in a free record with 400 invalid_value naming the field', async () => {
    for (const value of ['1e400', '-1e400', '[1, {"x": 1e400}]', '{"deep": {"deeper": -1e999}}']) {
      const r = await call('POST', recs('free'), `{"ok": 1, "bad": ${value}}`);
      expectError(r, 400, 'invalid_value', value);
      expect(r.body.error.param).toBe('bad');
    }
    expect((await call('GET', recs('free'))).body.records).toEqual([]);
  });

  it('refuses 1e400 in a json field, on create, update and in a batch', async () => {
    const r = await call('POST', recs('typed'), '{"doc": {"list": [1e400]}}');
    expectError(r, 400, 'invalid_value');
    expect(r.body.error.param).toBe('doc');
    expectError(await call('POST', recs('typed'), '{"n": 1e400}'), 400, 'invalid_value');
    const made = await call('POST', recs('typed'), { id: 'fin', doc: { v: 1 } });
    expect(made.status).toBe(201);
    expectError(await call('PATCH', `${recs('typed')}/fin`, '{"doc": 1e400}'), 400, 'invalid_value');
    expect((await call('GET', `${recs('typed')}/fin`)).body.doc).toEqual({ v: 1 });
    const b = await batch('{"ops":[{"op":"create","collection":"free","data":{"x":[1e400]}}]}');
    expectError(b, 400, 'invalid_value');
    expect(b.body.error.param).toBe('x');
  });
});

/** Writes `request` on a raw socket and returns everything the server sends until it closes. */
function rawRequest(request: string): Promise<string> {
  const url = new URL(p.urls.data);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.on('connect', () => socket.write(request));
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer in 5 s')));
  });
}

function parseAnswer(raw: string) {
  const [head, body] = [raw.slice(0, raw.indexOf('\r\n\r\n')), raw.slice(raw.indexOf('\r\n\r\n') + 4)];
  const [status, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status, headers, body: JSON.parse(body) };
}

describe('HTTP the parser refuses', () => {
  it('answers duplicate Content-Length headers with 400 invalid_body in the JSON error shape', async () => {
    const raw = await rawRequest(`POST ${recs('free')} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`);
    const a = parseAnswer(raw);
    expect(a.status).toBe('HTTP/1.1 400 Bad Request');
    expect(a.headers['content-type']).toBe('application/json');
    expect(a.headers.connection).toBe('close');
    expect(a.body).toEqual({ error: { code: 'invalid_body', message: expect.any(String), type: 'invalid_request_error', param: null } });
  });

  it('answers headers over 16 KB with 431 request_header_fields_too_large in the JSON error shape', async () => {
    const raw = await rawRequest(`GET ${recs('free')} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    const a = parseAnswer(raw);
    expect(a.status).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(a.headers.connection).toBe('close');
    expect(a.body).toEqual({ error: { code: 'request_header_fields_too_large', message: expect.any(String), type: 'invalid_request_error', param: null } });
  });
});
