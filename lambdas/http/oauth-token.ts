/**
 * POST /v1/oauth/token on all three APIs: the client credentials grant of RFC 6749 section 4.4.
 * Client id and secret come in HTTP Basic or in the body (never both, section 2.3.1); the body is
 * `application/x-www-form-urlencoded` or JSON. Errors use RFC 6749 section 5.2's shape, not ours,
 * so any OAuth client library understands them.
 */
import { exchangeClientCredentials } from '../auth/client-credentials.js';
import { httpHandler } from './handler.js';
import type { HttpRequest, HttpResponse } from './types.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

class OAuthError extends Error {
  constructor(readonly error: string, readonly description: string, readonly status = 400, readonly basic = false) {
    super(description);
  }
  toResponse(): HttpResponse {
    const headers: Record<string, string> = { ...NO_STORE };
    if (this.status === 401) headers['www-authenticate'] = this.basic ? 'Basic realm="platform"' : 'Bearer realm="platform"';
    return { status: this.status, headers, body: { error: this.error, error_description: this.description } };
  }
}

function parseParams(req: HttpRequest): Record<string, unknown> {
  if (req.body.length === 0) return {};
  const type = (req.headers['content-type'] ?? '').toLowerCase();
  const text = req.body.toString('utf8');
  if (type.startsWith('application/x-www-form-urlencoded')) {
    const params: Record<string, string> = {};
    for (const [k, v] of new URLSearchParams(text)) {
      if (k in params) throw new OAuthError('invalid_request', `parameter ${k} is repeated`);
      params[k] = v;
    }
    return params;
  }
  if (/^application\/([a-z.+-]*\+)?json\b/.test(type)) {
    try {
      const value = JSON.parse(text);
      if (value && typeof value === 'object' && !Array.isArray(value)) return value;
    } catch {
      // fall through
    }
    throw new OAuthError('invalid_request', 'the body is not a JSON object');
  }
  throw new OAuthError('invalid_request', 'send the body as application/x-www-form-urlencoded or application/json');
}

function clientCredentials(req: HttpRequest, params: Record<string, unknown>): { id: string; secret: string; basic: boolean } {
  const header = req.headers.authorization;
  const inBody = params.client_id !== undefined || params.client_secret !== undefined;
  if (header !== undefined) {
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
    if (!match) throw new OAuthError('invalid_client', 'use HTTP Basic with the client id and secret', 401);
    if (inBody) throw new OAuthError('invalid_request', 'send the client credentials in one place: HTTP Basic or the body');
    const decoded = Buffer.from(match[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new OAuthError('invalid_client', 'malformed HTTP Basic credentials', 401, true);
    // RFC 6749 2.3.1: id and secret are form-urlencoded before Basic encoding.
    const unescape = (s: string) => {
      try {
        return decodeURIComponent(s.replace(/\+/g, ' '));
      } catch {
        throw new OAuthError('invalid_client', 'malformed HTTP Basic credentials', 401, true);
      }
    };
    return { id: unescape(decoded.slice(0, colon)), secret: unescape(decoded.slice(colon + 1)), basic: true };
  }
  if (typeof params.client_id !== 'string' || typeof params.client_secret !== 'string') {
    throw new OAuthError('invalid_client', 'client authentication failed: send client_id and client_secret', 401);
  }
  return { id: params.client_id, secret: params.client_secret, basic: false };
}

export const tokenEndpoint = (routeId: string) =>
  httpHandler(routeId, async (req, { engine }) => {
    try {
      const params = parseParams(req);
      if (params.grant_type === undefined) throw new OAuthError('invalid_request', 'grant_type is required');
      if (params.grant_type !== 'client_credentials') throw new OAuthError('unsupported_grant_type', 'only grant_type=client_credentials is supported');
      const creds = clientCredentials(req, params);
      const issued = await exchangeClientCredentials(engine, creds.id, creds.secret);
      if (!issued) throw new OAuthError('invalid_client', 'client authentication failed', 401, creds.basic);
      return { status: 200, headers: NO_STORE, body: { access_token: issued.token, token_type: 'Bearer', expires_in: issued.expiresIn } };
    } catch (error) {
      if (error instanceof OAuthError) return error.toResponse();
      throw error;
    }
  });

/** The token request (RFC 6749 4.4.2), form-encoded or JSON; the client's id and secret here or in HTTP Basic. */
export const tokenRequestSchema = onFirstUse(() =>
  z.object({
    grant_type: z.literal('client_credentials'),
    client_id: z.optional(z.string()),
    client_secret: z.optional(z.string()),
  }),
);

/** The token answer (RFC 6749 5.1). */
export const tokenAnswerSchema = onFirstUse(() =>
  z.strictObject({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.int().check(z.describe('Seconds the token stays valid.')),
  }),
);

/** RFC 6749 5.2's error shape, which any OAuth client library reads (not the platform's own). */
export const tokenErrorSchema = onFirstUse(() =>
  z.strictObject({
    error: z.enum(['invalid_request', 'invalid_client', 'unsupported_grant_type']),
    error_description: z.string(),
  }),
);
