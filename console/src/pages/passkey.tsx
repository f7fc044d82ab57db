/**
 * Passkeys in the console (docs/decisions/console-passkeys.md): the step after an invitation is
 * accepted ("Add passkey" or "Skip"), the passkeys page (list, add, remove), and the calls the sign-in
 * page makes. @simplewebauthn/browser runs between the API's two calls of each ceremony; it is loaded
 * only when a ceremony starts, so the first page load does not carry it.
 */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, asApiError, seg, useApi, ApiError } from '../api';
import { ConfirmButton, ErrorText, LoadState, Section, Table, TextField, Time, useAction } from '../ui';

/** A WebAuthn RP ID must be a domain name: a page opened at an IP address (127.0.0.1) cannot use passkeys. */
const IP_HOST = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:.]+\])$/i;

/** Whether this browser, on this address, can use passkeys. */
export function passkeysUsable(): boolean {
  return typeof window !== 'undefined' && typeof window.PublicKeyCredential === 'function' && !IP_HOST.test(window.location.hostname);
}

/** Where the local console answers under `localhost` (the same server), for a page opened at 127.0.0.1. */
export function localhostAddress(): string | null {
  const { protocol, hostname, port, pathname } = window.location;
  return protocol === 'http:' && (hostname === '127.0.0.1' || hostname === '[::1]') ? `http://localhost${port ? `:${port}` : ''}${pathname}` : null;
}

/** Whether the passkey step follows an invitation's accept; without passkeys the invitation signs in straight away. */
export const PASSKEYS_READY = passkeysUsable();

/** The browser's refusal in words a person can act on (a cancelled prompt is the usual one). */
function ceremonyError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const name = error instanceof Error ? error.name : '';
  if (name === 'NotAllowedError' || name === 'AbortError') return new ApiError(0, 'passkey_cancelled', 'The passkey prompt was cancelled or timed out; try again.');
  if (name === 'InvalidStateError') return new ApiError(0, 'passkey_exists', 'This device holds a passkey for you already.');
  return asApiError(error);
}

const webauthn = () => import('@simplewebauthn/browser');

/** Adds a passkey to the signed-in person: options, the browser's prompt, the API's verification. */
export async function addPasskey(name?: string): Promise<void> {
  try {
    const optionsJSON = await api<Parameters<typeof import('@simplewebauthn/browser').startRegistration>[0]['optionsJSON']>('POST', '/passkeys/options');
    const { startRegistration } = await webauthn();
    const response = await startRegistration({ optionsJSON });
    await api('POST', '/passkeys', { response, ...(name ? { name } : {}) });
  } catch (error) {
    throw ceremonyError(error);
  }
}

/** Signs in with a passkey (the email, when typed, binds the challenge to that person); the session cookie is set. */
export async function signInWithPasskey(email?: string): Promise<void> {
  try {
    const optionsJSON = await api<Parameters<typeof import('@simplewebauthn/browser').startAuthentication>[0]['optionsJSON']>('POST', '/session/passkey/options', email ? { email } : {});
    const { startAuthentication } = await webauthn();
    const response = await startAuthentication({ optionsJSON });
    await api('POST', '/session/passkey', { response });
  } catch (error) {
    throw ceremonyError(error);
  }
}

export function PasskeyStep({ onDone }: { onDone: () => Promise<void> }): JSX.Element {
  const { error, busy, run } = useAction();
  const add = () =>
    run(async () => {
      await addPasskey();
      await onDone();
    });
  return (
    <section class="stack" aria-label="Passkey">
      <p>Your password is set and you are signed in.</p>
      <p>A passkey lets you sign in with this device's screen lock instead of the password. You can add one later under Security.</p>
      <ErrorText error={error} />
      <div class="actions">
        <button type="button" class="primary" disabled={busy} onClick={() => void add()}>
          {busy ? 'Adding the passkey…' : 'Add passkey'}
        </button>
        <button type="button" disabled={busy} onClick={() => void onDone()}>
          Skip
        </button>
      </div>
    </section>
  );
}

interface Passkey {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  backed_up: boolean;
}

/** `/security`: the signed-in person's passkeys; add one, remove one. */
export function PasskeysPage(): JSX.Element {
  const list = useApi<{ data: Passkey[] }>('/passkeys');
  const [name, setName] = useState('');
  const { error, busy, run, submit } = useAction();
  const [added, setAdded] = useState(false);
  const usable = passkeysUsable();
  const elsewhere = usable ? null : localhostAddress();
  useEffect(() => setAdded(false), [name]);

  const add = submit(async () => {
    await addPasskey(name.trim() || undefined);
    setName('');
    setAdded(true);
    list.reload();
  });
  const remove = (id: string) =>
    run(async () => {
      await api('DELETE', `/passkeys/${seg(id)}`);
      list.reload();
    });

  const items = list.data?.data ?? [];
  return (
    <>
      <Section title="Your passkeys">
        <LoadState of={list} what="your passkeys" count={items.length} empty="No passkeys yet: you sign in with your password." />
        {items.length ? (
          <Table columns={['Name', 'Added', 'Last used', 'Synced', 'Actions']}>
            {items.map((p) => (
              <tr key={p.id}>
                <td>{p.name}</td>
                <td>
                  <Time value={p.created_at} />
                </td>
                <td>{p.last_used_at ? <Time value={p.last_used_at} /> : 'never'}</td>
                <td>{p.backed_up ? 'yes' : 'no'}</td>
                <td>
                  <ConfirmButton label={`Remove ${p.name}`} confirmLabel={`Really remove ${p.name}`} onConfirm={() => remove(p.id)} />
                </td>
              </tr>
            ))}
          </Table>
        ) : null}
      </Section>
      <Section title="Add a passkey">
        {usable ? (
          <form onSubmit={add} class="stack" aria-label="Add a passkey" noValidate>
            <TextField label="Name (optional)" value={name} onValue={setName} hint="Which device or key it is, e.g. “Work laptop”." />
            <ErrorText error={error} />
            {added ? <p role="status">Passkey added.</p> : null}
            <button type="submit" class="primary" disabled={busy}>
              {busy ? 'Adding the passkey…' : 'Add passkey'}
            </button>
          </form>
        ) : (
          <>
            <p>Passkeys cannot be used here: {elsewhere ? 'a passkey belongs to a domain name, not an IP address.' : 'this browser does not support them.'}</p>
            {elsewhere ? (
              <p>
                Open the console at <a href={elsewhere}>{elsewhere}</a> (the same server) and sign in there to add one.
              </p>
            ) : null}
            <ErrorText error={error} />
          </>
        )}
      </Section>
    </>
  );
}
