/**
 * The client credentials grant (RFC 6749 section 4.4) behind POST /v1/oauth/token: a client id and
 * secret become a short-lived access token. The HTTP side (form parsing, RFC 6749 error shape) is
 * lambdas/http/oauth-token.ts.
 */
import type { Engine } from '../engine/ports.js';
import { OAuthClients } from './oauth-clients.js';
import { Tenants } from './tenants.js';
import { CLIENT_TOKEN_TTL_SECONDS, issueToken } from './tokens.js';

export interface ClientToken {
  token: string;
  expiresIn: number;
}

/** A token for a live client of a live organization; undefined when the client does not authenticate. */
export async function exchangeClientCredentials(engine: Engine, clientId: string, clientSecret: string): Promise<ClientToken | undefined> {
  const now = () => engine.clock.now();
  const client = await new OAuthClients(engine.kv, now).authenticate(clientId, clientSecret);
  if (!client || client.revoked) return undefined;
  const tenants = new Tenants(engine.kv, now);
  const [org, app] = await Promise.all([tenants.getOrganization(client.organization_id), tenants.getApplication(client.application_id)]);
  // A disabled application's clients get no token, as a disabled organization's do not.
  if (!org || !app || org.disabled || app.disabled) return undefined;
  const { token } = await issueToken(
    engine,
    { kind: 'oauth_client', subject: client.client_id, organizationId: org.id, applicationId: app.id, workspaceId: app.workspace_id },
    CLIENT_TOKEN_TTL_SECONDS,
  );
  return { token, expiresIn: CLIENT_TOKEN_TTL_SECONDS };
}
