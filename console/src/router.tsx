/**
 * History routing in a few lines: the path picks the page, the query string holds a page's own state
 * (the database open, the tab, the filters), so a reload or a shared link shows the same view.
 * The server answers index.html for every page path (docs/decisions/console-front-end.md).
 */
import { useEffect, useState } from 'preact/hooks';
import type { AnchorHTMLAttributes, JSX, TargetedMouseEvent } from 'preact';

export interface Location {
  path: string;
  params: URLSearchParams;
  hash: string;
}

const listeners = new Set<() => void>();
const current = (): Location => ({ path: window.location.pathname, params: new URLSearchParams(window.location.search), hash: window.location.hash });

window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (options.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  listeners.forEach((l) => l());
  // A new page starts at its top; the focus moves to its heading (App does that) for screen readers.
  window.scrollTo(0, 0);
}

/** Changes the query string of the page shown (its state), without a new history entry per keystroke. */
export function setParams(changes: Record<string, string | null | undefined>, options: { push?: boolean } = {}): void {
  const params = new URLSearchParams(window.location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === '') params.delete(k);
    else params.set(k, v);
  }
  const s = params.toString();
  const to = window.location.pathname + (s ? `?${s}` : '');
  if (options.push) history.pushState(null, '', to);
  else history.replaceState(null, '', to);
  listeners.forEach((l) => l());
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const update = () => setLoc(current());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return loc;
}

/** An in-app link: a plain <a href> (open in a new tab works) whose ordinary click stays in the page. */
export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }): JSX.Element {
  const onClick = (e: TargetedMouseEvent<HTMLAnchorElement>) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(props.href);
  };
  return <a {...props} onClick={onClick} />;
}
