/**
 * Model routes (list, create, edit, set default, "Try it"), rerank profiles, vector databases,
 * knowledge collections and knowledge jobs. Developers and above change routes.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, listOf, seg, useApi } from '../api';
import { setParams, useLocation } from '../router';
import { can, type Me } from '../roles';
import { ConfirmButton, Empty, ErrorText, Json, ListFromApi, Loading, LoadState, Section, Select, Table, Tabs, TextArea, TextField, useAction } from '../ui';

/**
 * What `PUT /routes/{id}` would otherwise reset: it replaces the whole route, and this form edits only
 * endpoint, provider, base URL, model and default, so an edit sends the route's other settings back
 * (its prices above all: without them its calls would go unpriced past the budget).
 */
const KEPT_FIELDS = ['max_tokens', 'tools', 'timeout_ms', 'tiers', 'price_in_per_mtok', 'price_out_per_mtok', 'price_per_minute', 'max_answer_bytes', 'max_event_bytes'] as const;
const kept = (route: ModelRoute | undefined): Record<string, unknown> =>
  route ? Object.fromEntries(KEPT_FIELDS.filter((f) => route[f] !== undefined).map((f) => [f, route[f]])) : {};

interface ModelRoute {
  id: string;
  endpoint: string;
  provider: string;
  /** The upstream's model name (`model` in the PUT body names the same field). */
  upstream_model?: string | null;
  base_url?: string | null;
  api_key_env?: string | null;
  default?: boolean;
  [field: string]: unknown;
}

const TABS = [
  ['routes', 'Routes'],
  ['rerank-profiles', 'Rerank profiles'],
  ['vector-databases', 'Vector databases'],
  ['collections', 'Knowledge collections'],
  ['knowledge-jobs', 'Knowledge jobs'],
] as const;

const ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/run', '/v1/audio/transcriptions'] as const;
const PROVIDERS = ['openai-compatible', 'bedrock', 'http', 'decision'] as const;

export function RoutesPage({ me }: { me: Me }): JSX.Element {
  const loc = useLocation();
  const tab = loc.params.get('tab') ?? 'routes';
  const mayWrite = can(me.person.role, 'developer');
  return (
    <>
      <Tabs label="AI resources" tabs={TABS} current={tab} href={(id) => `/routes?tab=${id}`} />
      {tab === 'routes' ? (
        <ModelRoutes mayWrite={mayWrite} />
      ) : tab === 'vector-databases' ? (
        <VectorDatabases mayWrite={mayWrite} />
      ) : tab === 'collections' ? (
        <KnowledgeCollections />
      ) : (
        <Section title={TABS.find(([id]) => id === tab)?.[1] ?? 'Resources'}>
          <ListFromApi key={tab} path={`/${tab}`} keys={[tab.replace(/-/g, '_'), 'profiles', 'databases', 'collections', 'jobs']} caption={tab} empty="Nothing here yet." />
        </Section>
      )}
    </>
  );
}

function ModelRoutes({ mayWrite }: { mayWrite: boolean }): JSX.Element {
  const routes = useApi<unknown>('/routes');
  const [editing, setEditing] = useState<ModelRoute | 'new' | undefined>();
  const [trying, setTrying] = useState<ModelRoute | undefined>();
  const action = useAction();
  const list = listOf<ModelRoute>(routes.data, 'routes');
  return (
    <>
      <Section title="Model routes" actions={mayWrite ? <button type="button" onClick={() => setEditing('new')}>New route</button> : undefined}>
        <LoadState of={routes} what="routes" count={list.length} empty="No model routes yet: AI calls have nowhere to go." />
        {list.length ? (
          <Table columns={['Route', 'Endpoint', 'Provider', 'Upstream model', 'Default', 'Actions']}>
            {list.map((r) => (
              <tr key={r.id}>
                <td>
                  <code class="mono">{r.id}</code>
                </td>
                <td>
                  <code class="mono">{r.endpoint}</code>
                </td>
                <td>{r.provider}</td>
                <td>{r.upstream_model ?? '—'}</td>
                <td>{r.default ? 'Yes' : 'No'}</td>
                <td class="actions">
                  <button type="button" onClick={() => setTrying(r)}>
                    Try it
                  </button>
                  {mayWrite ? (
                    <button type="button" onClick={() => setEditing(r)}>
                      Edit
                    </button>
                  ) : null}
                  {mayWrite && !r.default ? (
                    <button
                      type="button"
                      aria-label={`Set default: ${r.id} for ${r.endpoint}`}
                      onClick={() =>
                        void action.run(async () => {
                          await api('POST', `/routes/${seg(r.id)}/default`);
                          routes.reload();
                        })
                      }
                    >
                      Set default
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </Table>
        ) : null}
        <ErrorText error={action.error} />
      </Section>
      {editing ? (
        <RouteForm
          key={editing === 'new' ? 'new' : editing.id}
          route={editing === 'new' ? undefined : editing}
          onDone={() => {
            setEditing(undefined);
            routes.reload();
          }}
          onCancel={() => setEditing(undefined)}
        />
      ) : null}
      {trying ? <TryRoute key={trying.id} route={trying} /> : null}
    </>
  );
}

function RouteForm({ route, onDone, onCancel }: { route?: ModelRoute; onDone: () => void; onCancel: () => void }): JSX.Element {
  const [id, setId] = useState(route?.id ?? '');
  const [endpoint, setEndpoint] = useState<string>(route?.endpoint ?? ENDPOINTS[0]);
  const [provider, setProvider] = useState<string>(route?.provider ?? PROVIDERS[0]);
  const [baseUrl, setBaseUrl] = useState(route?.base_url ?? '');
  const [model, setModel] = useState(route?.upstream_model ?? '');
  const [isDefault, setDefault] = useState(route?.default ?? false);
  const { error, submit } = useAction();
  const fieldError = (param: string) => (error?.param === param ? error : undefined);
  // The route's upstream key stays only where the operator pointed it (the console may not name one).
  const keepsKey = !!route?.api_key_env && provider === route.provider && baseUrl.replace(/\/+$/, '') === (route.base_url ?? '').replace(/\/+$/, '');
  const send = submit(async () => {
    await api('PUT', `/routes/${seg(id)}`, { ...kept(route), endpoint, provider, base_url: baseUrl || undefined, model: model || undefined, default: isDefault, api_key_env: keepsKey ? route!.api_key_env : undefined });
    onDone();
  });
  return (
    <Section title={route ? `Edit route ${route.id}` : 'New model route'}>
      <form class="stack" onSubmit={send} aria-label={route ? `Edit route ${route.id}` : 'New model route'}>
        <TextField label="Route id" value={id} onValue={setId} readOnly={route !== undefined} error={fieldError('id')} hint="What callers put in `model`." />
        <Select label="Endpoint" value={endpoint} onValue={setEndpoint} options={ENDPOINTS.map((e) => [e, e] as const)} />
        <Select label="Provider" value={provider} onValue={setProvider} options={PROVIDERS.map((p) => [p, p] as const)} />
        <TextField
          label="Base URL"
          value={baseUrl}
          onValue={setBaseUrl}
          error={fieldError('base_url')}
          hint={
            route?.api_key_env
              ? `Like https://api.openai.com/v1; no user:password@ in it. Its upstream key (${route.api_key_env}) stays while the provider and base URL do; changing either drops it (the operator names keys with the admin CLI).`
              : 'Like https://api.openai.com/v1; no user:password@ in it.'
          }
        />
        <TextField label="Upstream model" value={model} onValue={setModel} error={fieldError('model')} />
        <label class="check">
          <input type="checkbox" checked={isDefault} onChange={(e) => setDefault((e.currentTarget as HTMLInputElement).checked)} /> The endpoint's default route
        </label>
        {error && !['id', 'base_url', 'model'].includes(error.param ?? '') ? <ErrorText error={error} /> : null}
        <div class="actions">
          <button type="submit" class="primary">
            Save route
          </button>
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </Section>
  );
}

/** "Try it": one call through the route from the server (the console API), its answer shown as text. */
function TryRoute({ route }: { route: ModelRoute }): JSX.Element {
  const [input, setInput] = useState(route.endpoint === '/v1/embeddings' ? 'Hello' : 'Say hello in five words.');
  const [answer, setAnswer] = useState<unknown>();
  const { error, busy, submit } = useAction();
  const send = submit(async () => {
    setAnswer(undefined);
    setAnswer(await api('POST', `/routes/${seg(route.id)}/try`, { input }));
  });
  return (
    <Section title={`Try route ${route.id}`}>
      <form class="stack" onSubmit={send} aria-label={`Try route ${route.id}`}>
        <TextArea label="Input" value={input} onValue={setInput} rows={3} />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Calling…' : 'Send'}
        </button>
      </form>
      <ErrorText error={error} />
      {answer !== undefined ? <Json value={answer} /> : null}
    </Section>
  );
}

interface Workspace {
  id: string;
  name: string;
}

/**
 * A workspace's vector database (one per workspace: `GET|POST|DELETE /workspaces/{id}/vector-database`):
 * shown, created over an embeddings route (one charged call learns its dimensions), deleted.
 */
function VectorDatabases({ mayWrite }: { mayWrite: boolean }): JSX.Element {
  const loc = useLocation();
  const workspaces = useApi<unknown>('/workspaces');
  const list = listOf<Workspace>(workspaces.data, 'workspaces');
  const ws = loc.params.get('workspace') ?? list[0]?.id;
  if (workspaces.loading && !workspaces.data) return <Loading what="workspaces" />;
  if (workspaces.error) return <ErrorText error={workspaces.error} />;
  if (!ws) return <Empty>No workspace yet.</Empty>;
  return (
    <Section title="Vector database">
      <div class="inline-form">
        <Select label="Workspace" value={ws} onValue={(v) => setParams({ workspace: v })} options={list.map((w) => [w.id, `${w.name} (${w.id})`] as const)} />
      </div>
      <VectorDatabase key={ws} ws={ws} mayWrite={mayWrite} />
    </Section>
  );
}

function VectorDatabase({ ws, mayWrite }: { ws: string; mayWrite: boolean }): JSX.Element {
  const path = `/workspaces/${seg(ws)}/vector-database`;
  const db = useApi<Record<string, unknown>>(path);
  const routes = useApi<unknown>(mayWrite ? '/routes' : null);
  const embeddings = listOf<ModelRoute>(routes.data, 'routes').filter((r) => r.endpoint === '/v1/embeddings');
  const [route, setRoute] = useState('');
  const { error, busy, run } = useAction();
  const none = db.data?.state === 'none';
  const act = (method: 'POST' | 'DELETE') =>
    run(async () => {
      await api(method, path, method === 'POST' ? { embedding_route: route || embeddings[0]?.id || '' } : undefined);
      db.reload();
    });
  return (
    <>
      <LoadState of={db} what="the vector database" count={none ? 0 : undefined} empty="This workspace has no vector database." />
      {db.data && !none ? <Json value={db.data} /> : null}
      {mayWrite && none ? (
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            void act('POST');
          }}
        >
          <Select
            label="Embeddings route"
            value={route || embeddings[0]?.id || ''}
            onValue={setRoute}
            options={embeddings.length ? embeddings.map((r) => [r.id, r.id] as const) : [['', 'No embeddings route yet']]}
            hint="One embeddings call through it learns the vectors' dimensions."
          />
          <button type="submit" disabled={busy || embeddings.length === 0}>
            Create vector database
          </button>
        </form>
      ) : null}
      {mayWrite && db.data && !none && db.data.state !== 'deleting' ? <ConfirmButton label="Delete vector database" confirmLabel="Confirm delete" onConfirm={() => act('DELETE')} /> : null}
      <ErrorText error={error} />
    </>
  );
}

/** Knowledge collections; one opened (`?collection=`) lists its items with their statuses and errors. */
function KnowledgeCollections(): JSX.Element {
  const loc = useLocation();
  const open = loc.params.get('collection');
  return (
    <>
      <Section title="Knowledge collections">
        <ListFromApi
          path="/collections"
          keys={['collections']}
          caption="Knowledge collections"
          empty="No knowledge collections yet."
          actions={(item) => (
            <button type="button" onClick={() => setParams({ collection: String(item.id ?? '') }, { push: true })}>
              Items of {String(item.name ?? item.id)}
            </button>
          )}
        />
      </Section>
      {open ? (
        <Section title={`Items of ${open}`}>
          <ListFromApi key={open} path={`/collections/${seg(open)}/items`} keys={['items']} caption={`Items of ${open}`} empty="No items in this collection." />
        </Section>
      ) : null}
    </>
  );
}
