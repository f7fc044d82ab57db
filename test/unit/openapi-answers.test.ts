/**
 * The check every API test runs through (test/setup/openapi-answers.ts): an answer or an accepted
 * request the document does not describe is a problem, and one that it describes is none.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenApiChecker, type Exchange } from '../helpers/openapi-check.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';
import { closeServer, listen } from '../helpers/servers.js';
import { takeOpenApiProblems } from '../setup/openapi-answers.js';

const DOC = {
  openapi: '3.1.1',
  info: { title: 't', version: '1' },
  paths: {
    '/v1/things/{id}': {
      get: {
        parameters: [
          { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^t_' } },
          { name: 'limit', in: 'query', schema: { type: 'string', pattern: '^\\d+$' } },
          { name: 'filter[<field>]', in: 'query', schema: { type: 'string' } },
        ],
        responses: {
          200: {
            description: 'ok',
            headers: { ETag: { required: true, schema: { type: 'string' } } },
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } },
          },
          404: { description: 'no', content: { 'application/json': { schema: { type: 'object' } } } },
        },
      },
      put: {
        requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: false } } } },
        responses: { 204: { description: 'stored' }, 400: { description: 'refused', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
  },
  components: { schemas: { Thing: { type: 'object', required: ['id'], properties: { id: { type: 'string' } }, additionalProperties: false } } },
};

const exchange = (over: Partial<Exchange>): Exchange => ({
  api: 'data',
  method: 'GET',
  target: '/v1/things/t_1',
  requestHeaders: new Headers(),
  status: 200,
  responseHeaders: new Headers({ 'content-type': 'application/json', etag: '"1"' }),
  responseBody: '{"id":"t_1"}',
  ...over,
});

describe('the OpenAPI check', () => {
  const checker = new OpenApiChecker('data', DOC);

  it('passes an answer the document describes', () => {
    expect(checker.problems(exchange({}))).toEqual([]);
    expect(checker.problems(exchange({ target: '/v1/things/t_1?limit=5&filter[name]=x' }))).toEqual([]);
    expect(checker.problems(exchange({ method: 'PUT', requestBody: '{"n":1}', requestHeaders: new Headers({ 'content-type': 'application/json' }), status: 204, responseHeaders: new Headers(), responseBody: '' }))).toEqual([]);
  });

  it('fails an answer with a field the document lacks', () => {
    expect(checker.problems(exchange({ responseBody: '{"id":"t_1","extra":true}' }))).toEqual([expect.stringContaining('must NOT have additional properties "extra"')]);
  });

  it('fails an undocumented status, a missing required header, an undocumented media type', () => {
    expect(checker.problems(exchange({ status: 409 }))).toEqual([expect.stringContaining('status 409 is not documented')]);
    expect(checker.problems(exchange({ responseHeaders: new Headers({ 'content-type': 'application/json' }) }))).toEqual([expect.stringContaining('lacks the required header ETag')]);
    expect(checker.problems(exchange({ responseHeaders: new Headers({ 'content-type': 'text/plain', etag: '"1"' }), responseBody: undefined }))).toEqual([expect.stringContaining('content-type text/plain is not documented')]);
  });

  it('fails an accepted request the document calls invalid, but not a refused one', () => {
    expect(checker.problems(exchange({ target: '/v1/things/t_1?nope=1' }))).toEqual([expect.stringContaining('query parameter nope')]);
    expect(checker.problems(exchange({ target: '/v1/things/x_1' }))).toEqual([expect.stringContaining('path parameter id')]);
    const put = { method: 'PUT', requestHeaders: new Headers({ 'content-type': 'application/json' }), responseHeaders: new Headers(), responseBody: '' };
    expect(checker.problems(exchange({ ...put, requestBody: '{"n":1.5}', status: 204 }))).toEqual([expect.stringContaining('accepted a body the document refuses')]);
    expect(checker.problems(exchange({ ...put, requestBody: '{"n":1.5}', status: 400, responseHeaders: new Headers({ 'content-type': 'application/json' }), responseBody: '{}' }))).toEqual([]);
  });

  it('takes a raw body without a Content-Type as bytes, and a media range as any type', () => {
    const raw = new OpenApiChecker('data', {
      ...DOC,
      paths: { '/v1/files/{id}': { put: { requestBody: { required: true, content: { 'application/octet-stream': { schema: { type: 'string' } } } }, responses: { 201: { description: 'stored' } } } } },
    });
    const put = { method: 'PUT', target: '/v1/files/f', requestBody: 'bytes', status: 201, responseHeaders: new Headers(), responseBody: '' };
    expect(raw.problems(exchange({ ...put, requestHeaders: new Headers() }))).toEqual([]);
    expect(raw.problems(exchange({ ...put, requestHeaders: new Headers({ 'content-type': 'text/plain' }) }))).toEqual([expect.stringContaining('accepted a body of type text/plain')]);
    const any = new OpenApiChecker('data', { ...DOC, paths: { '/v1/files/{id}': { put: { ...raw.document.paths['/v1/files/{id}'].put, requestBody: { content: { '*/*': { schema: { type: 'string' } } } } } } } });
    expect(any.problems(exchange({ ...put, requestHeaders: new Headers({ 'content-type': 'text/plain' }) }))).toEqual([]);
    // Bytes labelled JSON on a route that takes any type are bytes, not a JSON body to parse.
    expect(any.problems(exchange({ ...put, requestBody: '\u0000 not json', requestHeaders: new Headers({ 'content-type': 'application/json' }) }))).toEqual([]);
  });

  it("holds a path no operation has to the fallback's answers", () => {
    const err = '{"error":{"code":"not_found","message":"m","type":"not_found_error","param":null}}';
    expect(checker.problems(exchange({ target: '/v1/nothing', status: 404, responseBody: err }))).toEqual([]);
    expect(checker.problems(exchange({ target: '/v1/nothing', status: 200 }))).toEqual([expect.stringContaining('no operation')]);
  });
});

describe('the fetch of every test', () => {
  let server: Server;
  let origin: string;
  beforeAll(async () => {
    // A server posing as the Data API: it answers the database list with a field the document lacks.
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req_1' });
      res.end(JSON.stringify({ databases: [], extra: true }));
    });
    origin = await listen(server);
    registerApiOrigins({ data: origin });
  });
  afterAll(() => closeServer(server));

  it("records the answer the committed document lacks, for the test's afterEach to fail", async () => {
    const res = await fetch(`${origin}/v1/databases`, { headers: { authorization: 'Bearer x' } });
    expect(await res.json()).toEqual({ databases: [], extra: true });
    expect(takeOpenApiProblems()).toEqual([expect.stringMatching(/data GET \/v1\/databases -> 200: body .*additional properties "extra"/)]);
  });
});
