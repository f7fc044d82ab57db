/**
 * Every fetch a test makes to a platform's API port is checked against that API's OpenAPI document
 * (test/helpers/openapi-check.ts): an answer the document does not describe, or a request the platform
 * accepted that the document calls invalid, fails the test that made it, in its afterEach (afterAll for
 * calls made in a beforeAll). Registered in vitest.config.ts as a setup file: it runs in every test
 * process, so the whole suite proves the documents (docs/openapi.md).
 */
import { afterAll, afterEach, expect } from 'vitest';
import { checkerFor } from '../helpers/openapi-check.js';
import { apiOfOrigin } from '../helpers/platform-origins.js';

const KEY = Symbol.for('platform.openapi-problems');
/** Problems found since the last check; a test that provokes one on purpose takes it out (takeOpenApiProblems). */
export const problems: string[] = ((globalThis as Record<symbol, unknown>)[KEY] ??= []) as string[];

const WRAPPED = Symbol.for('platform.openapi-fetch');
const original = globalThis.fetch;
if (!(original as unknown as Record<symbol, boolean>)[WRAPPED]) {
  const checked = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    // Never build a Request from the caller's body: that would consume a stream the call still sends.
    const url = new URL(input instanceof Request ? input.url : String(input));
    const api = apiOfOrigin(url.origin);
    const checker = api ? checkerFor(api) : null;
    if (!api || !checker) return original(input, init);
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const requestHeaders = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    const requestBody = init?.body !== undefined ? readableBody(init.body) : input instanceof Request ? await bodyText(input.clone()) : undefined;
    const response = await original(input, init);
    const type = response.headers.get('content-type') ?? '';
    const json = type.includes('json');
    const responseBody = json && method !== 'HEAD' ? await response.clone().text() : undefined;
    problems.push(...checker.problems({ api, method, target: url.pathname + url.search, requestHeaders, requestBody, status: response.status, responseHeaders: response.headers, responseBody }));
    return response;
  };
  (checked as unknown as Record<symbol, boolean>)[WRAPPED] = true;
  globalThis.fetch = checked as typeof fetch;
}

/** The request body as text where the check can read it without consuming the caller's stream. */
function readableBody(body: RequestInit['body'] | undefined): string | undefined {
  if (typeof body === 'string') return body;
  if (body instanceof URLSearchParams) return body.toString();
  if (body instanceof Uint8Array) return body.length <= 1024 * 1024 ? Buffer.from(body).toString('utf8') : undefined;
  if (body instanceof ArrayBuffer) return body.byteLength <= 1024 * 1024 ? Buffer.from(body).toString('utf8') : undefined;
  return undefined;
}

async function bodyText(request: Request): Promise<string | undefined> {
  if (!request.body) return undefined;
  const type = request.headers.get('content-type') ?? '';
  return type.includes('json') || type.includes('form') ? request.text() : undefined;
}

/** Takes the problems found so far (a test of the checker provokes one on purpose). */
export function takeOpenApiProblems(): string[] {
  return problems.splice(0, problems.length);
}

const failOnProblems = () => {
  const found = takeOpenApiProblems();
  expect(found, 'answers or accepted requests the OpenAPI documents do not describe (docs/openapi.md)').toEqual([]);
};
afterEach(failOnProblems);
afterAll(failOnProblems);
