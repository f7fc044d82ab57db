/**
 * Events, per workspace: subscriptions (the webhook URL checks' refusals shown at the URL field),
 * deliveries with their attempts and last error, dead letters with replay, the workspace's
 * statistics, and a live tail of its published events. The workspace and the tab live in the query
 * string.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, asApiError, listOf, nextCursorOf, query, seg, useApi, type ApiError } from '../api';
import { setParams, useLocation } from '../router';
import { can, type Me } from '../roles';
import { cellText, ConfirmButton, CopyField, Empty, ErrorText, Json, Loading, LoadState, Pager, Section, Select, Table, Tabs, TextField, Time, useCursorPages } from '../ui';

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
  ['tail', 'Live tail'],
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
        <Deliveries key={ws} base={base} subscription={loc.params.get('subscription')} />
      ) : tab === 'dead' ? (
        <DeadLetters key={ws} base={base} mayReplay={mayWrite} />
      ) : tab === 'stats' ? (
        <Stats key={ws} base={base} />
      ) : tab === 'tail' ? (
        <LiveTail key={ws} base={base} />
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

/** A delivery log row (GET …/deliveries): one event's push delivery to one subscription. */
interface Delivery {
  event_id: string;
  type: string | null;
  status: 'retrying' | 'completed' | 'dead';
  attempts: number;
  last_error: string | null;
  last_attempt_at: string;
  next_attempt_at: string | null;
}

/** A subscription's recent push deliveries (webhook, eventbridge): the log is kept per subscription. */
function Deliveries({ base, subscription }: { base: string; subscription: string | null }): JSX.Element {
  const subs = useApi<unknown>(`${base}/subscriptions`);
  const pushed = listOf<Subscription>(subs.data, 'subscriptions').filter((s) => s.delivery?.mode === 'webhook' || s.delivery?.mode === 'eventbridge');
  const current = subscription && pushed.some((s) => s.subscription_id === subscription) ? subscription : pushed[0]?.subscription_id;
  return (
    <Section title="Deliveries">
      <p class="lead">Each event sent to a subscription: retrying, completed or dead, with its attempts and the last attempt's error, kept 30 days.</p>
      <LoadState of={subs} what="subscriptions" count={pushed.length} empty="No webhook subscriptions in this workspace: deliveries are theirs." />
      {current ? (
        <>
          <div class="inline-form">
            <Select label="Subscription" value={current} onValue={(v) => setParams({ subscription: v }, { push: true })} options={pushed.map((s) => [s.subscription_id, `${s.subscription_id} (${s.delivery.url ?? s.delivery.mode})`] as const)} />
          </div>
          <DeliveryLog key={current} base={base} subscription={current} />
        </>
      ) : null}
    </Section>
  );
}

function DeliveryLog({ base, subscription }: { base: string; subscription: string }): JSX.Element {
  const pages = useCursorPages();
  const deliveries = useApi<unknown>(`${base}/deliveries${query({ subscription_id: subscription, cursor: pages.cursor })}`);
  const list = listOf<Delivery>(deliveries.data, 'deliveries');
  return (
    <>
      <LoadState of={deliveries} what="deliveries" count={list.length} empty="No deliveries to this subscription yet." />
      {list.length ? (
        <Table caption={`Deliveries to ${subscription}`} region="Deliveries" columns={['Event', 'Type', 'Status', 'Attempts', 'Last error', 'Last attempt', 'Next attempt']}>
          {list.map((d) => (
            <tr key={d.event_id}>
              <td>
                <code class="mono">{d.event_id}</code>
              </td>
              <td>{d.type ?? '—'}</td>
              <td>{d.status}</td>
              <td>{d.attempts}</td>
              <td>{d.last_error ? <code class="code">{d.last_error}</code> : '—'}</td>
              <td>
                <Time value={d.last_attempt_at} />
              </td>
              <td>{d.next_attempt_at ? <Time value={d.next_attempt_at} /> : '—'}</td>
            </tr>
          ))}
        </Table>
      ) : null}
      <button type="button" disabled={deliveries.loading} onClick={deliveries.reload}>
        Refresh
      </button>
      <Pager label="Deliveries" page={pages.page} nextCursor={nextCursorOf(deliveries.data)} onNext={pages.next} onPrevious={pages.previous} />
    </>
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

/** An event as the tail answers it: the Events API's envelope. */
interface TailEvent {
  event_id: string;
  type: string;
  time: string;
  source?: string;
  data?: unknown;
}
interface TailAnswer {
  events: TailEvent[];
  next_cursor: string;
  has_more: boolean;
}

/** How often the tail asks for what came next. */
const TAIL_POLL_MS = 2000;
/** Rows kept on the page: the oldest fall off below the newest 200. */
const TAIL_ROWS = 200;
/** A tail left running pauses itself after this long: an open tab does not poll (and keep its session alive) for ever. */
const TAIL_RUN_MS = 15 * 60 * 1000;
/** Screen readers hear a count of the new events at most this often, never each event. */
const TAIL_ANNOUNCE_MS = 10 * 1000;
/** Pages read at once while more have come than one answer holds, before waiting again. */
const TAIL_CATCH_UP = 5;

/**
 * The workspace's published events as they come, newest at the top. The page asks the console API for
 * the events after the last one it shows (`GET …/events/tail?after=`): it reads the stored events and
 * takes nothing from any subscription (docs/decisions/console-live-tail.md). Polling stops while the
 * tab is hidden and after TAIL_RUN_MS; the event data is shown as text.
 */
function LiveTail({ base }: { base: string }): JSX.Element {
  const [running, setRunning] = useState(false);
  const [hidden, setHidden] = useState(() => document.visibilityState === 'hidden');
  const [rows, setRows] = useState<TailEvent[]>([]);
  const [error, setError] = useState<ApiError | undefined>();
  const [note, setNote] = useState('');
  const [announcement, setAnnouncement] = useState('');
  /** The last event shown: the next read's `after`. */
  const cursor = useRef<string | undefined>(undefined);
  const startedAt = useRef(0);
  /** New events not yet announced, and when the last announcement was made. */
  const unannounced = useRef(0);
  const lastAnnounced = useRef(0);

  useEffect(() => {
    const onVisibility = () => setHidden(document.visibilityState === 'hidden');
    document.addEventListener('visibilitychange', onVisibility);
    return () => document.removeEventListener('visibilitychange', onVisibility);
  }, []);

  /** The count of new events not yet announced ('' when none or too soon, unless `force`); resets it. */
  const pending = (force: boolean): string => {
    const now = Date.now();
    if (!unannounced.current || (!force && now - lastAnnounced.current < TAIL_ANNOUNCE_MS)) return '';
    const n = unannounced.current;
    unannounced.current = 0;
    lastAnnounced.current = now;
    return `${n} new ${n === 1 ? 'event' : 'events'}.`;
  };

  useEffect(() => {
    if (!running || hidden) return;
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      if (Date.now() - startedAt.current > TAIL_RUN_MS) {
        setRunning(false);
        setNote(`Paused after ${TAIL_RUN_MS / 60000} minutes. Start again to continue from the last event shown.`);
        return;
      }
      try {
        let fresh: TailEvent[] = [];
        for (let round = 0; round < TAIL_CATCH_UP; round++) {
          const answer = await api<TailAnswer>('GET', `${base}/events/tail${query({ after: cursor.current, limit: cursor.current ? 100 : 20 })}`);
          if (!live) return;
          cursor.current = answer.next_cursor;
          fresh = fresh.concat(answer.events);
          if (!answer.has_more) break;
        }
        setError(undefined);
        if (fresh.length) {
          setRows((old) => fresh.slice().reverse().concat(old).slice(0, TAIL_ROWS));
          unannounced.current += fresh.length;
        }
        const said = pending(false);
        if (said) setAnnouncement(said);
      } catch (err) {
        if (!live) return;
        // A failed read stops the tail: the person sees why and starts it again (no retry storm).
        setError(asApiError(err));
        setRunning(false);
        return;
      }
      timer = setTimeout(poll, TAIL_POLL_MS);
    };
    void poll();
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [running, hidden, base]);

  const start = () => {
    setError(undefined);
    setNote('');
    startedAt.current = Date.now();
    lastAnnounced.current = Date.now();
    setRunning(true);
    setAnnouncement('Live tail started.');
  };
  const pause = () => {
    setRunning(false);
    setAnnouncement(`Live tail paused. ${pending(true)}`.trim());
  };
  const state = running ? (hidden ? 'Waiting: the tab is hidden.' : `Watching: new events appear at the top every ${TAIL_POLL_MS / 1000} seconds.`) : 'Paused.';

  return (
    <Section
      title="Live tail"
      actions={
        running ? (
          <button type="button" onClick={pause}>
            Pause
          </button>
        ) : (
          <button type="button" class="primary" onClick={start}>
            {cursor.current ? 'Resume' : 'Start'}
          </button>
        )
      }
    >
      <p class="lead">
        The events published to this workspace, newest first, the last {TAIL_ROWS} kept. Watching takes nothing from any subscription: every subscriber still receives every event.
      </p>
      <p class="hint">{state}</p>
      {note ? <p class="hint">{note}</p> : null}
      <p class="sr-only" role="status" aria-live="polite" aria-atomic="true">
        {announcement}
      </p>
      <ErrorText error={error} />
      {rows.length === 0 ? (
        <Empty>{running ? 'No events yet: publish one and it appears here.' : 'Start the tail to watch the events published to this workspace.'}</Empty>
      ) : (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Live tail events">
          <table>
            <caption>{rows.length === 1 ? '1 event' : `${rows.length} events`}</caption>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Type</th>
                <th scope="col">Time</th>
                <th scope="col">Data</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e) => (
                <tr key={e.event_id}>
                  <td>
                    <code class="mono">{e.event_id}</code>
                  </td>
                  <td>{e.type}</td>
                  <td>
                    <Time value={e.time} />
                  </td>
                  <td class="cell">
                    <code class="mono">{JSON.stringify(e.data)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}
