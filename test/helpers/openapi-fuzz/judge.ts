/**
 * Sends a fuzzed request to the local platform and says what is wrong with the answer: a 5xx, an
 * answer the document does not describe (the OpenAPI checker), a broken request accepted or not
 * refused with a 4xx naming the broken field.
 */
import type { Api } from '../../../lambdas/shared/api.js';
import type { OpenApiChecker } from '../openapi-check.js';
import type { Schema, Validates } from './schema.js';
import type { FuzzRequest } from './requests.js';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

export async function send(baseUrl: string, req: FuzzRequest): Promise<Answer> {
  const res = await fetch(`${baseUrl}${req.target}`, { method: req.method, headers: req.headers, body: req.body?.text, redirect: 'manual' });
  const text = req.method === 'HEAD' ? '' : await res.text();
  return { status: res.status, headers: res.headers, text };
}

/** Compiled once per schema text: the schemas the generator asks about are often rebuilt objects. */
export function validatesWith(checker: OpenApiChecker): Validates {
  const keys = new Map<string, string>();
  return (schema: Schema, value: unknown) => {
    const text = JSON.stringify(schema);
    let key = keys.get(text);
    if (!key) keys.set(text, (key = `fuzz#${keys.size}`));
    return checker.schemaFault(key, schema as Record<string, unknown>, value) === undefined;
  };
}

/** Whether an answer's `error.param` names the broken place: itself, a field inside it, or the field it is in. */
export function namesBroken(param: unknown, broken: NonNullable<FuzzRequest['broken']>): boolean {
  if (broken.where === 'body' && broken.name === '') return true;
  // The body as a whole is refused for its depth before any field is read.
  if (broken.kind === 'deep_nesting' && param === null) return true;
  if (typeof param !== 'string') return false;
  if (broken.where === 'header') return param.toLowerCase() === broken.name.toLowerCase();
  if (broken.where !== 'body') return param === broken.name;
  return param === broken.name || broken.name.startsWith(`${param}.`) || param.startsWith(`${broken.name}.`) || (broken.alsoNamed ?? []).includes(param);
}

/** What is wrong with the answer to any request: a 5xx, or an exchange the document does not describe. */
export function problemsOf(api: Api, checker: OpenApiChecker, req: FuzzRequest, answer: Answer): string[] {
  const out: string[] = [];
  if (answer.status >= 500) out.push(`a ${answer.status}`);
  const json = (answer.headers.get('content-type') ?? '').includes('json');
  out.push(
    ...checker.problems({
      api,
      method: req.method,
      target: req.target,
      requestHeaders: new Headers(req.headers),
      requestBody: req.body?.text,
      status: answer.status,
      responseHeaders: answer.headers,
      responseBody: json ? answer.text : undefined,
    }),
  );
  return out;
}

export const errorOf = (answer: Answer): { code?: unknown; param?: unknown } => {
  try {
    return JSON.parse(answer.text)?.error ?? {};
  } catch {
    return {};
  }
};

export const paramOf = (answer: Answer): unknown => errorOf(answer).param;

/**
 * Whether the request unbroken is refused the same way (status, code, param): then the broken place was
 * never the reason (the route refused the request for another first: a value the document takes and the
 * route does not, or the resource's state), and the answer is no misnaming.
 */
export function sameRefusal(broken: Answer, base: Answer): boolean {
  const [a, b] = [errorOf(broken), errorOf(base)];
  return base.status === broken.status && a.code === b.code && a.param === b.param;
}

export type Verdict = { ok: true } | { ok: false; problem: string; /** Refused (a 4xx) without naming the broken place: worth comparing with the request unbroken. */ refused: boolean };

/**
 * A broken request must be refused with a 4xx; on a route with the spec's errors, one naming the
 * broken place. A broken path parameter may instead be a 404 or 403: what it names cannot exist, or is
 * not the caller's (an Events workspace other than the credential's is refused before its id is read).
 */
export function verdictOf(req: FuzzRequest, answer: Answer, namesParams: boolean): Verdict {
  const b = req.broken!;
  const what = `broken ${b.where} ${b.name || '(body)'} (${b.kind})`;
  if (answer.status < 400 || answer.status >= 500) return { ok: false, problem: `${what} answered ${answer.status}, not a 4xx`, refused: false };
  if (!namesParams || (b.where === 'path' && (answer.status === 404 || answer.status === 403))) return { ok: true };
  // A query or header too long for the 16 KB of request line and headers: refused whole, before any route reads a parameter.
  if (answer.status === 431 && (b.where === 'query' || b.where === 'header')) return { ok: true };
  const param = paramOf(answer);
  if (namesBroken(param, b)) return { ok: true };
  return { ok: false, problem: `${what} answered ${answer.status} naming ${JSON.stringify(param)}`, refused: true };
}

/** The request and answer, short enough for a failure message. */
export function describeExchange(req: FuzzRequest, answer: Answer): string {
  const headers = Object.entries(req.headers)
    .filter(([k]) => k.toLowerCase() !== 'authorization')
    .map(([k, v]) => `${k}: ${v.slice(0, 80)}`)
    .join('; ');
  return `${req.method} ${req.target.slice(0, 300)} (${req.credential ?? 'no credential'})${headers ? ` [${headers}]` : ''}${req.body ? ` body ${req.body.text.slice(0, 400)}` : ''} -> ${answer.status} ${answer.text.slice(0, 300)}`;
}
