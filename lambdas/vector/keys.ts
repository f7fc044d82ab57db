/**
 * Where the vector database keeps what it knows, in the key-value store (docs/decisions/vector-database.md):
 *
 *   ws#<workspace> / vector-db                     the workspace's database: state, stamp, counts
 *   org#<org> / vector-route#<route>#<workspace>   a route stamped on a database (route set checks it)
 *   vs#<db> / <scope>                              a scope that holds passages (what removal walks)
 *   vp#<db>#<scope> / <passage id>                 a passage: which index entry is its visible version
 *   vd#<db>#<scope> / <document id>                a document: its generation, count, content hash
 *   vm#<db>#<scope>#<document id> / <passage id>   a document's member passages (count and hash)
 *   vh#<db>#<scope> / head                         the scope's last committed transaction (readers' snapshot)
 *   vl#<db>#<scope> / lease                        the scope's write lease (one writer commits at a time)
 *   vi#<db>#<scope> / <transaction>                a transaction's intent (what to undo or finish if its writer dies)
 *
 * `<db>` is the database's id, new at each creation, so a re-created database never meets the
 * leftovers of the one before. `<scope>` is `shared` or `local.<credential id>`.
 */
import type { Principal } from '../auth/principal.js';
import type { KvKey } from '../engine/ports.js';

export type ScopeName = 'shared' | 'local';

/** The scope's name in keys: the shared one, or the calling credential's own local one. */
export const scopeTag = (scope: ScopeName, principal: Pick<Principal, 'credentialId'>): string => (scope === 'shared' ? 'shared' : `local.${principal.credentialId}`);

export const databaseKey = (workspaceId: string): KvKey => ({ pk: `ws#${workspaceId}`, sk: 'vector-db' });
export { vectorStampKey as routeStampKey } from '../ai/model-routes.js';
export const scopeRegistryPk = (db: string) => `vs#${db}`;
export const passagePk = (db: string, scope: string) => `vp#${db}#${scope}`;
export const documentPk = (db: string, scope: string) => `vd#${db}#${scope}`;
export const memberPk = (db: string, scope: string, documentId: string) => `vm#${db}#${scope}#${documentId}`;
export const headKey = (db: string, scope: string): KvKey => ({ pk: `vh#${db}#${scope}`, sk: 'head' });
export const leaseKey = (db: string, scope: string): KvKey => ({ pk: `vl#${db}#${scope}`, sk: 'lease' });
export const intentPk = (db: string, scope: string) => `vi#${db}#${scope}`;
