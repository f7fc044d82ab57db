/**
 * The console API client: every call goes to `/console/api/…` on the console's own origin with the
 * session cookie (`credentials: 'same-origin'`), and every state-changing one carries `x-csrf-token`
 * (the double-submit token: the `csrf` cookie, or the `csrf_token` `GET /me` answered).
 * An error answer keeps the platform's shape `{error: {code, message, param?}}` so pages show the
 * API's own words.
 */
import { useCallback, useEffect, useState } from 'preact/hooks';

export const API_BASE = '/console/api';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

let csrfFromMe: string | undefined;
/** Kept from `GET /me`, for when the cookie cannot be read (it is not HttpOnly, but a proxy may rename it). */
export function rememberCsrfToken(token: string | undefined): void {
  csrfFromMe = token;
}

function csrfToken(): string | undefined {
  for (const part of document.cookie.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === 'csrf') return decodeURIComponent(value.join('='));
  }
  return csrfFromMe;
}

/** Called when a call answers `401 not_signed_in`: the session ended (expired, signed out elsewhere, removed). */
let onSignedOut: (() => void) | undefined;
export function whenSignedOut(callback: () => void): void {
  onSignedOut = callback;
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
const SAFE = new Set<Method>(['GET']);

export async function api<T = unknown>(method: Method, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (!SAFE.has(method)) {
    const token = csrfToken();
    if (token) headers['x-csrf-token'] = token;
  }
  let res: Response;
  try {
    res = await fetch(API_BASE + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network_error', 'The console API could not be reached. Check that the server is running.');
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!res.ok) {
    const e = (data as { error?: { code?: unknown; message?: unknown; param?: unknown } } | undefined)?.error;
    const code = typeof e?.code === 'string' ? e.code : `http_${res.status}`;
    const message = typeof e?.message === 'string' ? e.message : `The console API answered ${res.status} ${res.statusText}.`;
    const error = new ApiError(res.status, code, message, typeof e?.param === 'string' ? e.param : null);
    if (res.status === 401 && code === 'not_signed_in' && path !== '/me') onSignedOut?.();
    throw error;
  }
  return data as T;
}

/** `?a=1&b=2` from the defined, non-empty values only. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const seg = (value: string): string => encodeURIComponent(value);

export interface Loaded<T> {
  data?: T;
  error?: ApiError;
  loading: boolean;
  reload: () => void;
}

/** GETs `path` (nothing when null) and again on `reload()` or when `path` changes. */
export function useApi<T>(path: string | null): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiError; loading: boolean }>({ loading: path !== null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (path === null) {
      setState({ loading: false });
      return;
    }
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    api<T>('GET', path).then(
      (data) => live && setState({ data, loading: false }),
      (error: unknown) => live && setState({ error: asApiError(error), loading: false }),
    );
    return () => {
      live = false;
    };
  }, [path, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

export const asApiError = (error: unknown): ApiError =>
  error instanceof ApiError ? error : new ApiError(0, 'client_error', error instanceof Error ? error.message : String(error));

/** The list inside a list answer, whatever its key (`items`, `keys`, `people`, …), or [] when none. */
export function listOf<T>(data: unknown, ...keys: string[]): T[] {
  if (Array.isArray(data)) return data as T[];
  if (data && typeof data === 'object') {
    const o = data as Record<string, unknown>;
    for (const k of [...keys, 'items', 'data']) if (Array.isArray(o[k])) return o[k] as T[];
  }
  return [];
}

export const nextCursorOf = (data: unknown): string | null =>
  data && typeof data === 'object' && typeof (data as { next_cursor?: unknown }).next_cursor === 'string' ? (data as { next_cursor: string }).next_cursor : null;
