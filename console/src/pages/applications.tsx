/**
 * Applications: the organization's workspaces and applications with their capabilities, the OAuth
 * clients and the publishable keys (with their allowed origins). Developers and above change them.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, listOf, seg, useApi } from '../api';
import { useLocation } from '../router';
import { can, type Me } from '../roles';
import { ConfirmButton, CopyField, ErrorText, LoadState, Section, Select, Table, Tabs, TextField, Time, useAction } from '../ui';

const CAPABILITIES = ['ai.chat', 'ai.embeddings', 'knowledge', 'decision'] as const;

interface Workspace {
  id: string;
  name: string;
  created_at?: string;
}
interface Application {
  id: string;
  name: string;
  workspace_id: string;
  capabilities: string[];
  disabled?: boolean;
  created_at?: string;
}

const TABS = [
  ['applications', 'Applications'],
  ['oauth-clients', 'OAuth clients'],
  ['publishable-keys', 'Publishable keys'],
] as const;

export function ApplicationsPage({ me }: { me: Me }): JSX.Element {
  const loc = useLocation();
  const tab = loc.params.get('tab') ?? 'applications';
  const workspaces = useApi<unknown>('/workspaces');
  const apps = useApi<unknown>('/applications');
  const mayWrite = can(me.person.role, 'developer');
  const wsList = listOf<Workspace>(workspaces.data, 'workspaces');
  const appList = listOf<Application>(apps.data, 'applications');
  return (
    <>
      <Tabs label="Application views" tabs={TABS} current={tab} href={(id) => `/applications?tab=${id}`} />
      {tab === 'oauth-clients' ? (
        <OAuthClients apps={appList} mayWrite={mayWrite} />
      ) : tab === 'publishable-keys' ? (
        <PublishableKeys apps={appList} mayWrite={mayWrite} />
      ) : (
        <>
          <Section title="Workspaces">
            <LoadState of={workspaces} what="workspaces" count={wsList.length} empty="No workspaces." />
            {wsList.length ? (
              <ul class="plain">
                {wsList.map((w) => (
                  <li key={w.id}>
                    {w.name} <code class="mono">{w.id}</code>
                  </li>
                ))}
              </ul>
            ) : null}
            {mayWrite ? <CreateByName path="/workspaces" what="workspace" onDone={workspaces.reload} /> : null}
          </Section>
          <Section title="Applications">
            <LoadState of={apps} what="applications" count={appList.length} empty="No applications." />
            {appList.length ? (
              <Table columns={['Application', 'Workspace', 'Capabilities', 'Status']}>
                {appList.map((a) => (
                  <AppRow key={a.id} app={a} mayWrite={mayWrite} onChanged={apps.reload} />
                ))}
              </Table>
            ) : null}
            {mayWrite && wsList.length ? <CreateApplication workspaces={wsList} onDone={apps.reload} /> : null}
          </Section>
        </>
      )}
    </>
  );
}

function CreateByName({ path, what, onDone }: { path: string; what: string; onDone: () => void }): JSX.Element {
  const [name, setName] = useState('');
  const { error, submit } = useAction();
  const send = submit(async () => {
    await api('POST', path, { name });
    setName('');
    onDone();
  });
  return (
    <form class="inline-form" onSubmit={send}>
      <TextField label={`New ${what} name`} value={name} onValue={setName} error={error?.param === 'name' ? error : undefined} />
      <button type="submit">Create {what}</button>
      {error?.param === 'name' ? null : <ErrorText error={error} />}
    </form>
  );
}

function CreateApplication({ workspaces, onDone }: { workspaces: Workspace[]; onDone: () => void }): JSX.Element {
  const [name, setName] = useState('');
  const [workspace, setWorkspace] = useState(workspaces[0]?.id ?? '');
  const [caps, setCaps] = useState<string[]>([]);
  const { error, submit } = useAction();
  const send = submit(async () => {
    await api('POST', '/applications', { workspace_id: workspace, name, capabilities: caps });
    setName('');
    onDone();
  });
  return (
    <form class="stack" onSubmit={send} aria-label="Create an application">
      <h3>Create an application</h3>
      <Select label="Workspace" value={workspace} onValue={setWorkspace} options={workspaces.map((w) => [w.id, w.name] as const)} />
      <TextField label="Application name" value={name} onValue={setName} />
      <Capabilities value={caps} onValue={setCaps} />
      <ErrorText error={error} />
      <button type="submit">Create application</button>
    </form>
  );
}

function Capabilities({ value, onValue, legend = 'Capabilities' }: { value: string[]; onValue: (v: string[]) => void; legend?: string }): JSX.Element {
  return (
    <fieldset class="checks">
      <legend>{legend}</legend>
      {CAPABILITIES.map((c) => (
        <label key={c}>
          <input type="checkbox" checked={value.includes(c)} onChange={(e) => onValue((e.currentTarget as HTMLInputElement).checked ? [...value, c] : value.filter((x) => x !== c))} /> {c}
        </label>
      ))}
    </fieldset>
  );
}

function AppRow({ app, mayWrite, onChanged }: { app: Application; mayWrite: boolean; onChanged: () => void }): JSX.Element {
  const [caps, setCaps] = useState(app.capabilities ?? []);
  const { error, run } = useAction();
  const save = () =>
    run(async () => {
      await api('PATCH', `/applications/${seg(app.id)}`, { capabilities: caps });
      onChanged();
    });
  return (
    <tr>
      <td>
        {app.name} <code class="mono">{app.id}</code>
      </td>
      <td>
        <code class="mono">{app.workspace_id}</code>
      </td>
      <td>
        {mayWrite ? (
          <>
            <Capabilities value={caps} onValue={setCaps} legend={`Capabilities of ${app.name}`} />
            <button type="button" onClick={() => void save()}>
              Save capabilities
            </button>
            <ErrorText error={error} />
          </>
        ) : (
          (app.capabilities ?? []).join(', ') || '—'
        )}
      </td>
      <td>{app.disabled ? <span class="badge off">Disabled</span> : <span class="badge on">Active</span>}</td>
    </tr>
  );
}

interface OAuthClient {
  id?: string;
  client_id?: string;
  application_id: string;
  revoked?: boolean;
  created_at?: string;
}

function OAuthClients({ apps, mayWrite }: { apps: Application[]; mayWrite: boolean }): JSX.Element {
  const clients = useApi<unknown>('/oauth-clients');
  const [app, setApp] = useState('');
  const { error, run, submit } = useAction();
  const [secret, setSecret] = useState<{ id: string; secret: string } | undefined>();
  const list = listOf<OAuthClient>(clients.data, 'oauth_clients', 'clients');
  const create = submit(async () => {
    const answer = await api<{ client_id?: string; id?: string; client_secret?: string; secret?: string }>('POST', '/oauth-clients', { application_id: app || apps[0]?.id });
    const s = answer.client_secret ?? answer.secret;
    if (s) setSecret({ id: answer.client_id ?? answer.id ?? '', secret: s });
    clients.reload();
  });
  return (
    <Section title="OAuth clients">
      <LoadState of={clients} what="OAuth clients" count={list.length} empty="No OAuth clients." />
      {list.length ? (
        <Table columns={['Client', 'Application', 'Created', 'Status', mayWrite && 'Actions']}>
          {list.map((c) => {
            const id = c.client_id ?? c.id ?? '';
            return (
              <tr key={id}>
                <td>
                  <code class="mono">{id}</code>
                </td>
                <td>
                  <code class="mono">{c.application_id}</code>
                </td>
                <td>
                  <Time value={c.created_at} />
                </td>
                <td>{c.revoked ? <span class="badge off">Revoked</span> : <span class="badge on">Active</span>}</td>
                {mayWrite ? (
                  <td>
                    {c.revoked ? null : (
                      <ConfirmButton
                        label="Revoke"
                        confirmLabel="Confirm revoke"
                        onConfirm={() =>
                          run(async () => {
                            await api('POST', `/oauth-clients/${seg(id)}/revoke`);
                            clients.reload();
                          })
                        }
                      />
                    )}
                  </td>
                ) : null}
              </tr>
            );
          })}
        </Table>
      ) : null}
      {mayWrite && apps.length ? (
        <form class="inline-form" onSubmit={create}>
          <Select label="Application" value={app || apps[0]!.id} onValue={setApp} options={apps.map((a) => [a.id, a.name] as const)} />
          <button type="submit">Create OAuth client</button>
        </form>
      ) : null}
      {secret ? <CopyField label={`Client secret of ${secret.id} (shown once)`} value={secret.secret} /> : null}
      <ErrorText error={error} />
    </Section>
  );
}

interface PublishableKey {
  id: string;
  key?: string;
  last4?: string;
  application_id: string;
  origins: string[];
  disabled?: boolean;
}

function PublishableKeys({ apps, mayWrite }: { apps: Application[]; mayWrite: boolean }): JSX.Element {
  const keys = useApi<unknown>('/publishable-keys');
  const [app, setApp] = useState('');
  const [origins, setOrigins] = useState('');
  const { error, submit } = useAction();
  const [made, setMade] = useState<{ id: string; key: string } | undefined>();
  const list = listOf<PublishableKey>(keys.data, 'publishable_keys', 'keys');
  const create = submit(async () => {
    const answer = await api<PublishableKey>('POST', '/publishable-keys', { application_id: app || apps[0]?.id, origins: splitOrigins(origins) });
    if (answer.key) setMade({ id: answer.id, key: answer.key });
    setOrigins('');
    keys.reload();
  });
  return (
    <Section title="Publishable keys">
      <p class="lead">Publishable keys (<code>apb_…</code>) are not secrets: web pages use them from the origins listed.</p>
      <LoadState of={keys} what="publishable keys" count={list.length} empty="No publishable keys." />
      {list.length ? (
        <Table columns={['Key', 'Application', 'Origins', 'Status', mayWrite && 'Actions']}>
          {list.map((k) => (
            <PublishableKeyRow key={k.id} k={k} mayWrite={mayWrite} onChanged={keys.reload} />
          ))}
        </Table>
      ) : null}
      {made ? <CopyField label={`Publishable key ${made.id}`} value={made.key} hint="Not a secret: put it in the web page that calls from the origins listed." /> : null}
      {mayWrite && apps.length ? (
        <form class="inline-form" onSubmit={create}>
          <Select label="Application" value={app || apps[0]!.id} onValue={setApp} options={apps.map((a) => [a.id, a.name] as const)} />
          <TextField label="Allowed origins" value={origins} onValue={setOrigins} hint="Space- or comma-separated, like https://app.example.com" />
          <button type="submit">Create publishable key</button>
        </form>
      ) : null}
      <ErrorText error={error} />
    </Section>
  );
}


const splitOrigins = (s: string) => s.split(/[\s,]+/).filter(Boolean);

/** A publishable key's row: its origins changed in place (`PUT …/{id}/origins`) and "Disable" (`POST …/{id}/disable`). */
function PublishableKeyRow({ k, mayWrite, onChanged }: { k: PublishableKey; mayWrite: boolean; onChanged: () => void }): JSX.Element {
  const [origins, setOrigins] = useState((k.origins ?? []).join(' '));
  const { error, run } = useAction();
  const call = (method: 'PUT' | 'POST', path: string, body?: unknown) =>
    run(async () => {
      await api(method, path, body);
      onChanged();
    });
  return (
    <tr>
      <td>
        <code class="mono">{k.id}</code> <code class="mono">{k.last4 ? `…${k.last4}` : ''}</code>
      </td>
      <td>
        <code class="mono">{k.application_id}</code>
      </td>
      <td>
        {mayWrite && !k.disabled ? (
          <form
            class="inline-form"
            onSubmit={(e) => {
              e.preventDefault();
              void call('PUT', `/publishable-keys/${seg(k.id)}/origins`, { origins: splitOrigins(origins) });
            }}
          >
            <TextField label={`Origins of ${k.id}`} value={origins} onValue={setOrigins} error={error?.param?.startsWith('origins') ? error : undefined} />
            <button type="submit">Save origins</button>
          </form>
        ) : (
          (k.origins ?? []).join(' ') || '—'
        )}
      </td>
      <td>{k.disabled ? <span class="badge off">Disabled</span> : <span class="badge on">Active</span>}</td>
      {mayWrite ? (
        <td>
          {k.disabled ? null : <ConfirmButton label="Disable" confirmLabel="Confirm disable" onConfirm={() => call('POST', `/publishable-keys/${seg(k.id)}/disable`)} />}
          {error && !error.param?.startsWith('origins') ? <ErrorText error={error} /> : null}
        </td>
      ) : null}
    </tr>
  );
}
