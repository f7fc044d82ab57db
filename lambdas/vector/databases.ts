/**
 * A workspace's vector database (docs/ai/vector.md): created before use by an operator, stamped with
 * the embedding route, its upstream model and the dimensions one embeddings call showed; deleted by
 * moving it to `deleting`, after which a job removes its passages and then the database itself.
 */
import { organizationWidePrincipal, type Principal } from '../auth/principal.js';
import { Tenants, TenantError } from '../auth/tenants.js';
import type { Engine, KvItem } from '../engine/ports.js';
import { ModelRoutes, type ModelRoute } from '../ai/model-routes.js';
import { AiOrgSettings } from '../ai/org-settings.js';
import { embeddings } from '../ai/gateway.js';
import { estimateEmbeddings } from '../ai/estimate.js';
import { shapeEmbeddings } from '../ai/embeddings.js';
import { PlatformError } from '../shared/errors.js';
import { ulid } from '../shared/ids.js';
import { databaseKey, routeStampKey, scopeRegistryPk } from './keys.js';
import { clearScope } from './ledger.js';
import type { VectorDatabase } from './types.js';

export type { DatabaseState, VectorDatabase } from './types.js';

export class VectorDatabaseError extends Error {
  override name = 'VectorDatabaseError';
}

export interface RemoveVectorDatabaseJob {
  kind: 'vector-db.remove';
  workspace_id: string;
  database_id: string;
}

const tenants = (engine: Engine) => new Tenants(engine.kv, () => engine.clock.now());

function fromItem(item: KvItem): VectorDatabase {
  const { pk: _pk, sk: _sk, ...rest } = item;
  return { passages: 0, bytes: 0, ...rest } as unknown as VectorDatabase;
}

export async function readDatabase(engine: Engine, workspaceId: string): Promise<VectorDatabase | undefined> {
  const item = await engine.kv.get(databaseKey(workspaceId));
  return item && fromItem(item);
}

/** The principal an operator's own calls run as: organization-wide, charged to the organization. */
const operatorOf = (organizationId: string): Principal => organizationWidePrincipal('secret_key', 'operator', organizationId);

async function embeddingRoute(engine: Engine, organizationId: string, routeId: string): Promise<ModelRoute | undefined> {
  const routes = await new ModelRoutes(engine.kv, () => engine.clock.now()).list(organizationId);
  return routes.find((r) => r.id === routeId && r.endpoint === '/v1/embeddings');
}

/** `vector-db create`: learns the dimensions from one embeddings call, then stamps the database and the route. */
export async function createVectorDatabase(engine: Engine, workspaceId: string, routeId: string): Promise<VectorDatabase> {
  const workspace = await tenants(engine).getWorkspace(workspaceId);
  if (!workspace) throw new TenantError(`no workspace ${workspaceId}`);
  const existing = await readDatabase(engine, workspaceId);
  if (existing?.state === 'active') throw new VectorDatabaseError(`workspace ${workspaceId} already has a vector database (route ${existing.embedding_route}); delete it first to change its route`);
  if (existing?.state === 'deleting') throw new VectorDatabaseError(`the vector database of workspace ${workspaceId} is still being deleted; try again when \`vector-db show\` says it is gone`);
  const route = await embeddingRoute(engine, workspace.organization_id, routeId);
  if (!route) throw new VectorDatabaseError(`no embeddings route ${routeId} in organization ${workspace.organization_id} (\`route list\` shows them)`);
  const probe = ['dimensions probe'];
  let list;
  try {
    list = shapeEmbeddings(await embeddings({ engine, principal: operatorOf(workspace.organization_id) }, route, { input: probe, encoding_format: 'float' }, estimateEmbeddings(probe)), 1, 'float');
  } catch (error) {
    throw new VectorDatabaseError(`route ${routeId} did not answer an embeddings call: ${error instanceof Error ? error.message : String(error)}`);
  }
  const dimensions = (list.data[0].embedding as number[]).length;
  if (dimensions < 1 || dimensions > 4096) throw new VectorDatabaseError(`route ${routeId} answered vectors of ${dimensions} dimensions; a vector database takes 1 to 4,096`);
  const id = ulid(engine.clock.now()).toLowerCase();
  const database: VectorDatabase = {
    workspace_id: workspaceId,
    organization_id: workspace.organization_id,
    database_id: `vdb_${id}`,
    state: 'active',
    embedding_route: route.id,
    upstream_model: route.upstream_model,
    dimensions,
    index: `vdb-${id}`,
    created_at: new Date(engine.clock.now()).toISOString(),
    passages: 0,
    bytes: 0,
  };
  await engine.vectors.createIndex(database.index, dimensions);
  await engine.kv.transact([
    // Absent, or the last one's leftovers gone: two creations at once make one database.
    { put: { ...databaseKey(workspaceId), ...database }, condition: { ifAbsent: true } },
    { put: { ...routeStampKey(workspace.organization_id, route.id, workspaceId), workspace_id: workspaceId } },
  ]).catch(async (error) => {
    await engine.vectors.deleteIndex(database.index).catch(() => undefined);
    throw error;
  });
  return database;
}

/** `vector-db delete`: `deleting` at once (every route answers 409 vector_database_deleting), then the removal job. */
export async function deleteVectorDatabase(engine: Engine, workspaceId: string): Promise<VectorDatabase> {
  const database = await readDatabase(engine, workspaceId);
  if (!database) throw new VectorDatabaseError(`workspace ${workspaceId} has no vector database`);
  if (database.state === 'active') {
    await engine.kv.update({ key: databaseKey(workspaceId), set: { state: 'deleting' }, condition: { ifEquals: { database_id: database.database_id, state: 'active' } } });
  }
  // Sent again when already deleting: a removal whose job was lost is started over.
  const job: RemoveVectorDatabaseJob = { kind: 'vector-db.remove', workspace_id: workspaceId, database_id: database.database_id };
  await engine.queue.send('jobs', JSON.stringify(job), { group: workspaceId });
  return { ...database, state: 'deleting' };
}

/**
 * The job: each scope cleared under its lease (documents, members, passages, intents), then the index
 * (all its vectors at once), then the database, which may then be created again.
 */
export async function removeVectorDatabase(engine: Engine, job: RemoveVectorDatabaseJob): Promise<void> {
  const database = await readDatabase(engine, job.workspace_id);
  if (!database || database.database_id !== job.database_id || database.state !== 'deleting') return;
  const db = database.database_id;
  for (;;) {
    const scopes = await engine.kv.query({ pk: scopeRegistryPk(db), limit: 25 });
    if (!scopes.items.length) break;
    for (const { sk: scope } of scopes.items) await clearScope(engine, database, scope);
  }
  await engine.vectors.deleteIndex(database.index);
  await engine.kv.transact([
    { delete: databaseKey(job.workspace_id), condition: { ifEquals: { database_id: db } } },
    { delete: routeStampKey(database.organization_id, database.embedding_route, job.workspace_id) },
  ]);
}

/** The workspace a vector call works in: an application's own; for an organization-wide key, the organization's default. */
export async function vectorWorkspace(engine: Engine, principal: Principal): Promise<string | undefined> {
  if (principal.applicationId !== null) return principal.workspaceId ?? undefined;
  return tenants(engine).defaultWorkspace(principal.organizationId);
}

/**
 * The database a vector call works on, or the refusal: 403 vector_database_disabled (the
 * organization's switch), 409 vector_database_not_created, 409 vector_database_deleting.
 */
export async function openVectorDatabase(engine: Engine, principal: Principal): Promise<VectorDatabase> {
  const settings = await new AiOrgSettings(engine.kv, () => engine.clock.now()).get(principal.organizationId);
  if (settings.disabled_features.includes('vector')) throw new PlatformError('vector_database_disabled', 'The vector database is disabled for this organization.');
  const workspaceId = await vectorWorkspace(engine, principal);
  const database = workspaceId === undefined ? undefined : await readDatabase(engine, workspaceId);
  if (!database) throw new PlatformError('vector_database_not_created', "This workspace has no vector database; an operator creates it with `vector-db create`.");
  if (database.state === 'deleting') throw new PlatformError('vector_database_deleting', "This workspace's vector database is being deleted; it can be created again once it is gone.");
  return database;
}

/**
 * Runs a call's work on the database it opened. A database deleted during the call takes its index
 * with it, so the work fails on the engine: the answer is then the 409 a call arriving now gets, not 500.
 */
export async function whileOpen<T>(engine: Engine, database: VectorDatabase, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof PlatformError) throw error;
    const now = await readDatabase(engine, database.workspace_id).catch(() => undefined);
    if (now?.database_id !== database.database_id || now.state !== 'active') {
      throw new PlatformError('vector_database_deleting', "This workspace's vector database was deleted during this call; it can be created again once it is gone.");
    }
    throw error;
  }
}

/** The stamped route as it is now; gone or no longer an embeddings route: 503, nothing is embedded with another model. */
export async function stampedRoute(engine: Engine, database: VectorDatabase): Promise<ModelRoute> {
  const route = await embeddingRoute(engine, database.organization_id, database.embedding_route);
  if (!route) {
    throw new PlatformError('service_unavailable', `The vector database's embedding route ${database.embedding_route} no longer exists; restore it, or re-create the database.`, { retryAfterSeconds: 60 });
  }
  return route;
}
