/**
 * First start: a development organization, workspace and secret key, and an invitation to be the
 * organization's owner in the console (docs/console.md), written to DATA_DIR/credentials.json (mode
 * 0600). Later starts read the file and reuse the state.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../engine/ports.js';
import { Tenants } from '../auth/tenants.js';
import { invitationUrl, Invitations } from '../console/invitations.js';
import { consoleUrl as configuredConsoleUrl } from '../http/console-origin.js';

export interface DevCredentials {
  organization_id: string;
  workspace_id: string;
  key_id: string;
  secret_key: string;
  /** The console: the owner's email and the invitation that sets their password (single use, 7 days). */
  console_owner_email?: string;
  console_invitation_url?: string;
  console_invitation_expires_at?: string;
}

export const credentialsPath = (dataDir: string) => join(dataDir, 'credentials.json');

/** The bootstrap owner's email: a reserved name (RFC 6761 `.localhost`) that no one else can own. */
export const BOOTSTRAP_OWNER_EMAIL = 'owner@platform.localhost';

/** `consoleUrl`: the console's address, for the invitation's link (default: CONSOLE_URL, else CONSOLE_PORT on 127.0.0.1). */
export async function bootstrap(engine: Engine, dataDir: string, consoleUrl = configuredConsoleUrl()): Promise<{ credentials: DevCredentials; created: boolean }> {
  const path = credentialsPath(dataDir);
  if (existsSync(path)) return { credentials: JSON.parse(readFileSync(path, 'utf8')), created: false };
  const now = () => engine.clock.now();
  const tenants = new Tenants(engine.kv, now);
  const org = await tenants.createOrganization('Development');
  const ws = await tenants.createWorkspace(org.id, 'default');
  const { id, key } = await tenants.createSecretKey(org.id);
  const { invitation, token } = await new Invitations(engine.kv, now).create({ organizationId: org.id, email: BOOTSTRAP_OWNER_EMAIL, role: 'owner' });
  const credentials: DevCredentials = {
    organization_id: org.id,
    workspace_id: ws.id,
    key_id: id,
    secret_key: key,
    console_owner_email: BOOTSTRAP_OWNER_EMAIL,
    console_invitation_url: invitationUrl(consoleUrl, token),
    console_invitation_expires_at: invitation.expires_at,
  };
  writeCredentials(path, credentials);
  return { credentials, created: true };
}

/** Written whole or not at all, readable by the owner only. */
function writeCredentials(path: string, credentials: DevCredentials): void {
  writeFileSync(`${path}.tmp`, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
}

/**
 * The first start's invitation link on the console's address as served: bootstrapped before the
 * servers listen, a link made for CONSOLE_PORT=0 named port 0. The token is the link's fragment, so
 * only the origin changes; the file is rewritten with it.
 */
export function invitationOnServedConsole(dataDir: string, credentials: DevCredentials, servedConsoleUrl: string): DevCredentials {
  if (!credentials.console_invitation_url) return credentials;
  const link = new URL(credentials.console_invitation_url);
  const served = new URL(servedConsoleUrl);
  if (link.origin === served.origin) return credentials;
  const moved = { ...credentials, console_invitation_url: `${served.origin}${link.pathname}${link.hash}` };
  writeCredentials(credentialsPath(dataDir), moved);
  return moved;
}
