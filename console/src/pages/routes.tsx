/**
 * Model routes (list, create, edit, set default, "Try it"), rerank profiles, vector databases,
 * knowledge collections and knowledge jobs. Developers and above change routes.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, asApiError, listOf, seg, useApi, type ApiError } from '../api';
import { useLocation } from '../router';
import { can, type Me } from '../roles';
import { Empty, ErrorText, Json, ListFromApi, Loading, Section, Select, Tabs, TextArea, TextField } from '../ui';

interface ModelRoute {
  id: string;
  endpoint: string;
  provider: string;
  model?: string | null;
  base_url?: string | null;
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
  const list = listOf<ModelRoute>(routes.data, 'routes');
  return (
    <>
      <Section title="Model routes" actions={mayWrite ? <button type="button" onClick={() => setEditing('new')}>New route</button> : undefined}>
        {routes.loading && !routes.data ? <Loading what="routes" /> : null}
        <ErrorText error={routes.error} />
        {routes.data && list.length === 0 ? <Empty>No model routes yet: AI calls have nowhere to go.</Empty> : null}
        {list.length ? (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Route</th>
                  <th scope="col">Endpoint</th>
                  <th scope="col">Provider</th>
                  <th scope="col">Upstream model</th>
                  <th scope="col">Default</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {list.map((r) => (
                  <tr key={r.id}>
                    <td>
                      <code class="mono">{r.id}</code>
                    </td>
                    <td>
                      <code class="mono">{r.endpoint}</code>
                    </td>
                    <td>{r.provider}</td>
                    <td>{r.model ?? '—'}</td>
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
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
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
  const [model, setModel] = useState(route?.model ?? '');
  const [isDefault, setDefault] = useState(route?.default ?? false);
  const [error, setError] = useState<ApiError | undefined>();
  const fieldError = (param: string) => (error?.param === param ? error : undefined);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    try {
      await api('PUT', `/routes/${seg(id)}`, { endpoint, provider, base_url: baseUrl || undefined, model: model || undefined, default: isDefault });
      onDone();
    } catch (err) {
      setError(asApiError(err));
    }
  };
  return (
    <Section title={route ? `Edit route ${route.id}` : 'New model route'}>
      <form class="stack" onSubmit={submit} aria-label={route ? `Edit route ${route.id}` : 'New model route'}>
        <TextField label="Route id" value={id} onValue={setId} readOnly={route !== undefined} error={fieldError('id')} hint="What callers put in `model`." />
        <Select label="Endpoint" value={endpoint} onValue={setEndpoint} options={ENDPOINTS.map((e) => [e, e] as const)} />
        <Select label="Provider" value={provider} onValue={setProvider} options={PROVIDERS.map((p) => [p, p] as const)} />
        <TextField label="Base URL" value={baseUrl} onValue={setBaseUrl} error={fieldError('base_url')} hint="Like https://api.openai.com/v1; no user:password@ in it." />
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
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    setAnswer(undefined);
    try {
      setAnswer(await api('POST', `/routes/${seg(route.id)}/try`, { input }));
    } catch (err) {
      setError(asApiError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Section title={`Try route ${route.id}`}>
      <form class="stack" onSubmit={submit} aria-label={`Try route ${route.id}`}>
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
