/**
 * Data: databases, their collections with schema and rules (the API's validation errors shown
 * inline), records with filter, sort and paging, and a record's files to download. What is open
 * lives in the query string (`?db=…&collection=…`), so Back and a shared link work.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, API_BASE, ApiError, listOf, nextCursorOf, seg, useApi } from '../api';
import { Link, setParams, useLocation } from '../router';
import { can, type Me } from '../roles';
import { cellText, ErrorText, LoadState, Pager, Section, Select, Table, TextArea, TextField, Time, useAction, useCursorPages } from '../ui';

interface Database {
  key: string;
  created_at?: string;
  application_id?: string;
}
interface FieldDef {
  name: string;
  type: string;
  required?: boolean;
  unique?: boolean;
  indexed?: boolean;
  fulltext?: boolean;
  target?: string;
}
interface Collection {
  name: string;
  mode: 'schema' | 'free';
  schema_version?: number;
  fields: FieldDef[];
  rules?: Record<string, string | null>;
}
type DataRecord = Record<string, unknown> & { id: string; version?: number; created_at?: string; updated_at?: string };

const dbPath = (db: string) => `/databases/${seg(db)}`;
const collPath = (db: string, c: string) => `${dbPath(db)}/collections/${seg(c)}`;

export function DataPage({ me }: { me: Me }): JSX.Element {
  const loc = useLocation();
  const db = loc.params.get('db');
  const collection = loc.params.get('collection');
  const mayWrite = can(me.person.role, 'developer');
  return (
    <>
      <nav aria-label="Breadcrumb" class="crumbs">
        <ol>
          <li>
            <Link href="/data" aria-current={!db ? 'page' : undefined}>
              Databases
            </Link>
          </li>
          {db ? (
            <li>
              <Link href={`/data?db=${encodeURIComponent(db)}`} aria-current={!collection ? 'page' : undefined}>
                {db}
              </Link>
            </li>
          ) : null}
          {db && collection ? (
            <li>
              <span aria-current="page">{collection}</span>
            </li>
          ) : null}
        </ol>
      </nav>
      {!db ? (
        <Databases mayWrite={mayWrite} />
      ) : !collection ? (
        <>
          <Collections db={db} mayWrite={mayWrite} />
          <Files key={db} db={db} />
        </>
      ) : <Records key={`${db}/${collection}`} db={db} collection={collection} mayWrite={mayWrite} />}
    </>
  );
}

function Databases({ mayWrite }: { mayWrite: boolean }): JSX.Element {
  const dbs = useApi<unknown>('/databases');
  const [name, setName] = useState('');
  const { error, submit } = useAction();
  const list = listOf<Database>(dbs.data, 'databases');
  const create = submit(async () => {
    await api('PUT', dbPath(name.trim()));
    setName('');
    dbs.reload();
  });
  return (
    <Section title="Databases">
      <LoadState of={dbs} what="databases" count={list.length} empty="No databases yet." />
      {list.length ? (
        <Table columns={['Database', 'Application', 'Created']}>
          {list.map((d) => (
            <tr key={d.key}>
              <td>
                <Link href={`/data?db=${encodeURIComponent(d.key)}`}>{d.key}</Link>
              </td>
              <td>{d.application_id ? <code class="mono">{d.application_id}</code> : '—'}</td>
              <td>
                <Time value={d.created_at} />
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
      {mayWrite ? (
        <form class="inline-form" onSubmit={create}>
          <TextField label="New database" value={name} onValue={setName} hint="Lowercase letters, digits, . _ - and /" error={error} />
          <button type="submit">Create database</button>
        </form>
      ) : null}
    </Section>
  );
}

const EXAMPLE_FIELDS = JSON.stringify([{ name: 'title', type: 'text', required: true, indexed: true }], null, 2);
const NO_RULES = JSON.stringify({ list: '', view: '', create: '', update: '', delete: '' }, null, 2);

function Collections({ db, mayWrite }: { db: string; mayWrite: boolean }): JSX.Element {
  const colls = useApi<unknown>(`${dbPath(db)}/collections`);
  const list = listOf<Collection>(colls.data, 'collections');
  const [editing, setEditing] = useState<Collection | 'new' | undefined>();
  return (
    <>
      <Section title={`Collections of ${db}`} actions={mayWrite ? <button type="button" onClick={() => setEditing('new')}>New collection</button> : undefined}>
        <LoadState of={colls} what="collections" count={list.length} empty="No collections in this database yet." />
        {list.length ? (
          <Table columns={['Collection', 'Mode', 'Fields', 'Schema version', mayWrite && 'Actions']}>
            {list.map((c) => (
              <tr key={c.name}>
                <td>
                  <Link href={`/data?db=${encodeURIComponent(db)}&collection=${encodeURIComponent(c.name)}`}>{c.name}</Link>
                </td>
                <td>{c.mode}</td>
                <td>{(c.fields ?? []).map((f) => `${f.name}: ${f.type}`).join(', ') || '—'}</td>
                <td>{c.schema_version ?? '—'}</td>
                {mayWrite ? (
                  <td>
                    <button type="button" onClick={() => setEditing(c)}>
                      Edit schema
                    </button>
                  </td>
                ) : null}
              </tr>
            ))}
          </Table>
        ) : null}
      </Section>
      {editing ? (
        <CollectionForm
          key={editing === 'new' ? 'new' : editing.name}
          db={db}
          collection={editing === 'new' ? undefined : editing}
          onDone={() => {
            setEditing(undefined);
            colls.reload();
          }}
          onCancel={() => setEditing(undefined)}
        />
      ) : null}
    </>
  );
}

/** The collection's whole desired state (the API takes the full schema each time). */
function CollectionForm({ db, collection, onDone, onCancel }: { db: string; collection?: Collection; onDone: () => void; onCancel: () => void }): JSX.Element {
  const [name, setName] = useState(collection?.name ?? '');
  const [mode, setMode] = useState<string>(collection?.mode ?? 'schema');
  const [fields, setFields] = useState(collection ? JSON.stringify(collection.fields ?? [], null, 2) : EXAMPLE_FIELDS);
  const [rules, setRules] = useState(collection?.rules ? JSON.stringify(collection.rules, null, 2) : NO_RULES);
  const { error, submit } = useAction();
  const param = error?.param ?? '';
  const fieldsError = error && (param.startsWith('fields') || error.code === 'invalid_schema') ? error : undefined;
  const rulesError = error && (param.startsWith('rules') || error.code === 'invalid_rule') ? error : undefined;
  const nameError = error && param === 'collection' ? error : undefined;
  const send = submit(async () => {
    let body: { mode: string; fields: unknown; rules: unknown };
    try {
      body = { mode, fields: JSON.parse(fields || '[]'), rules: JSON.parse(rules || '{}') };
    } catch {
      throw new ApiError(0, '', 'Fields and rules must be valid JSON.');
    }
    await api('PUT', collPath(db, name.trim()), body);
    onDone();
  });
  return (
    <Section title={collection ? `Schema of ${collection.name}` : 'New collection'}>
      <form class="stack" onSubmit={send} aria-label={collection ? `Schema of ${collection.name}` : 'New collection'}>
        <TextField label="Collection name" value={name} onValue={setName} readOnly={collection !== undefined} error={nameError} hint="A lowercase letter, then lowercase letters, digits or _" />
        <Select
          label="Mode"
          value={mode}
          onValue={setMode}
          options={[
            ['schema', 'schema: declared fields only'],
            ['free', 'free: any top-level fields'],
          ]}
        />
        <TextArea label="Fields (JSON)" value={fields} onValue={setFields} rows={8} error={fieldsError} hint="Each: name, type (text, integer, number, bool, datetime, json, relation, blob), required, unique, indexed, fulltext, target." />
        <TextArea label="Rules (JSON)" value={rules} onValue={setRules} rows={7} error={rulesError} hint='list, view, create, update, delete: null (nobody), "" (server credentials), "public", "users" or an expression.' />
        {error && !fieldsError && !rulesError && !nameError ? <ErrorText error={error} /> : null}
        <div class="actions">
          <button type="submit" class="primary">
            Save collection
          </button>
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </Section>
  );
}

const OPS = [
  ['eq', 'equals'],
  ['gt', 'greater than'],
  ['gte', 'at least'],
  ['lt', 'less than'],
  ['lte', 'at most'],
  ['in', 'one of (a,b,c)'],
] as const;

function Records({ db, collection, mayWrite }: { db: string; collection: string; mayWrite: boolean }): JSX.Element {
  const loc = useLocation();
  const coll = useApi<Collection>(collPath(db, collection));
  const pages = useCursorPages();
  // The query the list shows: from the address, so it survives a reload.
  const field = loc.params.get('field') ?? '';
  const op = loc.params.get('op') ?? 'eq';
  const value = loc.params.get('value') ?? '';
  const sort = loc.params.get('sort') ?? '';
  const limit = loc.params.get('limit') ?? '20';
  const q = new URLSearchParams();
  q.set('limit', limit);
  if (sort) q.set('sort', sort);
  if (field && value) q.set(`filter[${field}][${op}]`, value);
  if (pages.cursor) q.set('cursor', pages.cursor);
  const records = useApi<unknown>(`${collPath(db, collection)}/records?${q.toString()}`);
  const list = listOf<DataRecord>(records.data, 'records');

  const [draft, setDraft] = useState({ field, op, value, sort: sort.replace(/^-/, ''), desc: sort.startsWith('-'), limit });
  const apply = (e: Event) => {
    e.preventDefault();
    pages.reset();
    setParams({ field: draft.field, op: draft.op, value: draft.value, sort: draft.sort ? `${draft.desc ? '-' : ''}${draft.sort}` : null, limit: draft.limit });
  };
  const fields = coll.data?.fields ?? [];
  const shownFields = fields.length ? fields.map((f) => f.name) : [...new Set(list.flatMap((r) => Object.keys(r)))].filter((k) => !['id', 'version', 'created_at', 'updated_at'].includes(k));
  const blobFields = new Set(fields.filter((f) => f.type === 'blob').map((f) => f.name));
  const sortable = [['', 'Default order'], ['id', 'id'], ['created_at', 'created_at'], ['updated_at', 'updated_at'], ...fields.filter((f) => f.indexed || f.unique).map((f) => [f.name, f.name] as const)] as const;

  return (
    <>
      <Section title={`Records of ${collection}`}>
        <ErrorText error={coll.error} />
        <form class="filters" onSubmit={apply} aria-label="Filter and sort records">
          <TextField label="Filter field" value={draft.field} onValue={(v) => setDraft({ ...draft, field: v })} hint="An indexed field" list="record-fields" />
          <datalist id="record-fields">
            {fields.map((f) => (
              <option key={f.name} value={f.name} />
            ))}
          </datalist>
          <Select label="Operator" value={draft.op} onValue={(v) => setDraft({ ...draft, op: v })} options={OPS} />
          <TextField label="Value" value={draft.value} onValue={(v) => setDraft({ ...draft, value: v })} />
          <Select label="Sort by" value={draft.sort} onValue={(v) => setDraft({ ...draft, sort: v })} options={sortable.map(([v, t]) => [v, t] as const)} />
          <label class="check">
            <input type="checkbox" checked={draft.desc} onChange={(e) => setDraft({ ...draft, desc: (e.currentTarget as HTMLInputElement).checked })} /> Descending
          </label>
          <Select label="Per page" value={draft.limit} onValue={(v) => setDraft({ ...draft, limit: v })} options={['10', '20', '50', '100'].map((n) => [n, n] as const)} />
          <button type="submit">Apply</button>
        </form>
        <LoadState of={records} what="records" count={list.length} empty="No records on this page." />
        {list.length ? (
          <Table columns={['id', ...shownFields, 'version', 'updated']} caption={`Records of ${collection}`}>
            {list.map((r) => (
              <tr key={r.id}>
                <td>
                  <code class="mono">{r.id}</code>
                </td>
                {shownFields.map((f) => (
                  <td key={f} class="cell">
                    {blobFields.has(f) ? <BlobLink db={db} value={r[f]} /> : cellText(r[f])}
                  </td>
                ))}
                <td>{r.version ?? '—'}</td>
                <td>
                  <Time value={r.updated_at} />
                </td>
              </tr>
            ))}
          </Table>
        ) : null}
        <Pager label="Records" page={pages.page} nextCursor={nextCursorOf(records.data)} onNext={pages.next} onPrevious={pages.previous} />
      </Section>
      {/* Keyed by the fields: its template is made again once the collection's schema arrived. */}
      {mayWrite ? <NewRecord key={fields.map((f) => f.name).join(',')} db={db} collection={collection} fields={fields} onDone={records.reload} /> : null}
    </>
  );
}

/** A `blob` field's file, downloaded through the console API (the session, not a key). */
function BlobLink({ db, value }: { db: string; value: unknown }): JSX.Element {
  const sha = typeof value === 'string' ? value : value && typeof value === 'object' ? (value as { sha256?: string }).sha256 : undefined;
  if (!sha || !/^[0-9a-f]{64}$/.test(sha)) return <>{cellText(value)}</>;
  const name = value && typeof value === 'object' ? (value as { name?: string; filename?: string }).name ?? (value as { filename?: string }).filename : undefined;
  return (
    <a href={`${API_BASE}${dbPath(db)}/blobs/${sha}`} download={name ?? sha}>
      Download {name ?? `${sha.slice(0, 12)}…`}
    </a>
  );
}

function NewRecord({ db, collection, fields, onDone }: { db: string; collection: string; fields: FieldDef[]; onDone: () => void }): JSX.Element {
  const template = JSON.stringify(Object.fromEntries(fields.filter((f) => f.type !== 'blob').map((f) => [f.name, f.type === 'integer' || f.type === 'number' ? 0 : f.type === 'bool' ? false : ''])), null, 2);
  const [body, setBody] = useState(template);
  const { error, submit } = useAction();
  const [created, setCreated] = useState('');
  const send = submit(async () => {
    setCreated('');
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new ApiError(0, '', 'The record must be a JSON object.');
    }
    const record = await api<DataRecord>('POST', `${collPath(db, collection)}/records`, parsed);
    setCreated(`Created record ${record.id}.`);
    onDone();
  });
  return (
    <Section title="New record">
      <form class="stack" onSubmit={send} aria-label="New record">
        <TextArea label="Record (JSON)" value={body} onValue={setBody} rows={6} error={error} hint="Optional id; the fields of the record." />
        <button type="submit" class="primary">
          Create record
        </button>
        <p role="status" class="hint">
          {created}
        </p>
      </form>
    </Section>
  );
}

interface StoredFile {
  sha256: string;
  size?: number;
  created_at?: string;
}

/** The database's files (`GET /databases/{db}/blobs`), each downloaded as an attachment through the console API. */
function Files({ db }: { db: string }): JSX.Element {
  const pages = useCursorPages();
  const files = useApi<unknown>(`${dbPath(db)}/blobs${pages.cursor ? `?cursor=${encodeURIComponent(pages.cursor)}` : ''}`);
  const list = listOf<StoredFile>(files.data, 'files');
  return (
    <Section title={`Files of ${db}`}>
      <LoadState of={files} what="files" count={list.length} empty="No files in this database." />
      {list.length ? (
        <Table columns={['SHA-256', 'Size', 'Stored', 'Download']} caption={`Files of ${db}`}>
          {list.map((f) => (
            <tr key={f.sha256}>
              <td>
                <code class="mono">{f.sha256}</code>
              </td>
              <td>{f.size === undefined ? '—' : `${f.size} bytes`}</td>
              <td>
                <Time value={f.created_at} />
              </td>
              <td>
                <BlobLink db={db} value={f.sha256} />
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
      <Pager label="Files" page={pages.page} nextCursor={nextCursorOf(files.data)} onNext={pages.next} onPrevious={pages.previous} />
    </Section>
  );
}
