/** Small building blocks every page uses: error text, labelled fields, the copy field, paging, tabs. */
import type { ComponentChildren, InputHTMLAttributes, JSX } from 'preact';
import { useId, useState } from 'preact/hooks';
import { ApiError, listOf, nextCursorOf, useApi } from './api';
import { Link } from './router';

/** The API's own message and code, announced to screen readers when it appears. */
export function ErrorText({ error, id }: { error: ApiError | string | undefined | null; id?: string }): JSX.Element | null {
  if (!error) return null;
  if (typeof error === 'string') {
    return (
      <p class="error" role="alert" id={id}>
        {error}
      </p>
    );
  }
  return (
    <p class="error" role="alert" id={id}>
      {error.message}
      {error.code ? (
        <>
          {' '}
          <code class="code">{error.code}</code>
        </>
      ) : null}
    </p>
  );
}

export function Loading({ what }: { what?: string }): JSX.Element {
  return (
    <p class="muted" role="status">
      Loading{what ? ` ${what}` : ''}…
    </p>
  );
}

interface InputProps {
  label: string;
  value: string;
  onValue?: (value: string) => void;
  hint?: string;
  /** The API's error when it names this field (`param`), shown under it and tied to it. */
  error?: ApiError | string | null;
  type?: 'text' | 'email' | 'password' | 'url' | 'search' | 'datetime-local' | 'number';
  readOnly?: boolean;
  required?: boolean;
  minLength?: number;
  autoComplete?: string;
  name?: string;
  list?: string;
  placeholder?: string;
}

/** A labelled input; its hint and error are read with it (aria-describedby). */
export function TextField({ label, value, onValue, hint, error, type = 'text', ...rest }: InputProps): JSX.Element {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = error ? `${id}-error` : undefined;
  // Preact 11 pairs each input `type` with its own attributes (a union); this field passes plain values.
  const attrs = {
    ...rest,
    id,
    type,
    value,
    onInput: (e: Event) => onValue?.((e.currentTarget as HTMLInputElement).value),
    'aria-describedby': [hintId, errorId].filter(Boolean).join(' ') || undefined,
    'aria-invalid': error ? true : undefined,
  } as unknown as InputHTMLAttributes<HTMLInputElement>;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input {...attrs} />
      {hint ? (
        <p class="hint" id={hintId}>
          {hint}
        </p>
      ) : null}
      <ErrorText error={error} id={errorId} />
    </div>
  );
}

export function TextArea({
  label,
  value,
  onValue,
  hint,
  error,
  rows = 6,
}: {
  label: string;
  value: string;
  onValue: (v: string) => void;
  hint?: string;
  error?: ApiError | string | null;
  rows?: number;
}): JSX.Element {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = error ? `${id}-error` : undefined;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <textarea
        id={id}
        rows={rows}
        value={value}
        spellcheck={false}
        onInput={(e) => onValue((e.currentTarget as HTMLTextAreaElement).value)}
        aria-describedby={[hintId, errorId].filter(Boolean).join(' ') || undefined}
        aria-invalid={error ? true : undefined}
      />
      {hint ? (
        <p class="hint" id={hintId}>
          {hint}
        </p>
      ) : null}
      <ErrorText error={error} id={errorId} />
    </div>
  );
}

export function Select({
  label,
  value,
  onValue,
  options,
  hint,
  hideLabel,
}: {
  label: string;
  value: string;
  onValue: (v: string) => void;
  options: ReadonlyArray<readonly [value: string, text: string]>;
  hint?: string;
  /** Inside a table row the column says what it is: the label is read, not shown. */
  hideLabel?: boolean;
}): JSX.Element {
  const id = useId();
  return (
    <div class="field">
      <label for={id} class={hideLabel ? 'sr-only' : undefined}>
        {label}
      </label>
      <select id={id} value={value} onChange={(e) => onValue((e.currentTarget as HTMLSelectElement).value)} aria-describedby={hint ? `${id}-hint` : undefined}>
        {options.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
      {hint ? (
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
      ) : null}
    </div>
  );
}

/**
 * A value to copy (a secret shown once, an invitation link): a read-only field, selected on focus,
 * and a Copy button that says when it worked.
 */
export function CopyField({ label, value, hint }: { label: string; value: string; hint?: string }): JSX.Element {
  const id = useId();
  const [copied, setCopied] = useState<'yes' | 'no' | undefined>();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('yes');
    } catch {
      // No clipboard permission (an insecure origin, a denied prompt): select it for Ctrl+C.
      (document.getElementById(id) as HTMLInputElement | null)?.select();
      setCopied('no');
    }
  };
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <div class="copy">
        <input id={id} readOnly value={value} class="mono" onFocus={(e) => (e.currentTarget as HTMLInputElement).select()} aria-describedby={hint ? `${id}-hint` : undefined} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      {hint ? (
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
      ) : null}
      <p class="hint" role="status">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'no' ? 'Could not copy: the text is selected, press Ctrl+C.' : ''}
      </p>
    </div>
  );
}

/**
 * Cursor paging: the cursors of the pages seen so far, so "Previous" goes back without the API
 * paging backwards (its cursors are opaque and forward only).
 */
export function useCursorPages(): {
  cursor: string | undefined;
  page: number;
  next: (cursor: string) => void;
  previous: () => void;
  reset: () => void;
} {
  const [stack, setStack] = useState<string[]>([]);
  return {
    cursor: stack[stack.length - 1],
    page: stack.length + 1,
    next: (cursor) => setStack((s) => [...s, cursor]),
    previous: () => setStack((s) => s.slice(0, -1)),
    reset: () => setStack([]),
  };
}

export function Pager({ page, nextCursor, onNext, onPrevious, label }: { page: number; nextCursor: string | null; onNext: (c: string) => void; onPrevious: () => void; label: string }): JSX.Element {
  return (
    <nav class="pager" aria-label={`${label} pages`}>
      <button type="button" disabled={page <= 1} onClick={onPrevious}>
        Previous page
      </button>
      <span>Page {page}</span>
      <button type="button" disabled={!nextCursor} onClick={() => nextCursor && onNext(nextCursor)}>
        Next page
      </button>
    </nav>
  );
}

/** Sub-pages as links (the query string's `tab`), the one shown marked for assistive technology. */
export function Tabs({ label, tabs, current, href }: { label: string; tabs: ReadonlyArray<readonly [id: string, text: string]>; current: string; href: (id: string) => string }): JSX.Element {
  return (
    <nav class="tabs" aria-label={label}>
      <ul>
        {tabs.map(([id, text]) => (
          <li key={id}>
            <Link href={href(id)} aria-current={id === current ? 'page' : undefined}>
              {text}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }): JSX.Element {
  const id = useId();
  return (
    <section class="card" aria-labelledby={id}>
      <div class="card-head">
        <h2 id={id}>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

export function Empty({ children }: { children: ComponentChildren }): JSX.Element {
  return <p class="muted">{children}</p>;
}

/** A time from an ISO string or Unix milliseconds, in the browser's zone, with the exact value on hover. */
export function Time({ value }: { value: string | number | null | undefined }): JSX.Element {
  if (value === null || value === undefined || value === '') return <span class="muted">—</span>;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return <span>{String(value)}</span>;
  return (
    <time dateTime={date.toISOString()} title={date.toISOString()}>
      {date.toLocaleString()}
    </time>
  );
}

/** Any JSON value as text (a record's fields, an event's data): Preact escapes it, never HTML. */
export function Json({ value, inline }: { value: unknown; inline?: boolean }): JSX.Element {
  const text = value === undefined ? '' : typeof value === 'string' && inline ? value : JSON.stringify(value, null, inline ? 0 : 2);
  return inline ? <code class="mono">{text}</code> : <pre class="json">{text}</pre>;
}

/**
 * A destructive button that asks again in place ("Disable" → "Confirm disable" / "Cancel"): no modal
 * dialog to trap focus in, and a stray click does nothing.
 */
export function ConfirmButton({ label, confirmLabel, onConfirm, disabled }: { label: string; confirmLabel: string; onConfirm: () => Promise<void> | void; disabled?: boolean }): JSX.Element {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  if (!asking) {
    return (
      <button type="button" class="danger" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm">
      <button
        type="button"
        class="danger"
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          try {
            await onConfirm();
          } finally {
            setBusy(false);
            setAsking(false);
          }
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" onClick={() => setAsking(false)} disabled={busy}>
        Cancel
      </button>
    </span>
  );
}

/** A cell's text: scalars as they are, objects and arrays as compact JSON. */
export const cellText = (v: unknown): string => (v === null || v === undefined ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/**
 * A list whose fields this page does not know in advance (a resource a later console route serves):
 * a column for each field of its items (the first `maxColumns`), every value as text.
 */
export function GenericTable({ items, caption, maxColumns = 7, actions }: { items: Array<Record<string, unknown>>; caption: string; maxColumns?: number; actions?: (item: Record<string, unknown>) => JSX.Element | null }): JSX.Element {
  const columns = [...new Set(items.flatMap((i) => Object.keys(i)))].slice(0, maxColumns);
  return (
    <div class="table-wrap">
      <table>
        <caption class="sr-only">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
            {actions ? <th scope="col">Actions</th> : null}
          </tr>
        </thead>
        <tbody>
          {items.map((item, i) => (
            <tr key={i}>
              {columns.map((c) => (
                <td key={c} class="cell">
                  {cellText(item[c])}
                </td>
              ))}
              {actions ? <td>{actions(item)}</td> : null}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A list from the console API shown as a table, with its loading state, error and paging. */
export function ListFromApi({ path, keys, caption, empty, actions }: { path: string; keys: string[]; caption: string; empty: string; actions?: (item: Record<string, unknown>, reload: () => void) => JSX.Element | null }): JSX.Element {
  const pages = useCursorPages();
  const sep = path.includes('?') ? '&' : '?';
  const list = useApi<unknown>(pages.cursor ? `${path}${sep}cursor=${encodeURIComponent(pages.cursor)}` : path);
  const items = listOf<Record<string, unknown>>(list.data, ...keys);
  const next = nextCursorOf(list.data);
  return (
    <>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data && items.length === 0 ? <Empty>{empty}</Empty> : null}
      {items.length ? <GenericTable items={items} caption={caption} actions={actions ? (item) => actions(item, list.reload) : undefined} /> : null}
      {next || pages.page > 1 ? <Pager label={caption} page={pages.page} nextCursor={next} onNext={pages.next} onPrevious={pages.previous} /> : null}
    </>
  );
}
