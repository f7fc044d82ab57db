/**
 * What the console's resource handlers share (no handler here): the organization's own things by id
 * (another organization's answers as an unknown one: 404, so ids tell nothing), and the admin
 * services' refusals (plain errors with a message meant for the CLI) as the console's answers.
 */
import type { Engine } from '../../../engine/ports.js';
import type { Principal } from '../../../auth/principal.js';
import { Tenants, TenantError, type Application, type SecretKeyRecord } from '../../../auth/tenants.js';
import { OAuthClients, type OAuthClient } from '../../../auth/oauth-clients.js';
import { PublishableKeys, type PublishableKey } from '../../../auth/publishable-keys.js';
import { ModelRouteError } from '../../../ai/model-routes.js';
import { OrgSettingsError } from '../../../ai/org-settings.js';
import { AiLimitsError } from '../../../ai/limits.js';
import { AiKeyRoutesError } from '../../../ai/key-routes.js';
import { RerankProfileError } from '../../../vector/rerank-profiles.js';
import { VectorDatabaseError } from '../../../vector/databases.js';
import { PlatformError, type ErrorCode } from '../../../shared/errors.js';

const tenants = (engine: Engine) => new Tenants(engine.kv, () => engine.clock.now());

export async function ownApplication(engine: Engine, organizationId: string, id: string | undefined, param = 'application_id'): Promise<Application> {
  const app = id === undefined ? undefined : await tenants(engine).getApplication(id);
  if (!app || app.organization_id !== organizationId) throw new PlatformError('not_found', `No application ${id ?? ''} in this organization.`, param);
  return app;
}

export async function ownSecretKey(engine: Engine, organizationId: string, id: string): Promise<SecretKeyRecord> {
  const key = await tenants(engine).getSecretKey(id);
  if (!key || key.organization_id !== organizationId) throw new PlatformError('key_not_found', `No secret key ${id} in this organization.`, 'key_id');
  return key;
}

export async function ownOAuthClient(engine: Engine, organizationId: string, id: string): Promise<OAuthClient> {
  const client = await new OAuthClients(engine.kv, () => engine.clock.now()).get(id);
  if (!client || client.organization_id !== organizationId) throw new PlatformError('not_found', `No OAuth client ${id} in this organization.`, 'client_id');
  return client;
}

export async function ownPublishableKey(engine: Engine, organizationId: string, id: string): Promise<PublishableKey> {
  const key = await new PublishableKeys(engine.kv, () => engine.clock.now()).get(id);
  if (!key || key.organization_id !== organizationId) throw new PlatformError('key_not_found', `No publishable key ${id} in this organization.`, 'key_id');
  return key;
}

/** The field a CLI message starts with (`base_url must …`, `rpm must …`), the answer's `param`. */
const leadingField = (message: string): string | null => /^([a-z][a-z0-9_]*) (must|names|is for)\b/.exec(message)?.[1] ?? null;

/**
 * A call of an admin service (the ones the admin CLI runs): its refusals, plain errors worded for the
 * CLI, become `404 <notFound>` for a missing thing, `409 already_exists` / `vector_database_deleting`
 * for a state that forbids it, else `400 invalid_body` naming the field when the message starts with it.
 * Any other error goes on (a 500 the chain logs).
 */
export async function adminCall<T>(call: Promise<T> | (() => Promise<T>), notFound: ErrorCode = 'not_found'): Promise<T> {
  try {
    return await (typeof call === 'function' ? call() : call);
  } catch (error) {
    const known =
      error instanceof TenantError ||
      error instanceof ModelRouteError ||
      error instanceof OrgSettingsError ||
      error instanceof AiLimitsError ||
      error instanceof AiKeyRoutesError ||
      error instanceof RerankProfileError ||
      error instanceof VectorDatabaseError;
    if (!known) throw error;
    // The CLI's option names (`--base-url`) read as the body's fields (`base_url`) here.
    const message = error.message.replace(/--([a-z-]+)/g, (_m, name: string) => name.replace(/-/g, '_'));
    const sentence = message.charAt(0).toUpperCase() + message.slice(1) + (/[.)]$/.test(message) ? '' : '.');
    if (/^no /.test(message)) throw new PlatformError(notFound, sentence);
    if (/already has/.test(message)) throw new PlatformError('already_exists', sentence);
    if (/still being deleted/.test(message)) throw new PlatformError('vector_database_deleting', sentence);
    throw new PlatformError('invalid_body', sentence, leadingField(message));
  }
}

/**
 * A publishable key's create or origins change: its origin list's refusals (`"x" is not an origin…`,
 * `list 1 to 50 origins`) are `400 invalid_body` on `origins`; a key disabled meanwhile `409 version_conflict`.
 */
export async function originsCall<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    if (!(error instanceof TenantError)) throw error;
    if (/^no /.test(error.message)) throw new PlatformError('key_not_found', `${error.message.replace(/^no/, 'No')}.`, 'key_id');
    if (/meanwhile/.test(error.message)) throw new PlatformError('version_conflict', 'The key was disabled or enabled meanwhile; send the change again.');
    throw new PlatformError('invalid_body', `${error.message.charAt(0).toUpperCase()}${error.message.slice(1)}.`, 'origins');
  }
}

/**
 * The principal a knowledge read goes by, and the query left for the domain's own parsing: the
 * person's own (organization-wide: its default workspace, its organization-wide jobs), or with
 * `?application_id=` one of the organization's applications, as that application's key would see it.
 */
export async function knowledgeCaller(engine: Engine, principal: Principal, query: Record<string, string>): Promise<{ principal: Principal; query: Record<string, string> }> {
  const { application_id: appId, ...rest } = query;
  if (appId === undefined) return { principal, query: rest };
  const app = await ownApplication(engine, principal.organizationId, appId);
  return { principal: { ...principal, applicationId: app.id, workspaceId: app.workspace_id }, query: rest };
}
