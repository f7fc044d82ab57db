import * as z from 'zod';
import { httpHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { parseBody } from '../../../shared/validate.js';
import { issueToken } from '../../../auth/tokens.js';

/** Extra claims: flat values, as collection rules compare them; kept small because every request carries them. */
const Claim = z.union([z.string().max(512), z.number(), z.boolean(), z.null(), z.array(z.string().max(512)).max(32)]);
const MAX_CLAIMS_BYTES = 2048;

const Body = z
  .object({
    user_id: z.string().min(1).max(256),
    ttl_seconds: z.number().int().min(60).max(86_400).optional(),
    claims: z
      .record(z.string().min(1).max(64), Claim)
      .refine((c) => Buffer.byteLength(JSON.stringify(c)) <= MAX_CLAIMS_BYTES, `claims must be at most ${MAX_CLAIMS_BYTES} bytes of JSON`)
      .optional(),
  })
  .strict();

/**
 * POST {data_url}/v1/end-user-tokens: an application's server mints a token for one of its signed-in
 * users. Only a server credential bound to the application may (the token names that application).
 */
export const handler = httpHandler('data.end_user_tokens.create', async (req, { engine, principal }) => {
  const body = parseBody(Body, req.json, { unknownField: 'unknown_field' });
  if (!principal.applicationId || !principal.workspaceId) {
    throw new PlatformError('forbidden', 'Use a secret key or OAuth client bound to the application whose users the token is for.');
  }
  const ttl = body.ttl_seconds ?? 3600;
  const { token, expiresAt } = await issueToken(
    engine,
    {
      kind: 'end_user',
      subject: body.user_id,
      organizationId: principal.organizationId,
      applicationId: principal.applicationId,
      workspaceId: principal.workspaceId,
      ext: body.claims,
    },
    ttl,
  );
  return { status: 200, headers: { 'cache-control': 'no-store' }, body: { token, expires_at: new Date(expiresAt * 1000).toISOString() } };
});
