/**
 * Keys: the organization's secret keys. "Create key" shows the secret once, in a read-only field with
 * a copy button (only its hash is kept: a lost key is replaced, not recovered); rows show its last 4
 * characters; "Disable" (never delete: the key then answers `403 key_disabled`). Developers and
 * above create and disable; per-key limits are an admin's.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, listOf, nextCursorOf, query, seg, useApi } from '../api';
import { can, type Me } from '../roles';
import { ConfirmButton, CopyField, ErrorText, Json, LoadState, Pager, Section, Select, Table, TextArea, TextField, Time, useAction, useCursorPages } from '../ui';

export interface SecretKey {
  id: string;
  application_id: string | null;
  last4: string | null;
  disabled: boolean;
  permissions?: string[] | null;
  created_at: string;
}

interface Application {
  id: string;
  name: string;
}

interface Created {
  key: SecretKey | string;
  secret?: string;
  id?: string;
}

export function KeysPage({ me }: { me: Me }): JSX.Element {
  const pages = useCursorPages();
  const keys = useApi<unknown>(`/keys${query({ cursor: pages.cursor })}`);
  const apps = useApi<unknown>('/applications');
  const mayWrite = can(me.person.role, 'developer');
  const [created, setCreated] = useState<{ id: string; secret: string } | undefined>();

  const list = listOf<SecretKey>(keys.data, 'keys');
  const appNames = new Map(listOf<Application>(apps.data, 'applications').map((a) => [a.id, a.name]));

  return (
    <>
      <p class="lead">Secret keys (<code>aik_…</code>) call the AI, Data and Events APIs from servers. A key is shown once, when it is made.</p>
      {mayWrite ? (
        <CreateKey
          applications={listOf<Application>(apps.data, 'applications')}
          onCreated={(c) => {
            setCreated(c);
            pages.reset();
            keys.reload();
          }}
        />
      ) : null}
      {created ? (
        <Section title="New secret key">
          <div class="notice" role="status">
            <p>
              <strong>Copy this key now.</strong> It is shown this once; only its hash is kept.
            </p>
            <CopyField label={`Secret key ${created.id}`} value={created.secret} />
            <button type="button" onClick={() => setCreated(undefined)}>
              I have copied it
            </button>
          </div>
        </Section>
      ) : null}
      <Section title="Secret keys">
        <LoadState of={keys} what="keys" count={list.length} empty="No secret keys yet." />
        {list.length > 0 ? (
          <Table columns={['Key', 'Ends with', 'Application', 'Created', 'Status', mayWrite && 'Actions']} caption={`Secret keys of ${me.organization.name}`}>
            {list.map((k) => (
              <KeyRow key={k.id} k={k} appName={k.application_id ? appNames.get(k.application_id) : undefined} me={me} onChanged={keys.reload} />
            ))}
          </Table>
        ) : null}
        <Pager label="Keys" page={pages.page} nextCursor={nextCursorOf(keys.data)} onNext={pages.next} onPrevious={pages.previous} />
      </Section>
    </>
  );
}

function CreateKey({ applications, onCreated }: { applications: Application[]; onCreated: (c: { id: string; secret: string }) => void }): JSX.Element {
  const [app, setApp] = useState('');
  const { error, busy, submit } = useAction();
  const create = submit(async () => {
    const answer = await api<Created>('POST', '/keys', app ? { application_id: app } : {});
    const secret = answer.secret ?? (typeof answer.key === 'string' ? answer.key : undefined);
    const id = typeof answer.key === 'object' && answer.key ? answer.key.id : (answer.id ?? '');
    if (!secret) throw new Error('The answer held no secret.');
    onCreated({ id, secret });
  });
  return (
    <Section title="Create a secret key">
      <form class="inline-form" onSubmit={create}>
        <Select
          label="Bound to application"
          value={app}
          onValue={setApp}
          options={[['', 'None: organization-wide'], ...applications.map((a) => [a.id, `${a.name} (${a.id})`] as const)]}
          hint="A bound key reaches only what its application enabled."
        />
        <button type="submit" class="primary" disabled={busy}>
          Create key
        </button>
      </form>
      <ErrorText error={error} />
    </Section>
  );
}

function KeyRow({ k, appName, me, onChanged }: { k: SecretKey; appName?: string; me: Me; onChanged: () => void }): JSX.Element {
  const { error, run } = useAction();
  const mayWrite = can(me.person.role, 'developer');
  const disable = () =>
    run(async () => {
      await api('POST', `/keys/${seg(k.id)}/disable`);
      onChanged();
    });
  return (
    <tr>
      <td>
        <code class="mono">{k.id}</code>
        {mayWrite ? <KeySettings k={k} me={me} onChanged={onChanged} /> : null}
      </td>
      <td>
        <code class="mono">{k.last4 ? `…${k.last4}` : '—'}</code>
      </td>
      <td>{k.application_id ? `${appName ?? ''} ${appName ? `(${k.application_id})` : k.application_id}` : 'Organization-wide'}</td>
      <td>
        <Time value={k.created_at} />
      </td>
      <td>{k.disabled ? <span class="badge off">Disabled</span> : <span class="badge on">Active</span>}</td>
      {mayWrite ? (
        <td>
          {k.disabled ? null : <ConfirmButton label="Disable" confirmLabel="Confirm disable" onConfirm={disable} />}
          <ErrorText error={error} />
        </td>
      ) : null}
    </tr>
  );
}

/** `GET /keys/{id}/ai`: a key's own AI limits, its budget spent and the model routes it may call (null: all). */
interface KeyAi {
  key_id: string;
  limits: Record<string, unknown> | null;
  budget?: unknown;
  routes: string[] | null;
}

/**
 * A key's route list (developer+) and its own AI limits (admin+), folded away under the key's id. The
 * keys list carries neither: they are read from `GET /keys/{id}/ai` when the fold is opened, so a list
 * of many keys costs one call, not one per key.
 */
function KeySettings({ k, me, onChanged }: { k: SecretKey; me: Me; onChanged: () => void }): JSX.Element {
  const [open, setOpen] = useState(false);
  const ai = useApi<KeyAi>(open ? `/keys/${seg(k.id)}/ai` : null);
  return (
    <details class="settings" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Settings</summary>
      <LoadState of={ai} what="the key's settings" />
      {ai.data ? <KeySettingsForm key={k.id} k={k} ai={ai.data} me={me} onChanged={() => (ai.reload(), onChanged())} /> : null}
    </details>
  );
}

function KeySettingsForm({ k, ai, me, onChanged }: { k: SecretKey; ai: KeyAi; me: Me; onChanged: () => void }): JSX.Element {
  const [routes, setRoutes] = useState((ai.routes ?? []).join(', '));
  const [limits, setLimits] = useState(ai.limits ? JSON.stringify(ai.limits, null, 2) : '{}');
  const { error, run } = useAction();
  const [saved, setSaved] = useState('');
  const save = (what: 'routes' | 'limits') => {
    setSaved('');
    return run(async () => {
      if (what === 'routes') {
        const list = routes.split(',').map((r) => r.trim()).filter(Boolean);
        await api('PUT', `/keys/${seg(k.id)}/routes`, { routes: list.length ? list : null });
      } else {
        let body: unknown;
        try {
          body = JSON.parse(limits);
        } catch {
          throw new Error('The limits are not valid JSON.');
        }
        await api('PUT', `/keys/${seg(k.id)}/limits`, body);
      }
      setSaved(what === 'routes' ? 'Routes saved.' : 'Limits saved.');
      onChanged();
    });
  };
  return (
    <>
      <TextField label="Model routes it may call" value={routes} onValue={setRoutes} hint="Comma-separated route ids; empty: every route." />
      <button type="button" onClick={() => void save('routes')}>
        Save routes
      </button>
      {can(me.person.role, 'admin') ? (
        <>
          <TextArea label="Its own AI limits (JSON)" value={limits} onValue={setLimits} rows={4} />
          <button type="button" onClick={() => void save('limits')}>
            Save limits
          </button>
        </>
      ) : ai.limits ? (
        <Json value={ai.limits} />
      ) : null}
      {ai.budget ? (
        <p class="hint">
          Budget: <code class="code">{JSON.stringify(ai.budget)}</code>
        </p>
      ) : null}
      <p role="status" class="hint">
        {saved}
      </p>
      <ErrorText error={error} />
    </>
  );
}
