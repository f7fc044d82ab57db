/**
 * The activity log: newest first, filtered by kind and time, paged by cursor. Every console action is
 * in it too, with the person as actor.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { listOf, nextCursorOf, query, useApi } from '../api';
import { setParams, useLocation } from '../router';
import { cellText, LoadState, Pager, Section, Select, Table, TextField, Time, useCursorPages } from '../ui';

interface ActivityRecord {
  id: string;
  at_ms: number;
  actor_kind: string | null;
  actor_id: string | null;
  kind: string;
  method: string | null;
  route: string | null;
  status: number | null;
  outcome: string | null;
  error_code: string | null;
  latency_ms: number | null;
  file_name?: string | null;
}

const KINDS = ['', 'api.call', 'console.action', 'record.write', 'record.delete', 'blob.write', 'blob.read', 'blob.delete', 'file.upload.completed', 'file.download', 'file.delete'];

/** `datetime-local`'s value (the browser's zone) to Unix ms, or undefined. */
const toMs = (local: string): number | undefined => (local ? new Date(local).getTime() : undefined);

export function ActivityPage(): JSX.Element {
  const loc = useLocation();
  const pages = useCursorPages();
  const kind = loc.params.get('kind') ?? '';
  const from = loc.params.get('from') ?? '';
  const to = loc.params.get('to') ?? '';
  const limit = loc.params.get('limit') ?? '50';
  const activity = useApi<unknown>(`/activity${query({ kind, from: toMs(from), to: toMs(to), limit, cursor: pages.cursor })}`);
  const items = listOf<ActivityRecord>(activity.data, 'items', 'activity');
  const [draft, setDraft] = useState({ kind, from, to, limit });
  const apply = (e: Event) => {
    e.preventDefault();
    pages.reset();
    setParams(draft);
  };
  return (
    <Section title="Activity">
      <form class="filters" onSubmit={apply} aria-label="Filter the activity log">
        <Select label="Kind" value={draft.kind} onValue={(v) => setDraft({ ...draft, kind: v })} options={KINDS.map((k) => [k, k || 'Every kind'] as const)} />
        <TextField label="From" type="datetime-local" value={draft.from} onValue={(v) => setDraft({ ...draft, from: v })} />
        <TextField label="To" type="datetime-local" value={draft.to} onValue={(v) => setDraft({ ...draft, to: v })} />
        <Select label="Per page" value={draft.limit} onValue={(v) => setDraft({ ...draft, limit: v })} options={['20', '50', '100', '500'].map((n) => [n, n] as const)} />
        <button type="submit">Apply</button>
      </form>
      <LoadState of={activity} what="activity" count={items.length} empty="Nothing in this window." />
      {/* The table scrolls sideways when wide: a region, focusable, so a keyboard can scroll it. */}
      {items.length ? (
        <Table columns={['When', 'Actor', 'Kind', 'Call', 'Status', 'Latency']} caption="Activity, newest first" region="Activity table">
          {items.map((a) => (
            <tr key={a.id}>
              <td>
                <Time value={a.at_ms} />
              </td>
              <td>
                {cellText(a.actor_kind)} <code class="mono">{cellText(a.actor_id)}</code>
              </td>
              <td>{a.kind}</td>
              <td>
                {a.method ? `${a.method} ` : ''}
                <code class="mono">{cellText(a.route)}</code>
                {a.file_name ? <> · {a.file_name}</> : null}
              </td>
              <td>
                {cellText(a.status)}
                {a.error_code ? <> <code class="code">{a.error_code}</code></> : null}
              </td>
              <td>{a.latency_ms === null || a.latency_ms === undefined ? '—' : `${a.latency_ms} ms`}</td>
            </tr>
          ))}
        </Table>
      ) : null}
      <Pager label="Activity" page={pages.page} nextCursor={nextCursorOf(activity.data)} onNext={pages.next} onPrevious={pages.previous} />
    </Section>
  );
}
