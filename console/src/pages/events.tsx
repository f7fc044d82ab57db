/**
 * Events, per workspace: subscriptions (the webhook URL checks' refusals shown at the URL field),
 * deliveries with their attempts and last error, dead letters with replay, and the workspace's
 * statistics. The workspace and the tab live in the query string.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, asApiError, listOf, nextCursorOf, query, seg, useApi, type ApiError } from '../api';
import { setParams, useLocation } from '../router';
import { can, type Me } from '../roles';
import { cellText, ConfirmButton, CopyField, Empty, ErrorText, Json, Loading, Pager, Section, Select, Tabs, TextField, Time, useCursorPages } from '../ui';

interface Workspace {
  id: string;
  name: string;
}
interface Subscription {
  subscription_id: string;
  types: string[];
  delivery: { mode: string; url?: string };
  created_at?: string;
}
interface DeadLetter {
  event?: { event_id: string; type: string; data?: unknown; time?: string };
  event_id?: string;
  attempts?: number;
  dead_at?: string;
  replay_count?: number;
  last_error?: string;
}

const TABS = [
  ['subscriptions', 'Subscriptions'],
  ['deliveries', 'Deliveries'],
  ['dead', 'Dead letters'],
  ['stats', 'Statistics'],
] as const;

export function EventsPage({ me }: { me: Me }): JSX.Element {
  const loc = useLocation();
  const workspaces = useApi<unknown>('/workspaces');
  const list = listOf<Workspace>(workspaces.data, 'workspaces');
  const ws = loc.params.get('workspace') ?? list[0]?.id;
  const tab = loc.params.get('tab') ?? 'subscriptions';
  const mayWrite = can(me.person.role, 'developer');
  if (workspaces.loading && !workspaces.data) return <Loading what="workspaces" />;
  if (workspaces.error) return <ErrorText error={workspaces.error} />;
  if (!ws) return <Empty>No workspace yet: events are published to a workspace.</Empty>;
  const base = `/workspaces/${seg(ws)}`;
  return (
    <>
      <div class="inline-form">
        <Select label="Workspace" value={ws} onValue={(v) => setParams({ workspace: v }, { push: true })} options={list.map((w) => [w.id, `${w.name} (${w.id})`] as const)} />
      </div>
      <Tabs label="Event views" tabs={TABS} current={tab} href={(id) => `/events?workspace=${encodeURIComponent(ws)}&tab=${id}`} />
      {tab === 'deliveries' ? (
        <Deliveries key={ws} base={base} />
      ) : tab === 'dead' ? (
        <DeadLetters key={ws} base={base} mayReplay={mayWrite} />
      ) : tab === 'stats' ? (
        <Stats key={ws} base={base} />
      ) : (
        <Subscriptions key={ws} base={base} mayWrite={mayWrite} />
      )}
    </>
  );
}

function Subscriptions({ base, mayWrite }: { base: string; mayWrite: boolean }): JSX.Element {
  const subs = useApi<unknown>(`${base}/subscriptions`);
  const list = listOf<Subscription>(subs.data, 'subscriptions');
  const [error, setError] = useState<ApiError | undefined>();
  const [secret, setSecret] = useState<{ id: string; secret: string } | undefined>();
  return (
    <>
      <Section title="Subscriptions">
        {subs.loading && !subs.data ? <Loading what="subscriptions" /> : null}
        <ErrorText error={subs.error} />
        {subs.data && list.length === 0 ? <Empty>No subscriptions in this workspace.</Empty> : null}
        {list.length ? (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Subscription</th>
                  <th scope="col">Types</th>
                  <th scope="col">Delivery</th>
                  <th scope="col">Created</th>
                  {mayWrite ? <th scope="col">Actions</th> : null}
                </tr>
              </thead>
              <tbody>
                {list.map((s) => (
                  <tr key={s.subscription_id}>
                    <td>
                      <code class="mono">{s.subscription_id}</code>
                    </td>
                    <td>{(s.types ?? []).join(', ')}</td>
                    <td>
                      {s.delivery?.mode}
                      {s.delivery?.url ? (
                        <>
                          {' '}
                          <code class="mono">{s.delivery.url}</code>
                        </>
                      ) : null}
                    </td>
                    <td>
                      <Time value={s.created_at} />
                    </td>
                    {mayWrite ? (
                      <td class="actions">
                        {s.delivery?.mode === 'webhook' ? (
                          <button
                            type="button"
                            onClick={async () => {
                              setError(undefined);
                              try {
                                const a = await api<{ signing_secret: string }>('POST', `${base}/subscriptions/${seg(s.subscription_id)}/rotate-secret`);
                                setSecret({ id: s.subscription_id, secret: a.signing_secret });
                              } catch (err) {
                                setError(asApiError(err));
                              }
                            }}
                          >
                            Rotate secret
                          </button>
                        ) : null}
                        <ConfirmButton
                          label="Delete"
                          confirmLabel="Confirm delete"
                          onConfirm={async () => {
                            setError(undefined);
                            try {
                              await api('DELETE', `${base}/subscriptions/${seg(s.subscription_id)}`);
                              subs.reload();
                            } catch (err) {
                              setError(asApiError(err));
                            }
                          }}
                        />
                      </td>
                    ) : null}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
        <ErrorText error={error} />
        {secret ? <CopyField label={`Signing secret of ${secret.id} (shown once)`} value={secret.secret} /> : null}
      </Section>
      {mayWrite ? (
        <CreateSubscription
          base={base}
          onCreated={(id, s) => {
            if (s) setSecret({ id, secret: s });
            subs.reload();
          }}
        />
      ) : null}
    </>
  );
}

/** Which form field an Events API refusal is about: the URL checks' codes name the URL. */
const isUrlError = (e: ApiError) => e.code.startsWith('url_') || e.code === 'invalid_url' || (e.param ?? '').includes('url');

function CreateSubscription({ base, onCreated }: { base: string; onCreated: (id: string, secret?: string) => void }): JSX.Element {
  const [types, setTypes] = useState('');
  const [mode, setMode] = useState('webhook');
  const [url, setUrl] = useState('');
  const [error, setError] = useState<ApiError | undefined>();
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    try {
      const s = await api<Subscription & { signing_secret?: string }>('POST', `${base}/subscriptions`, {
        types: types.split(/[\s,]+/).filter(Boolean),
        delivery: mode === 'webhook' ? { mode, url } : { mode },
      });
      setTypes('');
      setUrl('');
      onCreated(s.subscription_id, s.signing_secret);
    } catch (err) {
      setError(asApiError(err));
    }
  };
  const urlError = error && isUrlError(error) ? error : undefined;
  const typesError = error && (error.param ?? '').startsWith('types') ? error : undefined;
  return (
    <Section title="New subscription">
      <form class="stack" onSubmit={submit} aria-label="New subscription">
        <TextField label="Event types" value={types} onValue={setTypes} hint="1 to 20 patterns: *, an exact type, or a prefix like order.*" error={typesError} />
        <Select
          label="Delivery"
          value={mode}
          onValue={setMode}
          options={[
            ['webhook', 'webhook: POST to a URL'],
            ['pull', 'pull: lease and acknowledge'],
            ['websocket', 'websocket: a stream'],
          ]}
        />
        {mode === 'webhook' ? <TextField label="Webhook URL" type="url" value={url} onValue={setUrl} hint="Public HTTPS on port 443" error={urlError} /> : null}
        {error && !urlError && !typesError ? <ErrorText error={error} /> : null}
        <button type="submit" class="primary">
          Create subscription
        </button>
      </form>
    </Section>
  );
}

function Deliveries({ base }: { base: string }): JSX.Element {
  const pages = useCursorPages();
  const deliveries = useApi<unknown>(`${base}/deliveries${query({ cursor: pages.cursor })}`);
  const list = listOf<Record<string, unknown>>(deliveries.data, 'deliveries');
  return (
    <Section title="Deliveries">
      {deliveries.loading && !deliveries.data ? <Loading what="deliveries" /> : null}
      <ErrorText error={deliveries.error} />
      {deliveries.data && list.length === 0 ? <Empty>No deliveries yet.</Empty> : null}
      {list.map((d, i) => (
        <details key={String(d.event_id ?? i)} class="row">
          <summary>
            <code class="mono">{cellText(d.event_id)}</code> {cellText(d.type)} · {cellText(d.status)} · attempts {cellText(d.attempts ?? (Array.isArray(d.attempt_log) ? d.attempt_log.length : undefined))}
            {d.last_error ? <> · last error <code class="code">{cellText(d.last_error)}</code></> : null}
          </summary>
          <Json value={d} />
        </details>
      ))}
      <Pager label="Deliveries" page={pages.page} nextCursor={nextCursorOf(deliveries.data)} onNext={pages.next} onPrevious={pages.previous} />
    </Section>
  );
}

function DeadLetters({ base, mayReplay }: { base: string; mayReplay: boolean }): JSX.Element {
  const dead = useApi<unknown>(`${base}/dead`);
  const list = listOf<DeadLetter>(dead.data, 'dead', 'dead_letters');
  const [error, setError] = useState<ApiError | undefined>();
  const [done, setDone] = useState('');
  return (
    <Section title="Dead letters">
      <p class="lead">Events whose webhook deliveries failed every attempt, kept 30 days. Replay sends one again.</p>
      {dead.loading && !dead.data ? <Loading what="dead letters" /> : null}
      <ErrorText error={dead.error} />
      {dead.data && list.length === 0 ? <Empty>No dead letters.</Empty> : null}
      {list.length ? (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Type</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last error</th>
                <th scope="col">Dead since</th>
                <th scope="col">Replays</th>
                {mayReplay ? <th scope="col">Actions</th> : null}
              </tr>
            </thead>
            <tbody>
              {list.map((d) => {
                const id = d.event?.event_id ?? d.event_id ?? '';
                return (
                  <tr key={id}>
                    <td>
                      <code class="mono">{id}</code>
                      <details>
                        <summary>Data</summary>
                        <Json value={d.event?.data} />
                      </details>
                    </td>
                    <td>{d.event?.type ?? '—'}</td>
                    <td>{d.attempts ?? '—'}</td>
                    <td>{d.last_error ? <code class="code">{d.last_error}</code> : '—'}</td>
                    <td>
                      <Time value={d.dead_at} />
                    </td>
                    <td>{d.replay_count ?? 0}</td>
                    {mayReplay ? (
                      <td>
                        <button
                          type="button"
                          onClick={async () => {
                            setError(undefined);
                            setDone('');
                            try {
                              await api('POST', `${base}/dead/${seg(id)}/replay`);
                              setDone(`Replayed ${id}.`);
                              dead.reload();
                            } catch (err) {
                              setError(asApiError(err));
                            }
                          }}
                        >
                          Replay
                        </button>
                      </td>
                    ) : null}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
      <p role="status" class="hint">
        {done}
      </p>
      <ErrorText error={error} />
    </Section>
  );
}

function Stats({ base }: { base: string }): JSX.Element {
  const stats = useApi<Record<string, unknown>>(`${base}/stats`);
  return (
    <Section title="Statistics">
      {stats.loading && !stats.data ? <Loading what="statistics" /> : null}
      <ErrorText error={stats.error} />
      {stats.data ? (
        <dl class="stats">
          {Object.entries(stats.data).map(([k, v]) => (
            <div key={k}>
              <dt>{k.replace(/_/g, ' ')}</dt>
              <dd>{cellText(v)}</dd>
            </div>
          ))}
        </dl>
      ) : null}
    </Section>
  );
}
