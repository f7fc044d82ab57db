/**
 * How collection rules govern files (docs/data/blobs.md, "Rules"; spec 5: browser credentials reach
 * "files by collection rules"). Server credentials pass everything. A browser credential (publishable
 * key, end-user token) reaches a file only through the records that reference it:
 *
 * - read: some record of the database holds the file in a `blob` field and its collection's `view`
 *   rule lets the credential see that record;
 * - delete: records reference the file, the credential may view one, and may update every one;
 * - upload: some collection with a `blob` field has a `create` or `update` rule not closed to it.
 *
 * "The records referencing a file" are index entries that record writes keep for every `blob` field,
 * in the write's own transaction (record-writes.ts): partition indexPartition(field, generation), sort
 * key `<sha256> SEP <id>`, each carrying a copy of its record, so rules are evaluated on the entry
 * without reading the record. A dropped field's entries stay in its old generation's partition, which
 * nothing reads any more. Records written before these entries existed have none and grant nothing.
 */
import type { Engine } from '../engine/ports.js';
import { isServerCredential, type Principal } from '../auth/principal.js';
import { indexPartition } from './keys.js';
import { Collections, type Collection } from './collections.js';
import { SEP, type StoredField } from './schema.js';
import { fieldType } from './fields/index.js';
import { evaluateRule, ruleAllowsPrincipal } from './rules.js';
import { inlineRecord, loadRecord, view, type RecordView } from './record-store.js';

/**
 * Most referencing records one browser call examines: past it a read finds nothing and a delete is
 * refused (fail closed), so a file referenced by very many records costs a bounded amount of work.
 */
export const MAX_REFERENCES_SCANNED = 1000;

/** Whether a field's values are files (and so get reverse-lookup entries). */
export const referencesBlob = (f: StoredField): boolean => fieldType(f.type).references === 'blob';

/** A blob value's key in its field's index partition: the SHA-256 itself (hex never holds SEP). */
export const blobEntryKey = (value: unknown): string => String(value);

export type DeleteVerdict = 'allowed' | 'not_found' | 'forbidden';

export class BlobRules {
  private readonly server: boolean;

  constructor(private readonly engine: Engine, private readonly principal: Principal, private readonly database: string) {
    this.server = isServerCredential(principal);
  }

  private get org() {
    return this.principal.organizationId;
  }

  /** GET and HEAD: a record the credential may view references the file. */
  async mayRead(sha256: string): Promise<boolean> {
    if (this.server) return true;
    let scanned = 0;
    // Collections whose view rule can never let this credential through hold no grant: not read.
    for await (const { c, record } of this.references(sha256, (c) => ruleAllowsPrincipal(c.compiled.view, this.principal) !== 'no')) {
      if (this.allows(c, 'view', record)) return true;
      if (++scanned >= MAX_REFERENCES_SCANNED) return false;
    }
    return false;
  }

  /**
   * DELETE: every referencing record may be updated by the credential. A file nobody references is
   * the server's to delete (else anyone could delete another user's upload before it is attached).
   * `not_found` when the credential may not read the file, so the answer does not reveal it exists.
   */
  async mayDelete(sha256: string): Promise<DeleteVerdict> {
    if (this.server) return 'allowed';
    let viewable = false;
    let updatable = true;
    let scanned = 0;
    for await (const { c, record } of this.references(sha256, () => true)) {
      viewable ||= this.allows(c, 'view', record);
      updatable &&= this.allows(c, 'update', record);
      if (viewable && !updatable) return 'forbidden';
      if (++scanned >= MAX_REFERENCES_SCANNED) return viewable ? 'forbidden' : 'not_found';
    }
    if (!viewable) return 'not_found';
    return updatable ? 'allowed' : 'forbidden';
  }

  /** Uploads: some collection with a blob field may let the credential create or update records. */
  async mayUpload(): Promise<boolean> {
    if (this.server) return true;
    const open = (c: Collection) => ruleAllowsPrincipal(c.compiled.create, this.principal) !== 'no' || ruleAllowsPrincipal(c.compiled.update, this.principal) !== 'no';
    return (await this.blobCollections()).some(open);
  }

  private allows(c: Collection, action: 'view' | 'update', record: RecordView): boolean {
    return evaluateRule(c.compiled[action], { principal: this.principal, record, request: null });
  }

  /** The records of collections passing `include` that hold `sha256` in a blob field, as the current schema shows them. */
  private async *references(sha256: string, include: (c: Collection) => boolean): AsyncGenerator<{ c: Collection; record: RecordView }> {
    for (const c of (await this.blobCollections()).filter(include)) {
      for (const f of c.fields.filter(referencesBlob)) {
        let cursor: string | undefined;
        do {
          const page = await this.engine.kv.query({
            pk: indexPartition(this.org, this.database, c.name, f.name, f.generation),
            sk: { beginsWith: blobEntryKey(sha256) + SEP },
            limit: 100,
            cursor,
          });
          for (const entry of page.items) {
            // Every blob entry carries its record; one without (none are written so) grants nothing.
            if (entry.version === undefined) continue;
            const loaded = inlineRecord(entry) ?? (await loadRecord(this.engine, entry));
            if (loaded) yield { c, record: view(c, loaded) };
          }
          cursor = page.cursor;
        } while (cursor);
      }
    }
  }

  /** The database's collections that have a blob field (read fresh: rules decide here). */
  private async blobCollections(): Promise<Collection[]> {
    const all = await new Collections(this.engine.kv, () => this.engine.clock.now()).list(this.org, this.database);
    return all.filter((c) => c.fields?.some(referencesBlob));
  }
}
