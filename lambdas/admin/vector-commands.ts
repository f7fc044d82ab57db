/**
 * The admin CLI's vector database commands (docs/ai/vector.md): a workspace's database, the workspace
 * an organization-wide key works in, and the organization's feature switches.
 */
import type { Engine } from '../engine/ports.js';
import { Tenants, TenantError } from '../auth/tenants.js';
import { AiOrgSettings, FEATURES } from '../ai/org-settings.js';
import { createVectorDatabase, deleteVectorDatabase, readDatabase, VectorDatabaseError } from '../vector/databases.js';
import { ENV, settings } from '../shared/settings.js';
import type { Command, Options } from './command.js';

const id = { type: 'string', value: 'ID' } as const;
const str = (o: Options, k: string) => o[k] as string;
const tenants = (e: Engine) => new Tenants(e.kv, () => e.clock.now());
const list = (o: Options, k: string) => (o[k] === undefined ? undefined : str(o, k).split(',').map((f) => f.trim()).filter(Boolean));

async function existingOrg(e: Engine, o: Options): Promise<string> {
  const org = str(o, 'org');
  if (!(await tenants(e).getOrganization(org))) throw new TenantError(`no organization ${org}`);
  return org;
}

const DATABASE_FIELDS = '`{workspace_id, database_id, state, embedding_route, upstream_model, dimensions, created_at, passages, bytes}`';

export const VECTOR_COMMANDS: Record<string, Command> = {
  'vector-db create': {
    summary: `the workspace's vector database ${DATABASE_FIELDS}, stamped with the embedding route, its upstream model and the dimensions one embeddings call answered (that call is charged as any other); the route's upstream model then changes only with \`route set --force\``,
    options: { workspace: id, 'embedding-route': { type: 'string', value: 'ROUTE', help: 'an `/v1/embeddings` route of the organization' } },
    required: ['workspace', 'embedding-route'],
    run: (e, o) => {
      // On AWS the index goes to the stack's vector bucket: refused before the embeddings call (charged) that would precede the failure.
      if (e.name === 'aws' && settings().vectorBucketName === undefined) {
        throw new VectorDatabaseError(`ENGINE=aws: ${ENV.vectorBucketName} must be set for vector-db create (the stack's VectorBucketName output; docs/deploying.md, section 5)`);
      }
      return createVectorDatabase(e, str(o, 'workspace'), str(o, 'embedding-route'));
    },
  },
  'vector-db delete': {
    summary: 'the database, now `deleting`: vector routes answer `409 vector_database_deleting` at once, a background job removes its passages, then it is gone and may be created again',
    options: { workspace: id },
    required: ['workspace'],
    run: (e, o) => deleteVectorDatabase(e, str(o, 'workspace')),
  },
  'vector-db show': {
    summary: `the database ${DATABASE_FIELDS} (\`passages\`: visible passages; \`bytes\`: their ids, texts and metadata), or \`{workspace_id, state: "none"}\``,
    options: { workspace: id },
    required: ['workspace'],
    run: async (e, o) => {
      const database = await readDatabase(e, str(o, 'workspace'));
      if (!database) return { workspace_id: str(o, 'workspace'), state: 'none' };
      const { index: _index, ...shown } = database;
      return shown;
    },
  },
  'workspace default': {
    summary: '`{organization_id, workspace_id}`: the workspace an organization-wide key works in on the vector routes (absent: the organization\'s first workspace); application keys always work in their application\'s',
    options: { org: id, workspace: id },
    required: ['org', 'workspace'],
    run: (e, o) => tenants(e).setDefaultWorkspace(str(o, 'org'), str(o, 'workspace')),
  },
  'org features': {
    summary: `the organization's AI settings, \`disabled_features\` among them: a disabled feature answers \`403 vector_database_disabled\` (\`vector\`), \`403 collections_disabled\` (\`collections\`) or \`403 knowledge_disabled\` (\`knowledge\`: knowledge jobs) and keeps its data; features: ${FEATURES.map((f) => `\`${f}\``).join(', ')}; no option only shows them`,
    options: { org: id, disable: { type: 'string', value: 'a,b' }, enable: { type: 'string', value: 'a,b' } },
    required: ['org'],
    run: async (e, o) => {
      const org = await existingOrg(e, o);
      const settings = new AiOrgSettings(e.kv, () => e.clock.now());
      const disable = list(o, 'disable');
      const enable = list(o, 'enable');
      return disable || enable ? settings.setFeatures(org, { disable, enable }) : settings.get(org);
    },
  },
};
