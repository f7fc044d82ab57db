import { httpHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { issueToken } from '../../../auth/tokens.js';
import { parseEndUserTokenBody } from '../../../data/end-user-tokens.js';

/**
 * POST {data_url}/v1/end-user-tokens: an application's server mints a token for one of its signed-in
 * users. Only a server credential bound to the application may (the token names that application).
 */
export const handler = httpHandler('data.end_user_tokens.create', async (req, { engine, principal }) => {
  const body = parseEndUserTokenBody(req.json);
  if (!principal.applicationId || !principal.workspaceId) {
    throw new PlatformError('forbidden', 'Use a secret key or OAuth client bound to the application whose users the token is for.');
  }
  const { token, expiresAt } = await issueToken(
    engine,
    {
      kind: 'end_user',
      subject: body.userId,
      organizationId: principal.organizationId,
      applicationId: principal.applicationId,
      workspaceId: principal.workspaceId,
      ext: body.claims,
    },
    body.ttlSeconds,
  );
  return { status: 200, headers: { 'cache-control': 'no-store' }, body: { token, expires_at: new Date(expiresAt * 1000).toISOString() } };
});
