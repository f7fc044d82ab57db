/** `/sign-in`: email and password; on success the session cookie is set and the page asked for opens. */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { navigate } from '../router';
import { ErrorText, TextField, useAction } from '../ui';
import { localhostAddress, passkeysUsable, signInWithPasskey } from './passkey';

/** Only a path of this console (never `//host` or a URL): an open redirect would help a phisher. */
export const safeNext = (next: string | null): string => (next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/');

export function SignInPage({ onSignedIn, next }: { onSignedIn: () => Promise<void>; next: string | null }): JSX.Element {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { error, busy, run } = useAction();
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    document.title = 'Sign in · Console';
  }, []);

  const signIn = (call: () => Promise<unknown>) =>
    run(async () => {
      await call();
      await onSignedIn();
      navigate(safeNext(next), { replace: true });
    });
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!(await signIn(() => api('POST', '/session', { email: email.trim(), password })))) setPassword('');
  };

  /** With a passkey: the email, when typed, binds the sign-in to that person; none is needed (passkeys are discoverable). */
  const withPasskey = () => signIn(() => signInWithPasskey(email.trim() || undefined));
  const passkeys = passkeysUsable();
  const elsewhere = passkeys ? null : localhostAddress();

  return (
    <main id="main" class="narrow">
      <h1 ref={heading}>Sign in</h1>
      <form onSubmit={submit} class="stack" aria-label="Sign in" noValidate>
        <TextField label="Email" type="email" value={email} onValue={setEmail} autoComplete="username" name="email" required />
        <TextField label="Password" type="password" value={password} onValue={setPassword} autoComplete="current-password" name="password" required />
        <ErrorText error={error} />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      {passkeys ? (
        <p>
          <button type="button" disabled={busy} onClick={() => void withPasskey()}>
            Sign in with a passkey
          </button>
        </p>
      ) : elsewhere ? (
        <p class="muted">
          To sign in with a passkey, open the console at <a href={elsewhere}>{elsewhere}</a>.
        </p>
      ) : null}
      <p class="muted">Access is by invitation: ask an owner or admin of your organization for one.</p>
    </main>
  );
}
