/**
 * `/invite#<token>`: the invitation link. The token sits in the fragment, so the browser never sends
 * it in a request line, a Referer or a server log; the page reads it and asks the API what it is
 * for (in a POST body: access logs record paths), the person sets a password and is signed in at once.
 */
import type { JSX } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, ApiError, asApiError } from '../api';
import { navigate } from '../router';
import { ErrorText, Loading, TextField, Time, useAction } from '../ui';
import { PASSKEYS_READY, PasskeyStep } from './passkey';

interface Invitation {
  email: string;
  role: string;
  organization: { id: string; name: string };
  expires_at: string;
}

/** What each refusal means to the person holding the link (the API's message follows). */
const INVITATION_TROUBLE: Record<string, string> = {
  invitation_not_found: 'This invitation link is not known. Check that you opened the whole link, or ask for a new one.',
  invitation_used: 'This invitation has been used already. Sign in instead, or ask for a new invitation.',
  invitation_expired: 'This invitation has expired. Ask the person who invited you for a new one.',
};

export const MIN_PASSWORD_LENGTH = 12;

export function InvitePage({ onSignedIn }: { onSignedIn: () => Promise<void> }): JSX.Element {
  const token = useMemo(() => decodeURIComponent(window.location.hash.slice(1)), []);
  const [invitation, setInvitation] = useState<{ data?: Invitation; error?: ApiError; loading: boolean }>({ loading: !!token });
  useEffect(() => {
    if (!token) return;
    api<Invitation>('POST', '/invitation/lookup', { token }).then(
      (data) => setInvitation({ data, loading: false }),
      (err: unknown) => setInvitation({ error: asApiError(err), loading: false }),
    );
  }, [token]);
  const [password, setPassword] = useState('');
  const [confirm, setConfirm] = useState('');
  const { error, busy, submit } = useAction();
  const [accepted, setAccepted] = useState(false);

  const finish = async () => {
    await onSignedIn();
    navigate('/', { replace: true });
  };

  const accept = submit(async () => {
    if (password.length < MIN_PASSWORD_LENGTH) throw new ApiError(0, '', `Use at least ${MIN_PASSWORD_LENGTH} characters.`, 'password');
    if (password !== confirm) throw new ApiError(0, '', 'The two passwords differ.', 'password');
    await api('POST', '/invitation/accept', { token, password });
    // The token is spent: take it out of the address bar and the history entry.
    history.replaceState(null, '', '/invite');
    setAccepted(true);
    if (!PASSKEYS_READY) await finish();
  });

  let body: JSX.Element;
  if (!token) {
    body = <ErrorText error="This page opens from an invitation link; the link you followed has no invitation in it." />;
  } else if (invitation.loading) {
    body = <Loading what="the invitation" />;
  } else if (invitation.error) {
    body = (
      <>
        <p>{INVITATION_TROUBLE[invitation.error.code] ?? 'This invitation cannot be opened.'}</p>
        <ErrorText error={invitation.error} />
        <p>
          <a href="/sign-in">Sign in</a>
        </p>
      </>
    );
  } else if (accepted) {
    body = <PasskeyStep onDone={finish} />;
  } else {
    const inv = invitation.data!;
    const passwordError = error?.param === 'password' ? error : undefined;
    return (
      <main id="main" class="narrow">
        <h1>Join {inv.organization.name}</h1>
        <p>
          You are invited as <strong>{inv.role}</strong>. The invitation expires <Time value={inv.expires_at} />.
        </p>
        <form onSubmit={accept} class="stack" aria-label="Set your password" noValidate>
          <TextField label="Email" value={inv.email} readOnly autoComplete="username" name="email" />
          <TextField
            label="Password"
            type="password"
            value={password}
            onValue={setPassword}
            autoComplete="new-password"
            required
            minLength={MIN_PASSWORD_LENGTH}
            hint={`At least ${MIN_PASSWORD_LENGTH} characters; common and breached passwords are refused.`}
            error={passwordError}
          />
          <TextField label="Repeat the password" type="password" value={confirm} onValue={setConfirm} autoComplete="new-password" required />
          {error && !passwordError ? <ErrorText error={error} /> : null}
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Setting the password…' : 'Set password and sign in'}
          </button>
        </form>
      </main>
    );
  }
  return (
    <main id="main" class="narrow">
      <h1>Invitation</h1>
      {body}
    </main>
  );
}
