/**
 * OAuth clients of an application (client credentials grant, RFC 6749 section 4.4).
 *   oauthclient#<client_id> / client    {client_id, secret_hash, application_id, organization_id, revoked, permissions?}
 *                                       (gsi1: org#<org> / cli#<client_id>, for `oauth-client list`)
 * The secret is shown once at creation; only its SHA-256 is kept (it carries 256 random bits).
 * `permissions` (Events) is stored only when narrowed; absent is every Events permission. A client's
 * tokens carry no permissions: each token's permissions are read from this record when the token is
 * verified (lambdas/auth/credentials.ts), so a narrowed or revoked client takes effect within the
 * credential cache time, not at the token's expiry.
 */
import { timingSafeEqual } from 'node:crypto';
import type { KeyValueStore } from '../engine/ports.js';
import { newId, randomHex } from '../shared/ids.js';
import type { Permission } from './permissions.js';
import { hashSecret } from './secret-keys.js';
import { listPage, permissionList, TenantError, Tenants, type ListOptions, type ListPage } from './tenants.js';

export interface OAuthClient {
  client_id: string;
  application_id: string;
  organization_id: string;
  revoked: boolean;
  /** The Events permissions the client's tokens hold; null (stored: absent) is all of them. */
  permissions: Permission[] | null;
  created_at: string;
}

const key = (clientId: string) => ({ pk: `oauthclient#${clientId}`, sk: 'client' });
const index = (organizationId: string, clientId: string) => ({ gsi1pk: `org#${organizationId}`, gsi1sk: `cli#${clientId}` });

export class OAuthClients {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  /** `permissions` narrows what the client's tokens may do on Events; without it they hold every Events permission. */
  async create(
    applicationId: string,
    options: { permissions?: readonly string[] } = {},
  ): Promise<{ client_id: string; client_secret: string; permissions: Permission[] | null }> {
    const permissions = permissionList(options.permissions);
    const app = await new Tenants(this.kv, this.now).getApplication(applicationId);
    if (!app) throw new TenantError(`no application ${applicationId}`);
    const client_id = newId('cli');
    const client_secret = `cls_${randomHex(32)}`;
    const client: Omit<OAuthClient, 'permissions'> = {
      client_id,
      application_id: app.id,
      organization_id: app.organization_id,
      revoked: false,
      created_at: new Date(this.now()).toISOString(),
    };
    await this.kv.put({ ...key(client_id), ...index(app.organization_id, client_id), ...client, ...(permissions ? { permissions } : {}), secret_hash: hashSecret(client_secret) }, { ifAbsent: true });
    return { client_id, client_secret, permissions: permissions ?? null };
  }

  async revoke(clientId: string): Promise<OAuthClient> {
    const current = await this.get(clientId);
    if (!current) throw new TenantError(`no OAuth client ${clientId}`);
    const item = await this.kv.update({ key: key(clientId), set: { revoked: true, ...index(current.organization_id, clientId) }, condition: { ifExists: true } });
    return toClient(item);
  }

  /** The application's clients, oldest first (never a secret nor its hash). */
  async list(applicationId: string, options: ListOptions = {}): Promise<ListPage<OAuthClient>> {
    const app = await new Tenants(this.kv, this.now).getApplication(applicationId);
    if (!app) throw new TenantError(`no application ${applicationId}`);
    const query = { index: 'gsi1' as const, pk: `org#${app.organization_id}`, sk: { beginsWith: 'cli#' } };
    return listPage(this.kv, query, options, (item) => item.application_id === app.id, toClient);
  }

  /** Every client of the organization, oldest first (the console's list; `oauth-client list` goes by application). */
  listOrganization(organizationId: string, options: ListOptions = {}): Promise<ListPage<OAuthClient>> {
    return listPage(this.kv, { index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'cli#' } }, options, () => true, toClient);
  }

  async get(clientId: string): Promise<OAuthClient | undefined> {
    const item = await this.kv.get(key(clientId));
    return item && toClient(item);
  }

  /** The client when the secret matches (compared in constant time), else undefined. Revoked clients are returned: the caller decides. */
  async authenticate(clientId: string, secret: string): Promise<OAuthClient | undefined> {
    if (clientId.length > 64 || secret.length > 128) return undefined;
    const item = await this.kv.get(key(clientId));
    if (!item) return undefined;
    const expected = Buffer.from(String(item.secret_hash), 'hex');
    const actual = Buffer.from(hashSecret(secret), 'hex');
    return expected.length === actual.length && timingSafeEqual(expected, actual) ? toClient(item) : undefined;
  }
}

function toClient(item: Record<string, unknown>): OAuthClient {
  const { client_id, application_id, organization_id, revoked, permissions, created_at } = item as unknown as OAuthClient;
  return { client_id, application_id, organization_id, revoked, permissions: permissions ?? null, created_at };
}
