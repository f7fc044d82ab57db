/** A workspace's vector database as stored (`ws#<workspace>` / `vector-db`; databases.ts). */
export type DatabaseState = 'active' | 'deleting';

export interface VectorDatabase {
  workspace_id: string;
  organization_id: string;
  /** New at each creation: the partitions and the index of one database never meet another's. */
  database_id: string;
  state: DatabaseState;
  embedding_route: string;
  upstream_model: string | null;
  dimensions: number;
  /** The engine's index (VectorIndex) holding the vectors. */
  index: string;
  created_at: string;
  /** Passages visible, and their bytes (id, text and metadata as JSON). */
  passages: number;
  bytes: number;
}
