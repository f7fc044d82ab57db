/**
 * The console's entry: who is signed in (`GET /console/api/me`), then the page the path names. The
 * invitation and sign-in pages need no session; every other page sits in the shell, whose
 * navigation lists only what the person's role may open.
 */
import { render, type ComponentType, type JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, asApiError, rememberCsrfToken, whenSignedOut, type ApiError } from './api';
import { Link, navigate, useLocation } from './router';
import { can, type Me, type Role } from './roles';
import { ErrorText, Loading } from './ui';
import { InvitePage } from './pages/invite';
import { SignInPage } from './pages/sign-in';
import { OverviewPage } from './pages/overview';
import { KeysPage } from './pages/keys';
import { ApplicationsPage } from './pages/applications';
import { RoutesPage } from './pages/routes';
import { DataPage } from './pages/data';
import { EventsPage } from './pages/events';
import { ActivityPage } from './pages/activity';
import { PeoplePage } from './pages/people';
import { ApiReferencePage } from './pages/api-reference';
import { PasskeysPage } from './pages/passkey';
import './styles.css';

export interface PageProps {
  me: Me;
}

interface PageDef {
  path: string;
  title: string;
  /** The least role that may open it (the API enforces the same). */
  least: Role;
  component: ComponentType<PageProps>;
}

export const PAGES: readonly PageDef[] = [
  { path: '/', title: 'Overview', least: 'viewer', component: OverviewPage },
  { path: '/keys', title: 'Keys', least: 'viewer', component: KeysPage },
  { path: '/applications', title: 'Applications', least: 'viewer', component: ApplicationsPage },
  { path: '/routes', title: 'Model routes', least: 'viewer', component: RoutesPage },
  { path: '/data', title: 'Data', least: 'viewer', component: DataPage },
  { path: '/events', title: 'Events', least: 'viewer', component: EventsPage },
  { path: '/activity', title: 'Activity', least: 'viewer', component: ActivityPage },
  { path: '/people', title: 'People', least: 'admin', component: PeoplePage },
  { path: '/api-reference', title: 'API reference', least: 'viewer', component: ApiReferencePage },
  // Every person's own sign-in: their passkeys (docs/decisions/console-passkeys.md).
  { path: '/security', title: 'Security', least: 'viewer', component: PasskeysPage },
];

const PUBLIC_PATHS = new Set(['/invite', '/sign-in']);

function App(): JSX.Element {
  const loc = useLocation();
  const [me, setMe] = useState<Me | undefined>();
  const [meError, setMeError] = useState<ApiError | undefined>();

  const loadMe = useCallback(async () => {
    try {
      const answer = await api<Me>('GET', '/me');
      rememberCsrfToken(answer.csrf_token);
      setMe(answer);
      setMeError(undefined);
    } catch (error) {
      const e = asApiError(error);
      setMe(undefined);
      if (e.status === 401) {
        const here = window.location.pathname + window.location.search;
        navigate(`/sign-in${here === '/' ? '' : `?next=${encodeURIComponent(here)}`}`, { replace: true });
      } else setMeError(e);
    }
  }, []);

  useEffect(() => {
    whenSignedOut(() => {
      setMe(undefined);
      navigate('/sign-in', { replace: true });
    });
  }, []);

  const isPublic = PUBLIC_PATHS.has(loc.path);
  useEffect(() => {
    if (!isPublic && !me) void loadMe();
  }, [isPublic, me, loadMe]);

  if (loc.path === '/invite') return <InvitePage onSignedIn={loadMe} />;
  if (loc.path === '/sign-in') return <SignInPage onSignedIn={loadMe} next={loc.params.get('next')} />;
  if (meError) {
    return (
      <main id="main" class="narrow">
        <h1>Console</h1>
        <ErrorText error={meError} />
        <button type="button" onClick={() => void loadMe()}>
          Try again
        </button>
      </main>
    );
  }
  if (!me) {
    return (
      <main id="main" class="narrow">
        <h1>Console</h1>
        <Loading />
      </main>
    );
  }
  return <Shell me={me} path={loc.path} onSignedOut={() => setMe(undefined)} />;
}

function Shell({ me, path, onSignedOut }: { me: Me; path: string; onSignedOut: () => void }): JSX.Element {
  const page = PAGES.find((p) => p.path === path);
  const allowed = page !== undefined && can(me.person.role, page.least);
  const title = page === undefined ? 'Page not found' : allowed ? page.title : 'Not allowed';
  const heading = useRef<HTMLHeadingElement>(null);
  const [signOutError, setSignOutError] = useState<ApiError | undefined>();

  useEffect(() => {
    document.title = `${title} · ${me.organization.name} · Console`;
  }, [title, me.organization.name]);
  // After a navigation the focus goes to the new page's heading (not left on the link clicked).
  const first = useRef(true);
  useEffect(() => {
    if (first.current) first.current = false;
    else heading.current?.focus();
  }, [path]);

  const signOut = async () => {
    try {
      await api('DELETE', '/session');
      onSignedOut();
      navigate('/sign-in', { replace: true });
    } catch (error) {
      setSignOutError(asApiError(error));
    }
  };

  const Page = page?.component;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link href="/" class="brand">
          Console
        </Link>
        <span class="org">{me.organization.name}</span>
        <span class="who">
          <span>{me.person.email}</span> <span class="role">{me.person.role}</span>
        </span>
        <button type="button" class="link" onClick={signOut}>
          Sign out
        </button>
      </header>
      <ErrorText error={signOutError} />
      <div class="layout">
        <nav class="side" aria-label="Console sections">
          <ul>
            {PAGES.filter((p) => can(me.person.role, p.least)).map((p) => (
              <li key={p.path}>
                <Link href={p.path} aria-current={p.path === path ? 'page' : undefined}>
                  {p.title}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          <h1 ref={heading} tabIndex={-1}>
            {title}
          </h1>
          {Page && allowed ? (
            <Page me={me} />
          ) : page ? (
            <p>Your role ({me.person.role}) cannot open this page; it needs {page.least} or above.</p>
          ) : (
            <p>
              There is no page at this address. <Link href="/">Go to the overview</Link>.
            </p>
          )}
        </main>
      </div>
    </>
  );
}

render(<App />, document.getElementById('app')!);
