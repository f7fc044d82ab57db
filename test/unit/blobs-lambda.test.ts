/**
 * The Lambda path of the file routes: the same handlers called with API Gateway v2 events whose body
 * arrives base64 in the event (as Lambda receives it), answering base64 bodies. Also the stream-body
 * middleware's limits, which the local server relies on for bodies it does not buffer.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { httpHandler, type RouteFunction } from '../../lambdas/http/handler.js';
import { LAMBDA_MAX_BODY_BYTES } from '../../lambdas/http/event.js';
import type { RouteDef } from '../../lambdas/http/routes.js';
import { handler as putDatabase } from '../../lambdas/http/handlers/data/put-database.js';
import { handler as putBlob } from '../../lambdas/http/handlers/data/put-blob.js';
import { handler as getBlob } from '../../lambdas/http/handlers/data/get-blob.js';
import { handler as headBlob } from '../../lambdas/http/handlers/data/head-blob.js';
import { handler as deleteBlob } from '../../lambdas/http/handlers/data/delete-blob.js';
import { handler as createUpload } from '../../lambdas/http/handlers/data/create-upload.js';
import { handler as putPart } from '../../lambdas/http/handlers/data/put-upload-part.js';
import { handler as completeUpload } from '../../lambdas/http/handlers/data/complete-upload.js';
import { apiEvent, lambdaContext } from '../helpers/events.js';

let dir: string;
let engine: EmbeddedEngine;
let key: string;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  dir = mkdtempSync(join(tmpdir(), 'blobs-lambda-'));
  engine = createEmbeddedEngine({ dataDir: dir });
  useEngine(engine);
  const t = new Tenants(engine.kv, () => Date.now());
  const org = await t.createOrganization('o');
  key = (await t.createSecretKey(org.id)).key;
  expect((await call(putDatabase, 'PUT', '/v1/databases/db', { database: 'db' })).statusCode).toBe(201);
});
afterAll(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

const ctx = lambdaContext();
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** The test's credential, and the Content-Length a client declares for a body (leave it out with `declared: false`). */
const headersFor = (body: Buffer | undefined, headers: Record<string, string> = {}, declared = true): Record<string, string> => ({
  authorization: `Bearer ${key}`,
  ...(body && declared ? { 'content-length': String(body.length) } : {}),
  ...headers,
});

const call = (h: RouteFunction, method: string, path: string, params: Record<string, string>, body?: Buffer, headers?: Record<string, string>) =>
  h(apiEvent({ method, path, params, body, headers: headersFor(body, headers) }), ctx);

const json = (r: APIGatewayProxyStructuredResultV2) => JSON.parse(String(r.body));
const bytes = (r: APIGatewayProxyStructuredResultV2) => Buffer.from(String(r.body), r.isBase64Encoded ? 'base64' : 'utf8');

describe('file routes in Lambda (base64 bodies in the event)', () => {
  it('PUT stores the base64 body, GET answers it base64, HEAD answers headers only, DELETE 204', async () => {
    const data = randomBytes(5000);
    const params = { database: 'db', sha256: sha(data) };
    const path = `/v1/databases/db/blobs/${sha(data)}`;
    const put = await call(putBlob, 'PUT', path, params, data);
    expect(put.statusCode).toBe(201);
    expect(json(put)).toEqual({ sha256: sha(data), size: 5000 });
    expect((await call(putBlob, 'PUT', path, params, data)).statusCode).toBe(200);

    const got = await call(getBlob, 'GET', path, params);
    expect(got.statusCode).toBe(200);
    expect(got.isBase64Encoded).toBe(true);
    expect(bytes(got).equals(data)).toBe(true);
    expect(got.headers).toMatchObject({ 'content-type': 'application/octet-stream', 'content-length': '5000', etag: `"${sha(data)}"` });

    const head = await call(headBlob, 'HEAD', path, params);
    expect(head.statusCode).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers).toMatchObject({ 'content-length': '5000' });

    expect((await call(deleteBlob, 'DELETE', path, params)).statusCode).toBe(204);
    expect(json(await call(getBlob, 'GET', path, params)).error.code).toBe('blob_not_found');
  });

  it('refuses a mismatching body with 400 hash_mismatch and a body without Content-Length with 411', async () => {
    const data = randomBytes(100);
    const claimed = sha(Buffer.from('other'));
    const bad = await call(putBlob, 'PUT', `/v1/databases/db/blobs/${claimed}`, { database: 'db', sha256: claimed }, data);
    expect([bad.statusCode, json(bad).error.code]).toEqual([400, 'hash_mismatch']);
    const path = `/v1/databases/db/blobs/${sha(data)}`;
    const noLength = await putBlob(apiEvent({ method: 'PUT', path, params: { database: 'db', sha256: sha(data) }, body: data, headers: headersFor(data, {}, false) }), ctx);
    expect([noLength.statusCode, json(noLength).error.code]).toEqual([411, 'length_required']);
  });

  it('a multipart upload works with base64 parts', async () => {
    const parts = [randomBytes(5 * 1024 * 1024), randomBytes(10)];
    const hash = sha(Buffer.concat(parts));
    const base = `/v1/databases/db/blobs/${hash}/uploads`;
    const created = await call(createUpload, 'POST', base, { database: 'db', sha256: hash });
    expect(created.statusCode).toBe(201);
    const id = json(created).upload_id;
    const listed = [];
    for (const [i, part] of parts.entries()) {
      const r = await call(putPart, 'PUT', `${base}/${id}/parts/${i + 1}`, { database: 'db', sha256: hash, upload_id: id, n: String(i + 1) }, part);
      expect(r.statusCode).toBe(200);
      listed.push({ part_number: i + 1, etag: json(r).etag });
    }
    const done = await call(completeUpload, 'POST', `${base}/${id}/complete`, { database: 'db', sha256: hash, upload_id: id }, Buffer.from(JSON.stringify({ parts: listed })), {
      'content-type': 'application/json',
    });
    expect(done.statusCode).toBe(201);
    expect(json(done)).toEqual({ sha256: hash, size: parts[0].length + 10 });
  });

  it('a download over the Lambda payload limit answers 413 payload_too_large instead of failing the invocation', async () => {
    const data = randomBytes(LAMBDA_MAX_BODY_BYTES + 1);
    const params = { database: 'db', sha256: sha(data) };
    const path = `/v1/databases/db/blobs/${sha(data)}`;
    expect((await call(putBlob, 'PUT', path, params, data)).statusCode).toBe(201);
    const got = await call(getBlob, 'GET', path, params);
    expect([got.statusCode, json(got).error.code]).toEqual([413, 'payload_too_large']);
    expect((await call(headBlob, 'HEAD', path, params)).headers).toMatchObject({ 'content-length': String(data.length) });
  });
});

describe('stream-body middleware', () => {
  const route: RouteDef = { id: 'test.stream', api: 'data', method: 'PUT', path: '/v1/test', handler: 'none', grants: [], body: 'stream', maxBodyBytes: 10 };
  const echo = httpHandler(route, async (req) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req.stream()) chunks.push(chunk as Buffer);
    return { status: 200, body: Buffer.concat(chunks) };
  });

  it('hands the bytes over as a stream, unparsed whatever their content type', async () => {
    const r = await call(echo, 'PUT', '/v1/test', {}, Buffer.from('{not json'), { 'content-type': 'application/json' });
    expect(r.statusCode).toBe(200);
    expect(bytes(r).toString()).toBe('{not json');
  });

  it('refuses a declared Content-Length over maxBodyBytes before reading (413)', async () => {
    const r = await call(echo, 'PUT', '/v1/test', {}, Buffer.from('0123456789a'));
    expect([r.statusCode, json(r).error.code]).toEqual([413, 'payload_too_large']);
  });

  it('counts the bytes as they stream when no length was declared (413)', async () => {
    const body = Buffer.from('0123456789abcdef');
    const r = await echo(apiEvent({ method: 'PUT', path: '/v1/test', body, headers: headersFor(body, {}, false) }), ctx);
    expect([r.statusCode, json(r).error.code]).toEqual([413, 'payload_too_large']);
  });
});
