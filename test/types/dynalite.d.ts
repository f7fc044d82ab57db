/** dynalite ships no typings; this covers what the tests use. */
declare module 'dynalite' {
  import type { Server } from 'node:http';

  interface DynaliteOptions {
    /** Milliseconds tables stay CREATING / DELETING / UPDATING (default 500). */
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
    /** Largest item, KB (default 400). */
    maxItemSizeKb?: number;
    /** LevelDB directory; in memory when absent. */
    path?: string;
    ssl?: boolean;
    verbose?: boolean;
    debug?: boolean;
  }

  function dynalite(options?: DynaliteOptions): Server;
  export default dynalite;
}
