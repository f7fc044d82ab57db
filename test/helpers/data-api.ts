/** Calls through the local server as the API tests make them, and the one check of an error answer. */
import { expect } from 'vitest';

export interface Res {
  status: number;
  headers: Headers;
  body: any;
}

/**
 * `method path` on `baseUrl` with the credential headers `cred`. A string body is sent as it is (to
 * test malformed JSON); anything else as JSON. The answer body is parsed when there is one.
 */
export async function callApi(
  baseUrl: string,
  cred: Record<string, string>,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Res> {
  const raw = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { ...cred, ...(raw !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: raw,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

/** The answer is the spec's error: this status and `error.code` (the body shown when it is not). */
export function expectError(r: Res, status: number, code: string, what = '') {
  expect({ status: r.status, code: r.body?.error?.code }, `${what} ${JSON.stringify(r.body)?.slice(0, 500)}`).toEqual({ status, code });
}

/** Awaits a call, expects `status` (200 by default; the body shown when it differs) and returns its body. */
export async function ok(r: Promise<Res>, status = 200): Promise<any> {
  const res = await r;
  expect(res.status, JSON.stringify(res.body)?.slice(0, 400)).toBe(status);
  return res.body;
}
