/** End-user tokens' request (POST {data_url}/v1/end-user-tokens): whom a token is for, how long, which claims. */
import * as z from 'zod/mini';
import { onFirstUse, parseBody } from '../shared/validate.js';

export const END_USER_TOKEN_TTL = { min: 60, max: 86_400, default: 3600 };
/** Extra claims are kept small because every request carries them. */
const MAX_CLAIMS_BYTES = 2048;

/** The body's schema, built at its first use (onFirstUse). */
export const endUserTokenBodySchema = onFirstUse(() => {
  // Flat values, as collection rules compare them.
  const claim = z.union([z.string().check(z.maxLength(512)), z.number(), z.boolean(), z.null(), z.array(z.string().check(z.maxLength(512))).check(z.maxLength(32))]);
  return z.strictObject({
    user_id: z.string().check(z.minLength(1), z.maxLength(256), z.describe("The application's id of the signed-in user.")),
    ttl_seconds: z.optional(z.number().check(z.int(), z.minimum(END_USER_TOKEN_TTL.min), z.maximum(END_USER_TOKEN_TTL.max), z.describe('The token\'s lifetime (default 3600).'))),
    claims: z.optional(
      z.record(z.string().check(z.minLength(1), z.maxLength(64)), claim).check(
        z.refine((c) => Buffer.byteLength(JSON.stringify(c)) <= MAX_CLAIMS_BYTES, `claims must be at most ${MAX_CLAIMS_BYTES} bytes of JSON`),
        z.describe('Extra claims collection rules can read (`@request.auth.<name>`).'),
      ),
    ),
  });
});

/** The answer: the token and when it expires (the handler shapes it from issueToken's result). */
export const endUserTokenAnswerSchema = onFirstUse(() =>
  z.strictObject({
    token: z.string().check(z.describe('A signed token (JWT): `Authorization: Bearer <token>` on the Data API until it expires.')),
    expires_at: z.iso.datetime().check(z.describe('ISO 8601 UTC.')),
  }),
);

/** The body: `{user_id, ttl_seconds?, claims?}`; the ttl defaulted. */
export function parseEndUserTokenBody(body: unknown): { userId: string; ttlSeconds: number; claims?: Record<string, unknown> } {
  const b = parseBody(endUserTokenBodySchema(), body, { unknownField: 'unknown_field' });
  return { userId: b.user_id, ttlSeconds: b.ttl_seconds ?? END_USER_TOKEN_TTL.default, claims: b.claims };
}
