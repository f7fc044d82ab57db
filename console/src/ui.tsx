/**
 * Small building blocks every page uses: error text, labelled fields, the copy field, paging, tabs, a
 * GET's state, a table's frame and a call's error (useAction), so each page says only what is its own.
 */
import type { ComponentChildren, InputHTMLAttributes, JSX } from 'preact';
import { useId, useRef, useState } from 'preact/hooks';
import { ApiError, asApiError, listOf, nextCursorOf, useApi, type Loaded } from './api';
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

/**
 * A call a form or button makes: it clears the last refusal, marks the call under way (`busy`) and
 * keeps the API's refusal to show where it happened. `run` answers whether the call worked; `submit`
 * wraps it for a form. A check of the page's own (a JSON parse) throws `new ApiError(0, '', message)`:
 * shown as plain text, without a code.
 */
export function useAction(): {
  error: ApiError | undefined;
  busy: boolean;
  run: (call: () => Promise<unknown>) => Promise<boolean>;
  /** A form's onSubmit: the page stays (no navigation), the call runs. */
  submit: (call: () => Promise<unknown>) => (e: Event) => void;
} {
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const run = async (call: () => Promise<unknown>): Promise<boolean> => {
    setError(undefined);
    setBusy(true);
    try {
      await call();
      return true;
    } catch (err) {
      setError(asApiError(err));
      return false;
    } finally {
      setBusy(false);
    }
  };
  const submit = (call: () => Promise<unknown>) => (e: Event) => {
    e.preventDefault();
    void run(call);
  };
  return { error, busy, run, submit };
}

/**
 * Where a GET's answer goes: "Loading…" until its first answer, its error, and `empty` when it
 * answered no rows (`count` 0).
 */
export function LoadState({ of, what, count, empty }: { of: Loaded<unknown>; what?: string; count?: number; empty?: ComponentChildren }): JSX.Element {
  return (
    <>
      {of.loading && !of.data ? <Loading what={what} /> : null}
      <ErrorText error={of.error} />
      {of.data && count === 0 && empty ? <Empty>{empty}</Empty> : null}
    </>
  );
}

/**
 * A table's frame: the scrolling wrapper, a caption for screen readers, the column heads (a falsy one
 * is left out: a column only some roles see), the rows the page renders. `region` names a wide table
 * the keyboard may scroll (focusable).
 */
export function Table({ columns, caption, region, children }: { columns: ReadonlyArray<string | false | null | undefined>; caption?: string; region?: string; children: ComponentChildren }): JSX.Element {
  return (
    <div class="table-wrap" {...(region ? { tabIndex: 0, role: 'region', 'aria-label': region } : {})}>
      <table>
        {caption ? <caption class="sr-only">{caption}</caption> : null}
        <thead>
          <tr>
            {columns.map((c, i) =>
              c ? (
                <th scope="col" key={i}>
                  {c}
                </th>
              ) : null,
            )}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
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

/** What a field's control carries to be read with its label, hint and error. */
interface ControlAria {
  id: string;
  'aria-describedby'?: string;
  'aria-invalid'?: true;
}

/**
 * A labelled control with its hint and error under it, read with it (`for`, `aria-describedby`,
 * `aria-invalid`): the frame of every field below.
 */
function Field({ label, hint, error, hideLabel, control, children }: { label: string; hint?: string; error?: ApiError | string | null; hideLabel?: boolean; control: (aria: ControlAria) => JSX.Element; children?: ComponentChildren }): JSX.Element {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = error ? `${id}-error` : undefined;
  return (
    <div class="field">
      <label for={id} class={hideLabel ? 'sr-only' : undefined}>
        {label}
      </label>
      {control({ id, 'aria-describedby': [hintId, errorId].filter(Boolean).join(' ') || undefined, 'aria-invalid': error ? true : undefined })}
      {hint ? (
        <p class="hint" id={hintId}>
          {hint}
        </p>
      ) : null}
      <ErrorText error={error} id={errorId} />
      {children}
    </div>
  );
}

/** A labelled input; its hint and error are read with it (aria-describedby). */
export function TextField({ label, value, onValue, hint, error, type = 'text', ...rest }: InputProps): JSX.Element {
  // Preact 11 pairs each input `type` with its own attributes (a union); this field passes plain values.
  const input = (aria: ControlAria) => {
    const attrs = { ...rest, ...aria, type, value, onInput: (e: Event) => onValue?.((e.currentTarget as HTMLInputElement).value) } as unknown as InputHTMLAttributes<HTMLInputElement>;
    return <input {...attrs} />;
  };
  return <Field label={label} hint={hint} error={error} control={input} />;
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
  return (
    <Field
      label={label}
      hint={hint}
      error={error}
      control={(aria) => <textarea {...aria} rows={rows} value={value} spellcheck={false} onInput={(e) => onValue((e.currentTarget as HTMLTextAreaElement).value)} />}
    />
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
  return (
    <Field
      label={label}
      hint={hint}
      hideLabel={hideLabel}
      control={(aria) => (
        <select {...aria} value={value} onChange={(e) => onValue((e.currentTarget as HTMLSelectElement).value)}>
          {options.map(([v, text]) => (
            <option key={v} value={v}>
              {text}
            </option>
          ))}
        </select>
      )}
    />
  );
}

/**
 * A value to copy (a secret shown once, an invitation link): a read-only field, selected on focus,
 * and a Copy button that says when it worked.
 */
export function CopyField({ label, value, hint }: { label: string; value: string; hint?: string }): JSX.Element {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<'yes' | 'no' | undefined>();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('yes');
    } catch {
      // No clipboard permission (an insecure origin, a denied prompt): select it for Ctrl+C.
      input.current?.select();
      setCopied('no');
    }
  };
  return (
    <Field
      label={label}
      hint={hint}
      control={(aria) => (
        <div class="copy">
          <input {...aria} ref={input} readOnly value={value} class="mono" onFocus={(e) => (e.currentTarget as HTMLInputElement).select()} />
          <button type="button" onClick={copy}>
            Copy
          </button>
        </div>
      )}
    >
      <p class="hint" role="status">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'no' ? 'Could not copy: the text is selected, press Ctrl+C.' : ''}
      </p>
    </Field>
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
export function ConfirmButton({ label, confirmLabel, onConfirm, disabled }: { label: string; confirmLabel: string; onConfirm: () => Promise<unknown> | void; disabled?: boolean }): JSX.Element {
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
    <Table columns={[...columns, actions && 'Actions']} caption={caption}>
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
    </Table>
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
      <LoadState of={list} count={items.length} empty={empty} />
      {items.length ? <GenericTable items={items} caption={caption} actions={actions ? (item) => actions(item, list.reload) : undefined} /> : null}
      {next || pages.page > 1 ? <Pager label={caption} page={pages.page} nextCursor={next} onNext={pages.next} onPrevious={pages.previous} /> : null}
    </>
  );
}
