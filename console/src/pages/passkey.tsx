/**
 * The passkey step after an invitation is accepted ("Add passkey" or "Skip"). Hidden until the console
 * API has its passkey routes (`POST /console/api/passkeys/options`, `POST /console/api/passkeys`):
 * then @simplewebauthn/browser's startRegistration runs between the two calls.
 */
import type { JSX } from 'preact';

/** Whether the console API serves passkeys yet; while false the invitation signs in straight away. */
export const PASSKEYS_READY = false;

export function PasskeyStep({ onDone }: { onDone: () => Promise<void> }): JSX.Element {
  return (
    <section class="stack" aria-label="Passkey">
      <p>Your password is set and you are signed in.</p>
      <p>A passkey lets you sign in with this device's screen lock instead of the password.</p>
      <div class="actions">
        <button type="button" class="primary" disabled>
          Add passkey
        </button>
        <button type="button" onClick={() => void onDone()}>
          Skip
        </button>
      </div>
    </section>
  );
}
