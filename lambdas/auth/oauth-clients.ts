/**
 * OAuth clients of an application (client credentials grant, RFC 6749 section 4.4).
 *   oauthclient#<client_id> / client    {client_id, secret_hash, application_id, organization_id, revoked}
 * The secret is shown once at creation; only its SHA-256 is kept (it carries 256 random bits).
 */
import { timingSafeEqual } from 'node:crypto';
import type { KeyValueStore } from '../engine/ports.js';
import { newId, randomHex } from '../shared/ids.js';
import { hashSecret } from './secret-keys.js';
import { TenantError, Tenants } from './tenants.js';

export interface OAuthClient {
  client_id: string;
  application_id: string;
  organization_id: string;
  revoked: boolean;
  created_at: string;
}

const key = (clientId: string) => ({ pk: `oauthclient#${clientId}`, sk: 'client' });

export class OAuthClients {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async create(applicationId: string): Promise<{ client_id: string; client_secret: string }> {
    const app = await new Tenants(this.kv, this.now).getApplication(applicationId);
    if (!app) throw new TenantError(`no application ${applicationId}`);
    const client_id = newId('cli');
    const client_secret = `cls_${randomHex(32)}`;
    const client: OAuthClient = {
      client_id,
      application_id: app.id,
      organization_id: app.organization_id,
      revoked: false,
      created_at: new Date(this.now()).toISOString(),
    };
    await this.kv.put({ ...key(client_id), ...client, secret_hash: hashSecret(client_secret) }, { ifAbsent: true });
    return { client_id, client_secret };
  }

  async revoke(clientId: string): Promise<OAuthClient> {
    const item = await this.kv.update({ key: key(clientId), set: { revoked: true }, condition: { ifExists: true } }).catch(() => {
      throw new TenantError(`no OAuth client ${clientId}`);
    });
    return toClient(item);
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
  const { client_id, application_id, organization_id, revoked, created_at } = item as unknown as OAuthClient;
  return { client_id, application_id, organization_id, revoked, created_at };
}
