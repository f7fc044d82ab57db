/**
 * Overview: calls, tokens and spend by hour over the last 7 days (a bar chart, with the same numbers
 * as a table), the organization's limits and its feature switches (admins change them).
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, listOf, useApi } from '../api';
import { can, type Me } from '../roles';
import { ErrorText, Json, Loading, Section, Select, Table, TextField, useAction } from '../ui';

interface UsagePoint {
  /** The hour's start (ISO 8601) or Unix ms. */
  hour?: string | number;
  at?: string | number;
  calls?: number;
  tokens?: number;
  spend_usd?: number;
  spend?: number;
}

type Metric = 'calls' | 'tokens' | 'spend';
const METRICS: ReadonlyArray<readonly [Metric, string]> = [
  ['calls', 'Calls'],
  ['tokens', 'Tokens'],
  ['spend', 'Spend (USD)'],
];

const valueOf = (p: UsagePoint, m: Metric): number => (m === 'spend' ? (p.spend_usd ?? p.spend ?? 0) : (p[m] ?? 0));
const whenOf = (p: UsagePoint): string | number | undefined => p.hour ?? p.at;

export function OverviewPage({ me }: { me: Me }): JSX.Element {
  const overview = useApi<Record<string, unknown>>('/overview');
  const [metric, setMetric] = useState<Metric>('calls');
  if (overview.loading && !overview.data) return <Loading what="the overview" />;
  if (overview.error) return <ErrorText error={overview.error} />;
  const data = overview.data ?? {};
  const points = listOf<UsagePoint>(data.usage ?? data.series ?? data.hours ?? data, 'usage', 'series', 'hours');
  const totals = (['calls', 'tokens', 'spend'] as const).map((m) => [m, points.reduce((s, p) => s + valueOf(p, m), 0)] as const);
  return (
    <>
      <Section title="Last 7 days">
        <dl class="stats">
          {totals.map(([m, total]) => (
            <div key={m}>
              <dt>{METRICS.find(([id]) => id === m)![1]}</dt>
              <dd>{m === 'spend' ? `$${total.toFixed(2)}` : total.toLocaleString()}</dd>
            </div>
          ))}
        </dl>
        <Select label="Chart" value={metric} onValue={(v) => setMetric(v as Metric)} options={METRICS} />
        <BarChart points={points} metric={metric} />
      </Section>
      <Section title="Limits">
        {data.limits ? <Json value={data.limits} /> : <p class="muted">No limits set: the platform's defaults apply.</p>}
        {can(me.person.role, 'admin') ? <LimitsForm limits={data.limits} onChanged={overview.reload} /> : null}
      </Section>
      <Features features={data.features} mayChange={can(me.person.role, 'admin')} onChanged={overview.reload} />
    </>
  );
}

function BarChart({ points, metric }: { points: UsagePoint[]; metric: Metric }): JSX.Element {
  const label = METRICS.find(([m]) => m === metric)![1];
  if (points.length === 0) return <p class="muted">No calls in the last 7 days.</p>;
  const max = Math.max(...points.map((p) => valueOf(p, metric)), 1);
  const width = 700;
  const height = 160;
  const bar = width / points.length;
  const first = whenOf(points[0]!);
  const last = whenOf(points[points.length - 1]!);
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${width} ${height + 20}`} role="img" aria-labelledby="chart-title">
        <title id="chart-title">
          {label} by hour, {points.length} hours, highest {max.toLocaleString()}
        </title>
        <line x1="0" y1={height} x2={width} y2={height} class="axis" />
        {points.map((p, i) => {
          const v = valueOf(p, metric);
          const h = (v / max) * (height - 4);
          return (
            <rect key={i} x={i * bar + bar * 0.1} y={height - h} width={Math.max(bar * 0.8, 0.5)} height={h} class="bar">
              <title>
                {String(whenOf(p) ?? i)}: {v.toLocaleString()}
              </title>
            </rect>
          );
        })}
        <text x="0" y={height + 16} class="tick">
          {first === undefined ? '' : new Date(first).toLocaleDateString()}
        </text>
        <text x={width} y={height + 16} class="tick" text-anchor="end">
          {last === undefined ? '' : new Date(last).toLocaleDateString()}
        </text>
      </svg>
      <details>
        <summary>{label} as a table</summary>
        <Table columns={['Hour', label]}>
          {points
            .filter((p) => valueOf(p, metric) > 0)
            .map((p, i) => (
              <tr key={i}>
                <td>{String(whenOf(p) ?? '')}</td>
                <td>{valueOf(p, metric).toLocaleString()}</td>
              </tr>
            ))}
        </Table>
      </details>
    </figure>
  );
}

/** The organization's feature switches: `{name: enabled}` or a list of `{feature, enabled}`. */
function Features({ features, mayChange, onChanged }: { features: unknown; mayChange: boolean; onChanged: () => void }): JSX.Element {
  const { error, run } = useAction();
  const entries: Array<[string, boolean]> = Array.isArray(features)
    ? (features as Array<{ feature?: string; name?: string; enabled?: boolean }>).map((f) => [f.feature ?? f.name ?? '', f.enabled !== false])
    : features && typeof features === 'object'
      ? Object.entries(features as Record<string, unknown>).map(([k, v]) => [k, v === true || (typeof v === 'object' && v !== null && (v as { enabled?: boolean }).enabled !== false)])
      : [];
  const toggle = (name: string, enabled: boolean) =>
    run(async () => {
      await api('PUT', '/features', { [name]: enabled });
      onChanged();
    });
  return (
    <Section title="Feature switches">
      {entries.length === 0 ? <p class="muted">No feature switches.</p> : null}
      <ul class="plain">
        {entries.map(([name, enabled]) => (
          <li key={name}>
            {mayChange ? (
              <label>
                <input type="checkbox" checked={enabled} onChange={(e) => void toggle(name, (e.currentTarget as HTMLInputElement).checked)} /> {name}
              </label>
            ) : (
              <>
                {name}: <span class={`badge ${enabled ? 'on' : 'off'}`}>{enabled ? 'On' : 'Off'}</span>
              </>
            )}
          </li>
        ))}
      </ul>
      <ErrorText error={error} />
    </Section>
  );
}

const LIMIT_FIELDS = ['rpm', 'tpm', 'concurrency', 'budget_usd', 'knowledge_job_cap_usd', 'knowledge_keep_source_hours'] as const;

/** The organization's AI limits (admin): a number sets one, an empty field lifts it (`PUT /limits`, null lifts). */
function LimitsForm({ limits, onChanged }: { limits: unknown; onChanged: () => void }): JSX.Element {
  const current = (limits ?? {}) as Record<string, unknown>;
  const [values, setValues] = useState<Record<string, string>>(Object.fromEntries(LIMIT_FIELDS.map((f) => [f, typeof current[f] === 'number' ? String(current[f]) : ''])));
  const { error, submit } = useAction();
  const [saved, setSaved] = useState('');
  const send = submit(async () => {
    setSaved('');
    await api('PUT', '/limits', Object.fromEntries(LIMIT_FIELDS.map((f) => [f, values[f]!.trim() === '' ? null : Number(values[f])])));
    setSaved('Limits saved.');
    onChanged();
  });
  return (
    <details class="settings">
      <summary>Change limits</summary>
      <form class="stack" onSubmit={send} aria-label="Organization limits">
        {LIMIT_FIELDS.map((f) => (
          <TextField key={f} label={f} type="number" value={values[f]!} onValue={(v) => setValues({ ...values, [f]: v })} error={error?.param === f ? error : undefined} />
        ))}
        {error && !LIMIT_FIELDS.includes(error.param as (typeof LIMIT_FIELDS)[number]) ? <ErrorText error={error} /> : null}
        <button type="submit">Save limits</button>
        <p role="status" class="hint">
          {saved}
        </p>
      </form>
    </details>
  );
}
