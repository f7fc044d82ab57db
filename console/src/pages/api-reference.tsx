/**
 * API reference: the committed OpenAPI documents (docs/openapi/{ai,data,events}.json, copied beside the
 * built files as /openapi/{api}.json), one tab per API: each operation with its method, path, summary,
 * parameters, request body and answers. Read on this origin only (the console's policy allows no other);
 * the operations port's /docs page renders the same documents with every schema.
 */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { useLocation } from '../router';
import { ErrorText, Loading, Tabs } from '../ui';

const APIS = [
  ['ai', 'AI API'],
  ['data', 'Data API'],
  ['events', 'Events API'],
] as const;

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  $ref?: string;
}
interface Operation {
  summary?: string;
  description?: string;
  operationId?: string;
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: { $ref?: string } }>; $ref?: string };
  responses?: Record<string, { description?: string; $ref?: string }>;
}
interface Document {
  info?: { title?: string; version?: string; description?: string };
  servers?: Array<{ url: string; description?: string }>;
  paths?: Record<string, Record<string, Operation | Parameter[]>>;
  components?: { parameters?: Record<string, Parameter>; responses?: Record<string, { description?: string }> };
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'];
const cache = new Map<string, Document>();

export function ApiReferencePage(): JSX.Element {
  const loc = useLocation();
  const api = APIS.some(([id]) => id === loc.params.get('api')) ? loc.params.get('api')! : 'ai';
  const [doc, setDoc] = useState<Document | undefined>(cache.get(api));
  const [error, setError] = useState<string | undefined>();
  const [filter, setFilter] = useState('');
  useEffect(() => {
    let live = true;
    setError(undefined);
    const known = cache.get(api);
    setDoc(known);
    if (known) return;
    fetch(`/openapi/${api}.json`, { credentials: 'same-origin' })
      .then(async (res) => {
        if (!res.ok) throw new Error(`The ${api} document answered ${res.status}.`);
        const d = (await res.json()) as Document;
        cache.set(api, d);
        if (live) setDoc(d);
      })
      .catch((e: unknown) => live && setError(e instanceof Error ? e.message : String(e)));
    return () => {
      live = false;
    };
  }, [api]);

  return (
    <>
      <Tabs label="APIs" tabs={APIS} current={api} href={(id) => `/api-reference?api=${id}`} />
      <ErrorText error={error} />
      {!doc && !error ? <Loading what="the OpenAPI document" /> : null}
      {doc ? <Reference doc={doc} api={api} filter={filter} setFilter={setFilter} /> : null}
    </>
  );
}

function Reference({ doc, api, filter, setFilter }: { doc: Document; api: string; filter: string; setFilter: (v: string) => void }): JSX.Element {
  const operations: Array<{ method: string; path: string; op: Operation; shared: Parameter[] }> = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    const shared = Array.isArray(item.parameters) ? (item.parameters as Parameter[]) : [];
    for (const method of METHODS) {
      const op = item[method] as Operation | undefined;
      if (op && !Array.isArray(op)) operations.push({ method, path, op, shared });
    }
  }
  const needle = filter.trim().toLowerCase();
  const shown = needle ? operations.filter((o) => `${o.method} ${o.path} ${o.op.summary ?? ''} ${o.op.operationId ?? ''}`.toLowerCase().includes(needle)) : operations;
  const groups = new Map<string, typeof shown>();
  for (const o of shown) {
    const tag = o.op.tags?.[0] ?? 'Operations';
    groups.set(tag, [...(groups.get(tag) ?? []), o]);
  }
  const resolve = (p: Parameter): Parameter => (p.$ref ? (doc.components?.parameters?.[p.$ref.split('/').pop()!] ?? p) : p);
  return (
    <section class="card" aria-label={`${api} reference`}>
      <h2>
        {doc.info?.title ?? api} {doc.info?.version ? <span class="muted">version {doc.info.version}</span> : null}
      </h2>
      <p class="muted">
        {operations.length} operations. The document itself: <a href={`/openapi/${api}.json`}>/openapi/{api}.json</a>
      </p>
      <div class="field">
        <label for="op-filter">Find an operation</label>
        <input id="op-filter" type="search" value={filter} onInput={(e) => setFilter((e.currentTarget as HTMLInputElement).value)} />
      </div>
      {[...groups.entries()].map(([tag, ops]) => (
        <section key={tag} aria-label={tag}>
          <h3>{tag}</h3>
          {ops.map(({ method, path, op, shared }) => (
            <details key={`${method} ${path}`} class="op">
              <summary>
                <span class={`method m-${method}`}>{method.toUpperCase()}</span> <code class="mono">{path}</code> <span>{op.summary ?? ''}</span>
              </summary>
              {op.description ? <p class="prose">{op.description}</p> : null}
              {[...shared, ...(op.parameters ?? [])].length ? (
                <table>
                  <caption>Parameters</caption>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">In</th>
                      <th scope="col">Required</th>
                      <th scope="col">Description</th>
                    </tr>
                  </thead>
                  <tbody>
                    {[...shared, ...(op.parameters ?? [])].map(resolve).map((p) => (
                      <tr key={`${p.in}:${p.name}`}>
                        <td>
                          <code class="mono">{p.name}</code>
                        </td>
                        <td>{p.in}</td>
                        <td>{p.required ? 'yes' : 'no'}</td>
                        <td class="prose">{p.description ?? ''}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              ) : null}
              {op.requestBody?.content ? (
                <p>
                  Body:{' '}
                  {Object.entries(op.requestBody.content).map(([type, c]) => (
                    <span key={type}>
                      <code class="mono">{type}</code> {c.schema?.$ref ? <code class="mono">{c.schema.$ref.split('/').pop()}</code> : null}{' '}
                    </span>
                  ))}
                </p>
              ) : null}
              {op.responses ? (
                <ul class="plain">
                  {Object.entries(op.responses).map(([status, r]) => (
                    <li key={status}>
                      <code class="mono">{status}</code> {r.description ?? (r.$ref ? (doc.components?.responses?.[r.$ref.split('/').pop()!]?.description ?? '') : '')}
                    </li>
                  ))}
                </ul>
              ) : null}
            </details>
          ))}
        </section>
      ))}
    </section>
  );
}
